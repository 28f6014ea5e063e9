"""The replay report read at a glance: a failure banner on top, key findings generated from the numbers, a
glossary for every metric heading, small-sample and zero-width warnings, the seeds always stated, and FakeR/
RealR drawn as points with their bootstrap intervals. Runs are built directly from ScoreRow objects written
with gateway.batch.results, so each test controls exactly what the report must say."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from matplotlib.container import ErrorbarContainer

from gateway.evaluation.caveats import SMALL_SAMPLE_ANCHORS, UNRECORDED_CORPUS_SEED
from gateway.evaluation.glossary import glossary, term_for
from gateway.evaluation.plots import auc_figure, heatmap_figure, recall_figure
from gateway.evaluation.report import build_report, evaluate_run
from gateway.evaluation.sweeps import sweep_tables
from gateway.evaluation.tables import pct, report_tables
from tests.support.report import DETECTORS, _fail, _run
from tests.support.report import paired_rows as _rows

REPLICATES = 200
CONDITIONS = ["original", "spatial", "full"]


class _Text(HTMLParser):
    """The text a reader of report.html sees, and the text of its failure banner."""

    def __init__(self) -> None:
        super().__init__()
        self.text, self.banner, self._depth = [], [], 0

    def handle_starttag(self, tag, attrs):
        if self._depth or ("class", "failures") in attrs:
            self._depth += tag == "div"

    def handle_endtag(self, tag):
        self._depth -= bool(self._depth) and tag == "div"

    def handle_data(self, data):
        self.text.append(data)
        if self._depth:
            self.banner.append(data)


def _html(path: Path) -> tuple[str, str]:
    page = _Text()
    page.feed(path.read_text())
    return " ".join(" ".join(page.text).split()), " ".join(" ".join(page.banner).split())


def _report(run: Path) -> tuple[str, str, str, dict]:
    paths = build_report(run, replicates=REPLICATES)
    text, banner = _html(paths["html"])
    return paths["md"].read_text(), text, banner, json.loads(paths["json"].read_text())


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> tuple[Path, str, str, str, dict]:
    """40 anchors, beta collapsing under full; nothing fails."""
    run = _run(tmp_path_factory.mktemp("clean"), _rows(40, collapse="beta"))
    return (run, *_report(run))


def test_a_run_with_error_rows_opens_with_a_failure_banner(tmp_path, clean):
    rows = _rows(40)
    first_video = "moov atom not found in a000_genA.mp4"
    refused = "scorer at http://scorer:8000 refused the connection"
    out = []
    for r in rows:
        if r.detector == "beta" and r.condition == "full" and r.anchor_id in ("a000", "a001"):
            message = first_video if not any(o.error_kind == "video" for o in out) else "moov atom not found"
            r = _fail(r, "video", "DecodeError", message)
        elif r.detector == "alpha" and r.condition == "spatial":  # a whole cell without a score
            r = _fail(r, "infra", "ConnectionError", refused)
        out.append(r)
    video, infra = (sum(r.error_kind == kind for r in out) for kind in ("video", "infra"))
    videos = len({r.video_id for r in out if r.error_kind == "video"})
    md, text, banner, report = _report(_run(tmp_path, out))

    top = md.split("## Key findings")[0]
    for page in (top, banner):
        assert "FAILURES" in page
        assert f"{video} video-error rows" in page and f"{infra} infrastructure-error rows" in page
        assert f"video error DecodeError: {video} rows ({videos} videos); first: {first_video}" in page
        assert "infra error ConnectionError" in page and "refused the connection" in page
        assert "no score at all for detector alpha under condition spatial" in page
    assert text.index("FAILURES") < text.index("Key findings")  # the very top of the page
    failures = report["failures"]
    assert failures["video_rows"] == video and failures["infra_rows"] == infra
    assert failures["empty_cells"] == [["alpha", "spatial"]]
    groups = {(g["kind"], g["error_class"]): g for g in failures["groups"]}
    assert groups[("video", "DecodeError")]["first_message"] == first_video
    assert groups[("infra", "ConnectionError")]["rows"] == infra
    # a run where nothing failed has no banner, and says so in its JSON
    _run_dir, clean_md, clean_text, clean_banner, clean_report = clean
    assert "FAILURES" not in clean_md and "FAILURES" not in clean_text and not clean_banner
    assert clean_report["failures"]["shown"] is False and clean_report["failures"]["groups"] == []


@pytest.mark.parametrize("everything", ["failed", "missing"])
def test_a_run_where_every_row_failed_still_writes_its_report_with_the_banner(tmp_path, everything):
    rows = []
    if everything == "failed":
        for k, r in enumerate(_rows(5)):
            kind = "video" if k % 3 else "infra"
            rows.append(_fail(r, kind, "DecodeError" if kind == "video" else "Timeout", f"{kind} failure {k}"))
    md, text, banner, report = _report(_run(tmp_path, rows))
    for name in ("report.md", "report.html", "report.json"):
        assert (tmp_path / name).stat().st_size > 0
    headline = "Every row of this run failed" if rows else "This run has no result rows"
    assert headline in md.split("## Key findings")[0] and headline in banner
    assert report["failures"]["shown"] and report["key_findings"] == []
    assert report["failures"]["video_rows"] + report["failures"]["infra_rows"] == len(rows)
    if rows:
        groups = report["failures"]["groups"]
        assert {(g["kind"], g["error_class"]) for g in groups} == {("video", "DecodeError"), ("infra", "Timeout")}
        for g in groups:  # one line per class, with its count and its first message
            assert g["first_message"].startswith(f"{g['kind']} failure ")
            line = f"{g['kind']} error {g['error_class']}: {g['rows']} rows ({g['videos']} videos); first: "
            assert line + g["first_message"] in banner and line + g["first_message"] in md
        assert len(report["failures"]["empty_cells"]) == len(DETECTORS) * len(CONDITIONS)
    assert "nan" not in md and "No plot: no row of this run was scored." in text


@pytest.mark.parametrize("collapse", DETECTORS)
def test_key_findings_name_the_largest_drop_with_its_paired_interval(tmp_path, collapse, clean):
    if collapse == "beta":
        _run_dir, md, text, _banner, report = clean
    else:
        md, text, _banner, report = _report(_run(tmp_path, _rows(40, collapse=collapse)))
    cells = {(c["detector"], c["condition"]): c for c in report["cells"]}
    worst, base = cells[(collapse, "full")], cells[(collapse, "original")]
    lo, hi = worst["auc_drift_ci"]
    assert hi < 0  # the data make this a clear collapse
    expected = (
        f"Largest AUC drops from original: {collapse} under full, {pct(base['auc'])} -> {pct(worst['auc'])} "
        f"({100 * worst['auc_drift']:+.1f} points, paired 95% interval [{100 * lo:+.1f}, {100 * hi:+.1f}], excludes 0)"
    )
    findings = md.split("## Key findings")[1].split("##")[0]
    assert expected in findings and expected in text
    first = report["key_findings"][0]
    assert first["kind"] == "auc_drop" and first["data"]["cells"][0]["detector"] == collapse
    assert first["data"]["cells"][0]["excludes_zero"] is True
    assert "FakeR drop at the threshold fixed on original: " + collapse in findings
    assert "with two detectors it can only be +1 or -1" in findings  # the ranking finding, honest about n = 2


def test_key_findings_give_breaking_points_of_a_sweep(tmp_path):
    conditions = ["original", "spatial@scale.factor=0.5", "spatial@scale.factor=0.25"]
    run = _run(tmp_path, _rows(40, collapse="alpha", under="spatial@", conditions=conditions), conditions)
    md, text, _banner, report = _report(run)
    sentence = "Sweep spatial@scale.factor (values 0.5, 0.25, mildest first): AUC breaks for alpha at 0.25"
    assert sentence in md and sentence in text and "beta did not break within them" in md
    (finding,) = [f for f in report["key_findings"] if f["kind"] == "breaking_points"]
    assert {b["detector"]: b["auc_drift_below"] for b in finding["data"]["breaking_points"]} == {
        "alpha": 0.25,
        "beta": None,
    }
    assert "breaks at" in report["glossary"]  # the sweep's table heading is defined too


def test_the_glossary_defines_every_metric_heading_of_the_tables(clean):
    run, md, text, _banner, report = clean
    ev = evaluate_run(run, replicates=REPLICATES)[2]
    terms = glossary(ev)
    names = {t.term for t in terms}
    assert {"AUC", "T@1%", "T@5%", "F@95%", "FakeR", "RealR", "BAcc", "macro-F1", "drift", "Spearman"} <= names
    assert "95% CI" in names and f"{ev.replicates} replicates (seed {ev.seed})" in report["glossary"]["95% CI"]
    labels = {"detector", "condition", *ev.conditions, *ev.sources, *ev.detectors}
    section = md.split("## Glossary")[1]
    page = text.split("Glossary")[-1]
    for table in report_tables(ev) + sweep_tables(ev):
        used = [h for h in table.header if h not in labels] + [r.cells[0] for r in table.rows if r.emphasis]
        for heading in used:
            term = term_for(heading, terms)
            assert term is not None, heading
            assert f"- **{term.term}**: {term.definition}" in section
            assert f"{term.term} {term.definition}" in page
    title = report_tables(ev)[0].title  # the headline table names its metric, its interval and its drift
    assert {t.term for t in terms if t.term in title} == {"AUC", "95% CI", "drift"}
    assert report["glossary"] == {t.term: t.definition for t in terms}


def test_few_anchors_warn_zero_width_intervals_are_flagged_and_seeds_are_always_shown(tmp_path, clean):
    md, text, _banner, report = _report(_run(tmp_path, _rows(6, perfect="alpha")))
    warning = f"fewer than {SMALL_SAMPLE_ANCHORS} real anchors (genA 6, genB 6)"
    assert warning in md and warning in text
    assert "zero width" in md and "alpha under original: AUC 100.0 [100.0, 100.0]†" in md
    assert "100.0 [100.0, 100.0]†" in md.split("## Operating points")[0]  # marked in the table itself
    for page in (md, text):
        assert "None" not in page
        assert f"bootstrap seed {report['context']['seeds']['bootstrap']}" in page
        assert f"corpus seed {UNRECORDED_CORPUS_SEED}" in page
    assert any("Small sample" in w for w in report["warnings"])
    # 40 anchors per source: no small-sample warning; a synthesised corpus states its seed
    _run_dir, clean_md, *_ = clean
    assert "Small sample" not in clean_md and f"fewer than {SMALL_SAMPLE_ANCHORS} real anchors" not in clean_md
    assert clean[4]["warnings"] == []
    seeded = _run(tmp_path / "seeded", _rows(6), corpus={"config": {"seed": 4242}})
    assert "corpus seed 4242;" in build_report(seeded, replicates=REPLICATES)["md"].read_text()


def test_fake_and_real_recall_are_points_with_intervals_not_lines_across_conditions(clean):
    run, *_ = clean
    ev = evaluate_run(run, replicates=REPLICATES)[2]
    fig = recall_figure(ev)
    axes = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title().split()[0] for ax in axes] == ["FakeR", "RealR"]
    for ax, key in zip(axes, ("fake_recall", "real_recall"), strict=True):
        bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
        assert [c.get_label() for c in bars] == list(ev.detectors)  # one marker series per detector
        xs = []
        for det, bar in zip(ev.detectors, bars, strict=True):
            line, _caps, (segments,) = bar.lines
            assert line.get_linestyle() == "None"  # markers only: nothing joins the conditions
            xs.append(line.get_xdata())
            for seg, cond in zip(segments.get_segments(), ev.conditions, strict=True):
                lo, hi = getattr(ev.cell(det, cond), f"{key}_ci")
                assert seg[:, 1] == pytest.approx([100 * lo, 100 * hi])  # that cell's interval, in % as the tables
        assert not np.allclose(xs[0], xs[1]) and np.all(np.abs(xs[0] - xs[1]) < 0.5)  # dodged, same category
        for line in ax.get_lines():  # any drawn line is a vertical separator, never a path across conditions
            assert line.get_linestyle() == "None" or len(set(np.asarray(line.get_xdata(), float))) == 1
    assert (run / "report.html").read_text().count("data:image/png;base64,") == 5  # every plot still embedded
    heat = heatmap_figure(ev)
    for ax in heat.axes[: len(ev.detectors)]:
        assert all(t.get_rotation() > 0 for t in ax.get_xticklabels())
        inks = {t.get_color() for t in ax.texts}
        assert inks <= {"black", "white"} and len(ax.texts) == len(ev.sources) * len(ev.conditions)
    assert "white" in {t.get_color() for ax in heat.axes for t in ax.texts}  # dark cells get light ink


def test_plots_draw_auc_and_recall_in_percent_as_the_tables_give_them(clean):
    run, *_ = clean
    ev = evaluate_run(run, replicates=REPLICATES)[2]
    (ax,) = auc_figure(ev).axes
    assert ax.get_ylim() == (0, 100) and "%" in ax.get_ylabel()
    heights = [bar.get_height() for bar in ax.patches]
    want = [100 * ev.cell(d, c).auc for d in ev.detectors for c in ev.conditions]
    assert heights == pytest.approx(want) and max(want) > 1  # a 0-1 axis beside tables in % misled the reader
    assert [line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"] == [50]  # chance
    recall = [a for a in recall_figure(ev).axes if a.get_title()]
    assert all(a.get_ylim() == pytest.approx((-3, 103)) for a in recall) and "%" in recall[0].get_ylabel()
    heat = heatmap_figure(ev)
    det = ev.detectors[0]
    cells = [ev.cell(det, c).per_source_auc.get(s) for s in ev.sources for c in ev.conditions]
    assert [t.get_text() for t in heat.axes[0].texts] == [f"{100 * v:.0f}" for v in cells]


def test_a_drift_of_exactly_zero_is_shown_not_hidden(tmp_path):
    """Scores identical under two conditions: the drift is +0.0, a value, not '-' (as an undefined one is)."""
    rows = _rows(6, conditions=["original", "spatial"])
    same = [r.model_copy(update={"condition": "spatial"}) for r in rows if r.condition == "original"]
    rows = [r for r in rows if r.condition == "original"] + same
    _, _, ev = evaluate_run(_run(tmp_path, rows, ["original", "spatial"]), replicates=REPLICATES)
    main, operating = report_tables(ev)[:2]
    assert all(row.cells[2].endswith("(+0.0)") for row in main.rows if not row.emphasis)
    assert all(row.cells[-2].startswith("+0.0") for row in operating.rows if row.cells[1] == "spatial")


def test_a_difference_that_rounds_to_zero_reads_plus_zero():
    from gateway.evaluation.tables import points

    assert [points(x) for x in (-0.0004, 0.0, 0.0004, -0.0123, 0.5)] == ["+0.0", "+0.0", "+0.0", "-1.2", "+50.0"]
    assert points(float("nan")) == "-"


def test_a_detector_that_does_not_fit_the_corpus_is_named_and_calibrate_refits_its_threshold(tmp_path):
    """On a corpus unlike its training one (a new user's own videos as anchors), a reference detector scored below
    chance and its card's threshold called every real video generated, and the report said nothing. Now it warns of
    both, names every threshold and its origin, and ``lastmile report --calibrate REALR`` refits them on the run's
    original reals."""
    from click.testing import CliRunner

    from gateway.cli import main as cli
    from tests.support.report import _rows

    rows = []
    for r in _rows(40, collapse=None):
        if r.detector == "alpha":  # scores pointing the other way
            rows.append(r.model_copy(update={"score": -r.score}))
        else:  # a threshold far below every score
            rows.append(r.model_copy(update={"threshold": -10.0}))
    run = _run(tmp_path / "run", rows)
    result = CliRunner().invoke(cli, ["report", str(run), "--replicates", "100"])
    assert result.exit_code == 0, result.output
    warnings = json.loads((run / "report.json").read_text())["warnings"]
    assert any(w.startswith("alpha ranks real videos above generated ones on original") for w in warnings)
    assert any(w.startswith("beta's threshold (-10) keeps only 0.0 % of the scored real videos real") for w in warnings)
    assert (
        "Thresholds, fixed once per detector and held for every condition: alpha 1, beta -10 (each its model "
        "card's)." in (run / "report.md").read_text()
    )
    result = CliRunner().invoke(cli, ["report", str(run), "--replicates", "100", "--calibrate", "0.95",
                                      "--compare", "alpha:beta"])  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads((run / "report.json").read_text())
    assert not any("threshold" in w for w in report["warnings"])
    beta = next(c for c in report["cells"] if c["detector"] == "beta" and c["condition"] == "original")
    assert beta["real_recall"] >= 0.95 and beta["threshold"] > -10
    assert "recalibrated on this run's original reals to RealR 95.0 %" in (run / "report.md").read_text()
    assert "recalibrated to RealR 95.0 % on original" in (run / "comparison.md").read_text()
    bad = CliRunner().invoke(cli, ["report", str(run), "--calibrate", "1.5"])
    assert bad.exit_code == 2 and "--calibrate" in bad.output


def test_report_exits_non_zero_on_a_run_without_a_score_after_writing_why(tmp_path):
    """Its report said nothing could be computed, and the command exited 0."""
    from click.testing import CliRunner

    from gateway.cli import main as cli

    run = _run(tmp_path / "run", [_fail(r, "video", "DecodeError", "bad") for r in _rows(4)])
    result = CliRunner().invoke(cli, ["report", str(run), "--replicates", "50"])
    assert result.exit_code == 1 and "no row of this run was scored" in result.output
    assert "Every row of this run failed" in (run / "report.md").read_text()
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(cli, ["report", str(empty)])
    assert result.exit_code == 1 and result.output.count(str(empty)) == 1, result.output


def test_calibrate_without_scored_original_reals_is_one_line_and_failed_reals_are_not_the_thresholds_fault(
    tmp_path,
):
    """--calibrate on a run without scored real videos on original was a traceback (MetricError); on a run where
    nothing was scored it is no error (no threshold is used). The unfit-threshold warning counted failed real
    videos as the threshold's misses."""
    from click.testing import CliRunner

    from gateway.cli import main as cli
    from gateway.evaluation.caveats import sample_warnings
    from gateway.evaluation.paired import evaluate

    rows = [r for r in _rows(10) if r.condition != "original"]
    result = CliRunner().invoke(cli, ["report", str(_run(tmp_path / "a", rows)), "--calibrate", "0.9"])
    assert result.exit_code == 1 and "no real video was scored on original" in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    failed = [_fail(r, "video", "DecodeError", "bad") for r in _rows(4)]
    result = CliRunner().invoke(cli, ["report", str(_run(tmp_path / "b", failed)), "--calibrate", "0.9"])
    assert result.exit_code == 1 and "no row of this run was scored" in result.output
    reals = sorted({r.video_id for r in _rows(10) if r.label == "real"})
    broken = {(v, "original") for v in reals[:6]}
    rows = [_fail(r, "video", "DecodeError", "bad") if (r.video_id, r.condition) in broken else r for r in _rows(10)]
    ev = evaluate(rows, replicates=50)
    assert ev.cell(DETECTORS[0], "original").real_recall < 0.5  # the failures are misses
    assert not [w for w in sample_warnings(ev, rows) if "threshold" in w]


@pytest.mark.parametrize("conditions", [CONDITIONS, ["original", "spatial"]])
def test_the_roc_caption_says_full_only_where_the_run_has_full(tmp_path, conditions):
    """A sweep without `full` drew the original curves alone under a caption naming "full dissemination (dashed)"."""
    from gateway.evaluation.paired import evaluate
    from gateway.evaluation.plots import make_plots

    rows = _rows(6, conditions=conditions)
    (roc,) = [f for f in make_plots(evaluate(rows, replicates=50), rows, tmp_path) if f.key == "roc"]
    assert ("full dissemination (dashed)" in roc.caption) == ("full" in conditions), roc.caption
    assert "no `full` condition" in roc.caption or "full" in conditions


def test_a_run_with_nothing_scored_states_no_threshold_it_never_used(tmp_path):
    """Every threshold read `0 (each its model card's)`, with the cards' own values far from 0."""
    from click.testing import CliRunner

    from gateway.cli import main as cli

    failed = [_fail(r, "video", "DecodeError", "bad") for r in _rows(4)]
    result = CliRunner().invoke(cli, ["report", str(_run(tmp_path / "b", failed)), "--replicates", "100"])
    assert result.exit_code == 1
    text = (tmp_path / "b" / "report.md").read_text()
    assert "alpha none (nothing scored), beta none (nothing scored)" in text
    assert "alpha 0," not in text


@pytest.mark.filterwarnings("error::UserWarning")  # (its empty ROC panel warned of a legend with no entries)
def test_a_detector_that_scored_nothing_has_no_operating_point_not_a_recall_of_0(tmp_path):
    """With no score there is no threshold, yet its cells read FakeR 0.0 [0.0, 0.0]† and RealR 0.0 (every failure
    a miss) and a FakeR drift of +0.0 [-79.3, 79.3], under a banner saying no metric could be computed."""
    from dataclasses import asdict

    from gateway.evaluation.paired import evaluate
    from gateway.evaluation.reals import evaluate_reals

    rows = [_fail(r, "video", "DecodeError", "bad") if r.detector == "beta" else r for r in _rows(8)]
    ev = evaluate(rows, replicates=50)
    alone = evaluate([r for r in rows if r.detector == "alpha"], replicates=50)
    for cond in CONDITIONS:
        beta = ev.cell("beta", cond)
        assert np.isnan([beta.fake_recall, beta.real_recall, beta.bacc, beta.macro_f1, beta.threshold]).all()
        assert np.isnan([*beta.fake_recall_ci, *beta.real_recall_ci]).all() and beta.failures > 0
        assert beta.fake_recall_drift is None and beta.real_recall_drift is None
        assert asdict(ev.cell("alpha", cond)) == asdict(alone.cell("alpha", cond))  # the other detector's as alone
    md, _, _, report = _report(_run(tmp_path / "r", rows))
    (line,) = [x for x in md.splitlines() if x.startswith("| beta | full |") and x.count("|") == 12]  # operating
    assert line.split(" | ")[2:10] == ["-"] * 8, line  # FakeR .. FakeR drift
    assert [c["fake_recall"] for c in report["cells"] if c["detector"] == "beta"] == [None] * len(CONDITIONS)
    assert "beta none (nothing scored)" in md and "alpha 1," in md
    compared = json.loads(build_report(tmp_path / "r", replicates=50, comparisons=["alpha:beta"])["comparison_json"]
                          .read_text())[0]  # fmt: skip
    for key in ("fake_recall_difference", "real_recall_difference"):  # no bounds around an undefined difference
        assert [c[key] for c in compared["conditions"]] == [[None, [None, None]]] * len(CONDITIONS), key
    reals = [r for r in rows if r.label == "real"]
    cells = {(c.detector, c.condition): c for c in evaluate_reals(reals, replicates=50).cells}
    assert np.isnan(cells["beta", "full"].real_recall) and cells["beta", "full"].real_recall_drift is None
    assert np.isfinite(cells["alpha", "full"].real_recall) and cells["alpha", "full"].real_recall_drift is not None
    reals_md, _, _, reals_report = _report(_run(tmp_path / "reals", reals))
    (line,) = [x for x in reals_md.splitlines() if x.startswith("| beta | full |")]
    assert line.split(" | ")[2] == "-", line  # RealR undefined, not 0
    assert "scored nothing has no threshold" in reals_report["glossary"]["RealR"]  # what the - means, said
    assert "scored nothing has no threshold" in report["glossary"]["FakeR"]
