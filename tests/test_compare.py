"""Champion vs challenger offline (issue 25): paired differences per condition on the shared videos only, with the
anchor-clustered bootstrap; version pinning; the CLI on a real replay; bootstrap coverage on simulated detectors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.stats import norm

from detectors.proxy.corpus import CorpusConfig, synthesize
from gateway.batch.replay import ReplayConfig, replay
from gateway.cli import main as cli
from gateway.core.messages import ScoreRow
from gateway.evaluation.compare import Contender, compare, shared_rows
from gateway.evaluation.errors import EvaluationError
from gateway.evaluation.paired import evaluate
from gateway.evaluation.provenance import PROXY_WARNING
from tests.support.report import CONDITIONS, _rows


def test_a_collapsing_challenger_has_a_robustness_difference_below_zero_under_full_only():
    rows = _rows(60)
    cmp = compare(rows, Contender.parse("alpha"), Contender.parse("beta"), replicates=300)
    full, spatial, orig = cmp.condition("full"), cmp.condition("spatial"), cmp.condition("original")
    assert full.robustness_difference[1][1] < 0  # upper bound below 0: significantly less robust
    assert spatial.robustness_difference[1][0] < 0 < spatial.robustness_difference[1][1]
    assert orig.robustness_difference is None and orig.flip_rate_difference is None
    assert full.fake_recall_difference[0] < -0.2 and full.fake_recall_difference[1][1] < 0
    assert full.flip_rate_difference[0] > 0.1  # the challenger's decisions flip more under full
    # the point estimates are the report's own metrics, differenced
    ev = evaluate(rows, replicates=50)
    for c in CONDITIONS:
        want = ev.cell("beta", c).auc - ev.cell("alpha", c).auc
        assert cmp.condition(c).auc_difference[0] == pytest.approx(want, abs=1e-12)
    want = (ev.cell("beta", "full").auc - ev.cell("beta", "original").auc) - (
        ev.cell("alpha", "full").auc - ev.cell("alpha", "original").auc
    )
    assert full.robustness_difference[0] == pytest.approx(want, abs=1e-12)


def test_disagreement_counts_only_videos_both_scored():
    rows = _rows(30, collapse=None)
    dropped = {"a000", "a001_g", "a002"}  # the challenger never scored these under full
    rows = [r for r in rows if not (r.detector == "beta" and r.condition == "full" and r.video_id in dropped)]
    pair = shared_rows(rows, Contender("alpha"), Contender("beta"))
    assert not any(r.condition == "full" and r.video_id in dropped for r in pair)
    cmp = compare(rows, Contender("alpha"), Contender("beta"), replicates=100)
    assert cmp.condition("full").videos == 60 - 3 and cmp.condition("original").videos == 60
    by = {(r.detector, r.video_id): r.score >= 1.0 for r in rows if r.condition == "full"}
    shared = [v for (d, v) in by if d == "alpha" and ("beta", v) in by]
    want = np.mean([by["alpha", v] != by["beta", v] for v in shared])
    assert cmp.condition("full").disagreement[0] == pytest.approx(want)


def test_two_versions_of_one_detector_are_told_apart_and_must_be_pinned():
    rows = _rows(20, versions={"alpha": ("npr", "1.0.0"), "beta": ("npr", "1.1.0")})
    cmp = compare(rows, Contender.parse("npr@1.0.0"), Contender.parse("npr@1.1.0"), replicates=100)
    assert (cmp.champion, cmp.challenger) == ("npr@1.0.0", "npr@1.1.0")
    assert cmp.condition("full").auc_difference[0] < 0
    with pytest.raises(EvaluationError, match="same rows"):
        compare(rows, Contender.parse("npr"), Contender.parse("npr@1.1.0"))
    with pytest.raises(EvaluationError, match="no rows for npr@2"):
        compare(rows, Contender.parse("npr@1.0.0"), Contender.parse("npr@2"))


@pytest.mark.slow
def test_offline_bootstrap_intervals_cover_the_true_differences():
    """Correlated binormal champion and challenger (original and full) on 200 + 200 videos, 300 windows: the
    bootstrap intervals of the AUC difference under full and of the robustness difference cover the truth
    within 0.92-0.98."""
    rng = np.random.default_rng(11)
    shifts = {("alpha", "original"): 1.2, ("alpha", "full"): 0.9, ("beta", "original"): 1.4, ("beta", "full"): 0.7}
    corr = np.array([[1, 0.6, 0.5, 0.3], [0.6, 1, 0.3, 0.5], [0.5, 0.3, 1, 0.6], [0.3, 0.5, 0.6, 1]])
    auc = {k: norm.cdf(v / np.sqrt(2)) for k, v in shifts.items()}
    true_diff = auc["beta", "full"] - auc["alpha", "full"]
    true_rob = true_diff - (auc["beta", "original"] - auc["alpha", "original"])
    hits = np.zeros(2)
    reps = 300
    for _ in range(reps):
        noise = rng.multivariate_normal(np.zeros(4), corr, size=400)
        rows = []
        for j, (det, cond) in enumerate(shifts):
            for i in range(400):
                gen = i % 2 == 1
                a = f"a{i // 2:03d}"
                rows.append(ScoreRow(video_id=f"{a}_g" if gen else a, condition=cond, detector=det,
                                     detector_version="1", runtime="sim", label="generated" if gen else "real",
                                     source="genA" if gen else "real", anchor_id=a, threshold=0.5,
                                     score=noise[i, j] + shifts[det, cond] * gen))  # fmt: skip
        cmp = compare(rows, Contender("alpha"), Contender("beta"), replicates=300, seed=int(rng.integers(1 << 30)))
        lo, hi = cmp.condition("full").auc_difference[1]
        hits[0] += lo <= true_diff <= hi
        lo, hi = cmp.condition("full").robustness_difference[1]
        hits[1] += lo <= true_rob <= hi
    assert all(0.92 <= h / reps <= 0.98 for h in hits), hits / reps


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    manifest = synthesize(CorpusConfig(anchors=3, seed=77, width=160, height=128, min_seconds=2, max_seconds=2), root)
    cfg = ReplayConfig(manifest=manifest, conditions="original,full", detectors="d3_px,spectral", profile="throughput")
    return replay(cfg, root / "run", workers=2, progress=False).parent


def test_the_report_compares_two_detectors_of_a_real_replay(real_run):
    result = CliRunner().invoke(cli, ["report", str(real_run), "--replicates", "200", "--compare", "d3_px:spectral"])
    assert result.exit_code == 0, result.output
    written = {Path(line).name for line in result.output.split()}
    assert {"report.md", "report.html", "report.json", "comparison.md", "comparison.json", "compare_0.png"} <= written
    assert (real_run / "comparison.md").exists() and (real_run / "plots" / "compare_0.png").stat().st_size > 1000
    (cmp,) = json.loads((real_run / "comparison.json").read_text())
    assert (cmp["champion"], cmp["challenger"]) == ("d3_px", "spectral")
    full = next(c for c in cmp["conditions"] if c["condition"] == "full")
    assert full["videos"] == 3 * 6 and full["robustness_difference"] is not None
    point, (lo, hi) = full["auc_difference"]
    assert lo <= point <= hi
    text = (real_run / "comparison.md").read_text()
    assert "| full | 18 |" in text and "spectral (challenger) vs d3_px (champion)" in text
    embedded = json.loads((real_run / "report.json").read_text())["comparisons"]
    assert embedded == [cmp]  # the report holds the same numbers as comparison.json
    report_md = (real_run / "report.md").read_text()
    section = report_md[report_md.index("## Champion vs challenger") : report_md.index("## Plots")]
    assert "### spectral (challenger) vs d3_px (champion)" in section and "| full | 18 |" in section
    assert "](plots/compare_0.png)" in section
    # a proxy corpus says so in each file of the comparison too, as in the report (it did only there)
    assert cmp["corpus_notice"] == PROXY_WARNING and f"> **{PROXY_WARNING}**" in text
    html = (real_run / "report.html").read_text()
    forest = html[html.index("<h3>spectral (challenger) vs d3_px (champion)</h3>") :]
    assert '<img src="data:image/png;base64,' in forest and "<figcaption>spectral minus d3_px per condition" in forest
    assert "<td>full</td><td>18</td>" in html
    plain = CliRunner().invoke(cli, ["report", str(real_run), "--replicates", "200"])
    assert plain.exit_code == 0 and json.loads((real_run / "report.json").read_text())["comparisons"] == []
    assert "Champion vs challenger" not in (real_run / "report.md").read_text() + (real_run / "report.html").read_text()
    bad = CliRunner().invoke(cli, ["report", str(real_run), "--compare", "d3_px"])
    assert bad.exit_code != 0 and "CHAMPION:CHALLENGER" in bad.output


def test_a_report_names_the_gateway_versions_the_manifest_and_every_models_hash(real_run):
    """Provenance beyond results.parquet: which lastmile-gateway replayed and reported, the manifest's sha256 and
    each detector version's model sha256, in all three report files."""
    import gateway
    from gateway.batch.results import read_results

    assert CliRunner().invoke(cli, ["report", str(real_run), "--replicates", "50"]).exit_code == 0
    info = json.loads((real_run / "run.json").read_text())
    assert info["gateway_version"] == gateway.__version__ and len(info["manifest_sha256"]) == 64
    models = sorted(
        {(f"{r.detector}@{r.detector_version}", r.model_sha256) for r in read_results(real_run / "results.parquet")}
    )
    assert len(models) == 2 and all(len(h) == 64 for _, h in models)
    said = f"Replayed by lastmile-gateway {gateway.__version__}, reported by {gateway.__version__}; manifest sha256"
    md, html = (real_run / "report.md").read_text(), (real_run / "report.html").read_text()
    assert f"{said} `{info['manifest_sha256']}`. Route: in process (workers of this replay)." in md and said in html
    for detector, digest in models:
        assert f"- `{detector}`: `{digest}`" in md and f"<code>{detector}</code>: <code>{digest}</code>" in html
    context = json.loads((real_run / "report.json").read_text())["context"]
    assert context["model_hashes"] == [{"detector": d, "model_sha256": h} for d, h in models]
    assert context["gateway_version"] == {"replay": gateway.__version__, "report": gateway.__version__}
    assert context["route"] == info["route"] == "in process (workers of this replay)"


def test_a_comparison_of_a_run_where_every_row_failed_is_reported_not_raised(tmp_path):
    from gateway.evaluation.report import build_report
    from tests.support.report import _fail, _run

    rows = [_fail(r, "video" if k % 3 else "infra", "DecodeError", "bad") for k, r in enumerate(_rows(6))]
    paths = build_report(_run(tmp_path, rows), replicates=50, comparisons=["alpha:beta"])
    assert {"md", "html", "json", "comparison_md", "comparison_json", "plot_compare_0"} <= paths.keys()
    (cmp,) = json.loads(paths["json"].read_text())["comparisons"]
    assert (cmp["champion"], cmp["challenger"]) == ("alpha", "beta")
    assert "### beta (challenger) vs alpha (champion)" in paths["md"].read_text()

    def strict(token: str):
        raise ValueError(f"{token} is not JSON")  # (Python's json writes NaN as a bare token other parsers refuse)

    for key in ("json", "comparison_json"):
        json.loads(paths[key].read_text(), parse_constant=strict)
    assert "nan" not in paths["comparison_md"].read_text().lower()


def test_pairs_are_refused_before_the_bootstrap_and_stale_comparisons_removed(tmp_path, monkeypatch):
    from gateway.evaluation import report
    from tests.support.report import _run

    run = _run(tmp_path, _rows(6))
    monkeypatch.setattr(report, "evaluate", lambda *a, **k: pytest.fail("evaluated before the pairs were checked"))
    for pair, message in (("alpha:gamma", "no rows for gamma"), ("alpha:alpha", "two contenders"),
                          ("alpha:beta:x", "CHAMPION:CHALLENGER"), ("alpha@:beta", "DETECTOR@VERSION")):  # fmt: skip
        with pytest.raises(EvaluationError, match=message):
            report.build_report(run, replicates=50, comparisons=[pair])
    with pytest.raises(EvaluationError, match="given twice"):
        report.build_report(run, replicates=50, comparisons=["alpha:beta", " alpha : beta "])
    monkeypatch.undo()
    report.build_report(run, replicates=50, comparisons=["alpha:beta"])
    assert (run / "comparison.md").exists() and (run / "plots" / "compare_0.png").exists()
    report.build_report(run, replicates=50)
    assert not (run / "comparison.md").exists() and not list((run / "plots").glob("compare_*.png"))
    assert json.loads((run / "report.json").read_text())["comparisons"] == []


def test_the_anchor_comparison_matrix_equals_its_definition_with_ties_and_empty_anchors():
    """C[i, j] = sum over (p of anchor i, n of anchor j) of 1[p > n] + 1/2 1[p = n], computed pair by pair (two
    infinities tie: their difference, NaN, counted neither)."""
    from gateway.evaluation.cells import SourceCell

    rng = np.random.default_rng(5)
    for _ in range(100):
        k = int(rng.integers(1, 10))
        scores = lambda: np.round(rng.choice([*rng.normal(size=6), np.inf, -np.inf], size=int(rng.integers(0, 4))), 1)  # noqa: E731
        pos, neg = [scores() for _ in range(k)], [scores() for _ in range(k)]  # ties of infinities too
        cell = object.__new__(SourceCell)
        cell.anchors, cell.pos, cell.neg = list(range(k)), pos, neg
        want = np.array([[sum((a > b) + 0.5 * (a == b) for a in p for b in n) for n in neg] for p in pos])
        assert np.array_equal(cell.comparison(), want.reshape(k, k))


def test_a_name_with_markdown_characters_breaks_no_table_or_image_of_report_md(tmp_path):
    """Names in a results file are free text: a ``|`` would have split a table cell and a ``]`` ended a plot's alt
    text."""
    import re

    from gateway.evaluation.report import build_report
    from tests.support.report import _run

    rows = _rows(6, versions={"alpha": ("al|pha", "1]"), "beta": ("beta", "2")})
    md = build_report(_run(tmp_path, rows), replicates=50, comparisons=["al|pha@1]:beta"])["md"].read_text()
    cells = re.compile(r"(?<!\\)\|")  # a cell boundary: a pipe not escaped
    for block in re.findall(r"(?:^\|.*\n)+", md, flags=re.M):
        widths = {len(cells.split(line)) for line in block.splitlines()}
        assert len(widths) == 1, block
    assert md.count(r"| al\|pha |") >= 3  # the AUC, operating-point and per-source tables
    (image,) = [line for line in md.splitlines() if line.startswith("![") and "compare_0.png" in line]
    alt = re.fullmatch(r"!\[((?:\\.|[^\\\[\]])*)\]\(plots/compare_0\.png\)", image)
    assert alt and r"al|pha@1\]" in alt.group(1), image


def test_a_bad_compare_is_a_usage_error_and_an_absent_contender_names_what_the_run_holds(tmp_path):
    from tests.support.report import _run

    run = _run(tmp_path, _rows(6))
    for pairs in (["alpha"], ["alpha:alpha"], ["a:b", "a:b"]):
        got = CliRunner().invoke(cli, ["report", str(run), *(arg for p in pairs for arg in ("--compare", p))])
        assert got.exit_code == 2 and "Invalid value for '--compare'" in got.output, (pairs, got.output)
    got = CliRunner().invoke(cli, ["report", str(run), "--replicates", "50", "--compare", "alpha@2:beta"])
    assert got.exit_code == 1 and "no rows for alpha@2 in this run (it holds alpha@1, beta@1)" in got.output, got.output


def test_two_versions_of_a_detector_in_one_run_are_two_cells_each_at_its_own_threshold():
    """They were one cell: both versions' rows pooled under the first row's threshold (a run may hold a
    detector's versions side by side, docs/ab.md)."""
    versions = {"alpha": ("npr", "1.0.0"), "beta": ("npr", "1.1.0")}
    rows = _rows(30, versions=versions)
    rows = [r.model_copy(update={"threshold": 5.0}) if r.detector_version == "1.1.0" else r for r in rows]
    ev = evaluate(rows, replicates=60)
    assert ev.detectors == ["npr@1.0.0", "npr@1.1.0"]
    for version in ("1.0.0", "1.1.0"):
        alone = evaluate([r for r in rows if r.detector_version == version], replicates=60)
        for c in CONDITIONS:
            got, want = ev.cell(f"npr@{version}", c), alone.cell("npr", c)
            assert (got.auc, got.fake_recall, got.real_recall) == (want.auc, want.fake_recall, want.real_recall)
    assert ev.cell("npr@1.1.0", "original").fake_recall < 0.5 < ev.cell("npr@1.0.0", "original").fake_recall


def test_scored_rows_without_a_threshold_are_refused_not_decided_at_zero():
    rows = [r.model_copy(update={"threshold": None}) for r in _rows(10)]
    with pytest.raises(EvaluationError, match="alpha: its scored rows state no threshold"):
        evaluate(rows, replicates=60)


def test_a_contender_without_a_version_in_a_run_of_several_is_refused_naming_them():
    rows = _rows(10, versions={"alpha": ("npr", "1.0.0"), "beta": ("npr", "1.1.0"), "gamma": ("d3", "1")})
    with pytest.raises(EvaluationError, match=r"npr has rows of several versions in this run \(1.0.0, 1.1.0\)"):
        shared_rows(rows, Contender.parse("npr"), Contender.parse("d3"))
    assert shared_rows(rows, Contender.parse("npr@1.1.0"), Contender.parse("d3"))  # pinned: fine


def test_a_report_of_two_versions_draws_and_banners_each_version(tmp_path, monkeypatch):
    """The report's ROC panels and its banner read the rows per version, as its cells do: the panels had no curve
    (they looked rows up as 'npr@1.0.0') and a version without any score under full was not named."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from gateway.batch.results import schema
    from gateway.evaluation import plots
    from gateway.evaluation.report import build_report

    rows = _rows(12, versions={"alpha": ("npr", "1.0.0"), "beta": ("npr", "1.1.0")})
    failed = {"score": None, "decision": None, "error": "x", "error_kind": "video", "error_class": "InvalidVideo"}
    rows = [r.model_copy(update=failed) if (r.detector_version, r.condition) == ("1.1.0", "full") else r for r in rows]
    (tmp_path / "run").mkdir()
    pq.write_table(pa.Table.from_pylist([r.model_dump() for r in rows], schema=schema()),
                   tmp_path / "run" / "results.parquet")  # fmt: skip
    build_report(tmp_path / "run", replicates=60)
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    ev, drawn, roc_points = evaluate(rows, replicates=60), [], plots.metrics.roc_points
    monkeypatch.setattr(plots.metrics, "roc_points", lambda y, s: drawn.append(len(y)) or roc_points(y, s))
    plots.make_plots(ev, rows, tmp_path / "plots")
    assert drawn == [24, 24, 24]  # original and full of 1.0.0, original of 1.1.0 (its full has no score)
    assert ["npr@1.1.0", "full"] in report["failures"]["empty_cells"], report["failures"]


def _decided(rows: list[ScoreRow], det: str, cond: str) -> dict[str, tuple[str, bool | None]]:
    """video -> (label, decided generated at threshold 1.0; None where the row failed), by hand."""
    return {
        r.video_id: (r.label, None if r.score is None else r.score >= 1.0)
        for r in rows
        if r.detector == det and r.condition == cond
    }


def _correct(d: tuple[str, bool | None]) -> bool:
    return d[1] is not None and d[1] == (d[0] == "generated")


def _holds(got, want) -> bool:
    """Interval ``got`` holds interval ``want`` (to rounding)."""
    return got[0] <= want[0] + 1e-12 and got[1] >= want[1] - 1e-12


def test_recall_flip_and_disagreement_intervals_hold_the_score_intervals_and_never_collapse():
    """PROTOCOL.md: differences of paired proportions take a score interval that never collapses (Newcombe 1998,
    method 10; Wilson's for a share). The percentile bootstrap alone gave ΔFakeR 0 [0, 0] where both decide every
    video alike and ΔRealR -100 [-100, -100] where the challenger misses every real the champion keeps; each
    interval now holds the score interval of the videos (a failed video its detector's miss), and its point is the
    difference of the report's own FakeR/RealR."""
    from detectors.stats.intervals import paired_proportion_difference, wilson_interval

    rows = _rows(12, collapse=None)
    alpha = {(r.video_id, r.condition): r.score for r in rows if r.detector == "alpha"}
    fixed = []
    for r in rows:
        if r.detector == "beta" and r.condition == "original":
            r = r.model_copy(update={"score": alpha[r.video_id, "original"]})  # same decisions as alpha
        if r.condition == "full" and r.label == "real":
            r = r.model_copy(update={"score": 5.0 if r.detector == "beta" else -5.0})
        if r.detector == "beta" and r.condition == "spatial" and r.video_id in {"a003_g", "a004"}:
            r = r.model_copy(update={"score": None, "error": "bad", "error_kind": "video", "error_class": "X"})
        fixed.append(r)
    cmp = compare(fixed, Contender("alpha"), Contender("beta"), replicates=100)
    orig, full, spatial = cmp.condition("original"), cmp.condition("full"), cmp.condition("spatial")
    assert orig.fake_recall_difference[0] == 0
    assert orig.fake_recall_difference[1][0] < 0 < orig.fake_recall_difference[1][1]
    assert full.real_recall_difference[0] == -1 and full.real_recall_difference[1][0] == -1
    assert -1 < full.real_recall_difference[1][1] < -0.5
    ev = evaluate(fixed, replicates=50)
    champ, chall = _decided(fixed, "alpha", "spatial"), _decided(fixed, "beta", "spatial")
    for label, key in (("generated", "fake_recall"), ("real", "real_recall")):
        got = getattr(spatial, f"{key}_difference")
        assert got[0] == pytest.approx(
            getattr(ev.cell("beta", "spatial"), key) - getattr(ev.cell("alpha", "spatial"), key)
        )
        videos = sorted(v for v in champ if champ[v][0] == label)
        score = paired_proportion_difference([_correct(chall[v]) for v in videos], [_correct(champ[v]) for v in videos])
        assert _holds(got[1], score[1:]), (label, got, score)
    both = [v for v in champ if None not in (champ[v][1], chall[v][1])]
    p, lo, hi = wilson_interval(sum(champ[v][1] != chall[v][1] for v in both), len(both))
    assert len(both) == 22 and spatial.disagreement[0] == pytest.approx(p) and _holds(spatial.disagreement[1], (lo, hi))
    champ0, chall0 = _decided(fixed, "alpha", "original"), _decided(fixed, "beta", "original")
    flips = [[now[v][1] != then[v][1] for v in both] for now, then in ((chall, chall0), (champ, champ0))]
    d, lo, hi = paired_proportion_difference(*flips)
    assert spatial.flip_rate_difference[0] == pytest.approx(d) and _holds(spatial.flip_rate_difference[1], (lo, hi))


def test_a_comparisons_recall_differences_weight_sources_equally_as_the_report_does():
    """Two sources of different sizes: ΔFakeR is the difference of the report's source-averaged FakeRs (the
    protocol's benchmark average), not of the pooled videos, and the thresholds are named by detector."""
    from gateway.evaluation.compare_report import comparison_table

    rows = _rows(20, collapse="beta")
    extra = [r.model_copy(update={"video_id": r.video_id + "b", "source": "genB", "score": r.score - 1.5})
             for r in rows if r.label == "generated" and r.anchor_id < "a005"]  # fmt: skip
    cmp = compare(rows + extra, Contender("alpha"), Contender("beta"), replicates=100)
    ev = evaluate(rows + extra, replicates=50)
    full = cmp.condition("full")
    averaged = ev.cell("beta", "full").fake_recall - ev.cell("alpha", "full").fake_recall
    pooled = np.mean([r.score >= 1 for r in rows + extra if r.condition == "full" and r.label == "generated"
                      and r.detector == "beta"]) - np.mean([r.score >= 1 for r in rows + extra if r.condition == "full"
                      and r.label == "generated" and r.detector == "alpha"])  # fmt: skip
    assert full.fake_recall_difference[0] == pytest.approx(averaged) and abs(averaged - pooled) > 0.01
    assert full.fake_recall_difference[1][0] <= averaged <= full.fake_recall_difference[1][1]
    notes = comparison_table(cmp).notes
    assert any(n.startswith("Thresholds: alpha (champion) 1, beta (challenger) 1 (their cards');") for n in notes)


def test_auc_and_robustness_differences_are_on_the_videos_every_auc_compared_scored():
    """PROTOCOL.md: champion vs challenger on the labelled videos both scored under the conditions compared. A
    video one contender failed on leaves the other's AUC there too: the differences equal those of a run where
    both failed on it, and the robustness difference also drops the videos failed under original."""
    from tests.support.report import _failed

    rows = _rows(30)
    alpha = [r for r in rows if r.detector == "alpha"]
    beta = [r for r in rows if r.detector == "beta"]
    one = _failed(alpha, {("a001", "full"), ("a002_g", "full")}) + _failed(beta, {("a003_g", "original")})
    where = {("a001", "full"), ("a002_g", "full"), ("a003_g", "original")}
    both = _failed(alpha, where) + _failed(beta, where)
    got = compare(one, Contender("alpha"), Contender("beta"), replicates=200).condition("full")
    want = compare(both, Contender("alpha"), Contender("beta"), replicates=200).condition("full")
    for key in ("auc_difference", "robustness_difference"):
        assert getattr(got, key)[0] == pytest.approx(getattr(want, key)[0], abs=1e-12)
        assert getattr(got, key)[1] == pytest.approx(getattr(want, key)[1], abs=1e-12)
    ev = evaluate(one, replicates=50)
    assert abs(got.auc_difference[0] - (ev.cell("beta", "full").auc - ev.cell("alpha", "full").auc)) > 1e-4


def test_a_comparison_repeats_the_reports_cautions_for_the_rows_it_compared(tmp_path):
    """comparison.md stands alone: few anchors, zero-width bootstrap intervals and an unfit card threshold are said
    there (and in comparison.json and the report's section) as the report says them of its own cells."""
    from gateway.evaluation.report import build_report
    from tests.support.report import _run

    rows = [
        r.model_copy(update={"score": r.score + 8 * (r.label == "generated"),
                             "threshold": -5.0 if r.detector == "beta" else r.threshold})
        for r in _rows(6, collapse=None)
    ]  # fmt: skip
    paths = build_report(_run(tmp_path / "few", rows, list(CONDITIONS)), replicates=50, comparisons=["alpha:beta"])
    text = paths["comparison_md"].read_text()
    cautions = [line[2:] for line in text.splitlines() if line.startswith("> **Caution:**")]
    assert len(cautions) == 3, text
    assert "fewer than 30 real anchors (genA 6)" in cautions[0]
    assert "ΔAUC under original +0.0 [0.0, 0.0]†" in cautions[1] and "| original | 12 | +0.0 [0.0, 0.0]† |" in text
    assert cautions[2].startswith("**Caution:** beta (challenger)'s threshold (-5) keeps only 0.0 % of the scored")
    (cmp,) = json.loads(paths["comparison_json"].read_text())
    assert [f"**Caution:** {w}" for w in cmp["warnings"]] == cautions
    section = paths["md"].read_text().split("## Champion vs challenger")[1]
    assert all(c in section for c in cautions)
    html = paths["html"].read_text().split("<h2>Champion vs challenger</h2>")[1]
    assert html.count('<p class="caution"><strong>Caution:</strong> ') == 3 and "**" not in html
    # recalibrated thresholds fit by construction: that caution goes, the others stay
    paths = build_report(tmp_path / "few", replicates=50, comparisons=["alpha:beta"], calibrate=0.95)
    (cmp,) = json.loads(paths["comparison_json"].read_text())
    assert len(cmp["warnings"]) == 2 and not any("threshold" in w for w in cmp["warnings"])
    # enough anchors, overlapping scores, fitting thresholds: nothing to caution
    many = _run(tmp_path / "many", _rows(40), list(CONDITIONS))
    paths = build_report(many, replicates=50, comparisons=["alpha:beta"])
    assert json.loads(paths["comparison_json"].read_text())[0]["warnings"] == []
    assert "Caution" not in paths["comparison_md"].read_text()
