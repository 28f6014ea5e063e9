"""A run of real videos only (a platform's own footage): RealR per detector and condition and its drift from
original, with intervals that keep an anchor's videos together and never collapse, and its own report kind.
Rows are built directly, so each test knows every decision."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import numpy as np
import pytest

from detectors.stats import intervals
from detectors.stats.bootstrap import percentile_interval
from gateway.core.messages import ScoreRow
from gateway.evaluation.bootstrap import anchor_resamples
from gateway.evaluation.caveats import SMALL_SAMPLE_ANCHORS
from gateway.evaluation.errors import EvaluationError
from gateway.evaluation.reals import evaluate_reals, is_reals_only
from gateway.evaluation.reals_report import reals_table
from gateway.evaluation.report import build_report
from tests.support.report import _run

THRESHOLD = 0.5


def _row(video: str, cond: str, flagged: bool | None, det: str = "alpha", anchor: str | None = None, **kw) -> ScoreRow:
    """A real video's row, scored to be ``flagged`` (decided generated) or not; None: a video error."""
    score = None if flagged is None else (0.9 if flagged else 0.1)
    error = {"error": "InvalidVideo: x", "error_kind": "video"} if flagged is None else {}
    return ScoreRow(video_id=video, condition=cond, detector=det, detector_version="1", runtime="sim", label="real",
                    source="real", anchor_id=anchor or video, score=score, threshold=THRESHOLD, spec_hash=f"h-{cond}",
                    **error | kw)  # fmt: skip


def _rows(n: int, flagged: dict[str, set[int]], det: str = "alpha") -> list[ScoreRow]:
    """``n`` real videos under every condition of ``flagged``, those it lists decided generated there."""
    return [_row(f"v{i:03d}", cond, i in idx, det) for cond, idx in flagged.items() for i in range(n)]


def test_realr_is_the_pooled_share_kept_real_and_its_drift_the_paired_difference_holding_the_score_intervals():
    rows = _rows(40, {"original": {0, 1}, "full": set(range(2, 12)) | {0}})  # video 1 flagged on original only
    ev = evaluate_reals(rows, replicates=500)
    orig, full = ev.cell("alpha", "original"), ev.cell("alpha", "full")
    assert (orig.real_recall, full.real_recall) == (38 / 40, 29 / 40)
    _, lo, hi = intervals.wilson_interval(29, 40)
    assert full.real_recall_ci[0] <= lo and full.real_recall_ci[1] >= hi
    assert full.real_recall_drift == pytest.approx(29 / 40 - 38 / 40) and orig.real_recall_drift is None
    kept = lambda bad: [i not in bad for i in range(40)]  # noqa: E731
    d, n_lo, n_hi = intervals.paired_proportion_difference(kept(set(range(2, 12)) | {0}), kept({0, 1}))
    assert d == pytest.approx(full.real_recall_drift)
    assert full.real_recall_drift_ci[0] <= n_lo and full.real_recall_drift_ci[1] >= n_hi
    assert full.real_recall_drift_ci[1] < 0  # 10 more flagged, 1 fewer: beyond noise on 40 videos


def test_every_real_video_kept_real_still_has_an_interval_below_100():
    """The bootstrap alone gives [100, 100] when no video is flagged; Wilson's interval does not collapse."""
    ev = evaluate_reals(_rows(10, {"original": set(), "full": set()}), replicates=200)
    c = ev.cell("alpha", "full")
    assert c.real_recall == 1.0 and c.real_recall_ci[1] == 1.0 and c.real_recall_ci[0] < 0.8
    assert c.real_recall_drift == 0.0 and c.real_recall_drift_ci[0] < 0 < c.real_recall_drift_ci[1]


def test_videos_that_share_an_anchor_are_resampled_together():
    """Two clips of each upload, decided alike: the clustered interval is wider than if every clip stood alone,
    as the bootstrap of 50 clusters (not 100 videos) says it must be."""
    flagged = {i for i in range(100) if i % 10 < 2}  # (pairs 2k, 2k+1 alike)

    def rows(pairs: bool) -> list[ScoreRow]:
        return [_row(f"v{i:03d}", "original", i in flagged, anchor=f"u{i // 2 if pairs else i}") for i in range(100)]

    together, alone = (evaluate_reals(rows(p), replicates=2000).cell("alpha", "original") for p in (True, False))
    width = lambda c: c.real_recall_ci[1] - c.real_recall_ci[0]  # noqa: E731
    assert together.real_recall == alone.real_recall == 0.8
    assert width(together) > 1.25 * width(alone)
    anchors = sorted({r.anchor_id for r in rows(True)})
    w = anchor_resamples(rows(True), anchors, 2000, 20260831)
    kept = np.array([2 - 2 * (2 * k in flagged) for k in range(50)], float)  # per upload: its clips kept real
    assert together.real_recall_ci == pytest.approx(percentile_interval((w @ kept) / (w @ np.full(50, 2.0))))


def test_a_failed_video_is_a_miss_and_an_infrastructure_error_is_in_no_metric(tmp_path):
    rows = _rows(10, {"original": set()})
    rows[0] = _row("v000", "original", None)
    rows[1] = rows[1].model_copy(update={"score": None, "error": "Unavailable: x", "error_kind": "infra"})
    c = evaluate_reals(rows, replicates=100).cell("alpha", "original")
    assert (c.real_recall, c.n_real, c.failures, c.infra_errors) == (8 / 9, 9, 1, 1)
    banner = json.loads(build_report(_run(tmp_path / "run", rows), replicates=50)["json"].read_text())["failures"]
    assert banner["shown"] and "1 video-error row (kept in the RealR denominators as misses)" in banner["headline"]


def test_a_run_with_a_generated_video_is_not_a_reals_only_evaluation_and_a_video_without_anchor_is_its_own():
    real = _row("v", "original", False)
    assert is_reals_only([real]) and not is_reals_only([]) and not is_reals_only([real, real.model_copy(
        update={"label": "generated", "source": "g", "video_id": "g"})])  # fmt: skip
    with pytest.raises(EvaluationError, match="real video"):
        evaluate_reals([])
    alone = evaluate_reals([real.model_copy(update={"anchor_id": None}), _row("w", "original", True)], replicates=50)
    assert (alone.anchors, alone.cell("alpha", "original").n_real) == (2, 2)  # (its own anchor: none left out)


def test_the_report_of_a_reals_only_run_names_the_largest_drop_and_cautions_on_a_small_sample(tmp_path):
    rows = _rows(20, {"original": {0}, "spatial": {0, 1}, "full": set(range(9))})
    rows += _rows(20, {"original": set(), "spatial": set(), "full": {3}}, det="beta")
    run = _run(tmp_path / "run", rows, conditions=["original", "spatial", "full"])
    paths = build_report(run, replicates=200)
    out = json.loads(paths["json"].read_text())
    assert out["kind"] == "reals_only" and "real videos only" in out["reals_only"]
    full = next(c for c in out["cells"] if (c["detector"], c["condition"]) == ("alpha", "full"))
    assert full["real_recall"] == 11 / 20 and full["real_recall_drift"] == pytest.approx(11 / 20 - 19 / 20)
    (finding,) = out["key_findings"]
    assert finding["kind"] == "real_recall_drop"
    assert [(c["detector"], c["condition"]) for c in finding["data"]["cells"]] == [("alpha", "full"), ("beta", "full")]
    assert finding["data"]["cells"][0]["excludes_zero"] and not finding["data"]["cells"][1]["excludes_zero"]
    small = f"Small sample: 20 real anchors, fewer than {SMALL_SAMPLE_ANCHORS}"
    assert any(w.startswith(small) for w in out["warnings"])
    headings = reals_table(evaluate_reals(rows, replicates=50)).header[2:]
    assert [h for h in headings if h not in out["glossary"]] == [] and "95% CI" in out["glossary"]
    md = paths["md"].read_text()
    assert "| alpha | full | 55.0 [" in md and "| -40.0 [" in md and "(plots/real_recall.png)" in md
    assert (run / "plots" / "real_recall.png").stat().st_size > 10_000
    HTMLParser().feed(paths["html"].read_text())  # (well formed enough to parse)
    assert "<td>alpha</td><td>full</td><td>55.0 [" in paths["html"].read_text()
    assert [k for k in json.loads((run / "report.json").read_text())["context"]["spec_hashes"]] == [
        {"condition": c, "spec_hash": f"h-{c}"} for c in ("full", "original", "spatial")]  # fmt: skip


def test_a_reals_only_report_recalibrates_its_thresholds_and_names_an_unfit_one(tmp_path):
    rng = np.random.default_rng(1)
    rows = [ScoreRow(video_id=f"v{i}", condition=cond, detector="alpha", detector_version="1", runtime="sim",
                     label="real", source="real", anchor_id=f"v{i}", score=float(rng.normal() + shift), threshold=-0.5)
            for i in range(60) for cond, shift in (("original", 0.0), ("full", 0.5))]  # fmt: skip
    run = _run(tmp_path / "run", rows, conditions=["original", "full"])
    card = json.loads(build_report(run, replicates=100)["json"].read_text())
    assert any("alpha's threshold (-0.5) keeps only" in w and "--calibrate 0.95" in w for w in card["warnings"])
    assert "<code>lastmile report RUN --calibrate 0.95</code>" in (run / "report.html").read_text()
    fitted = json.loads(build_report(run, replicates=100, calibrate=0.95)["json"].read_text())
    orig = next(c for c in fitted["cells"] if c["condition"] == "original")
    assert orig["real_recall"] == pytest.approx(0.95, abs=1 / 60)
    (caution,) = fitted["warnings"]  # (60 anchors: no small sample; recalibrated: no unfit threshold)
    assert caution.startswith("The thresholds were recalibrated to RealR 95.0% on this run's own original videos")
    html = (run / "report.html").read_text()
    assert "<code>lastmile corpus synth --real-dir</code>" in html and "`" not in html.split("<body>")[1]
    assert "recalibrated on this run's original reals to RealR 95.0 %" in fitted["context"]["thresholds"]
    with pytest.raises(EvaluationError, match="no rows for beta in this run"):  # (a pair needs both contenders)
        build_report(run, replicates=100, comparisons=["alpha:beta"])


def test_a_finding_says_how_many_drops_it_leaves_out_and_names_the_steady_detectors(tmp_path):
    rows = [r for i, det in enumerate("abcde") for r in _rows(30, {"original": set(), "full": set(range(i))}, det)]
    out = json.loads(
        build_report(_run(tmp_path / "run", rows, ["original", "full"]), replicates=50)["json"].read_text()
    )
    (finding,) = out["key_findings"]
    assert finding["text"].startswith("Largest RealR drops from original (real videos decided generated once "
                                      "disseminated) (3 largest of 4 detectors' drops): e under full")  # fmt: skip
    assert finding["text"].endswith(" The RealR point estimate fell under no condition for a (a point, not a bound: "
                                    "the table gives each drift's interval).")  # fmt: skip
    assert finding["data"]["steady"] == ["a"]


@pytest.mark.parametrize("reals_only", [True, False])
def test_a_run_without_original_gets_its_report_without_drifts(tmp_path, reals_only):
    """No original, no drift: the findings on drifts are left out (they crashed on the undefined drifts)."""
    from tests.support.report import paired_rows

    conditions = ["spatial", "full"]
    rows = _rows(4, {c: {0} for c in conditions}) if reals_only else paired_rows(4, conditions=conditions)
    out = json.loads(build_report(_run(tmp_path / "run", rows, conditions), replicates=50)["json"].read_text())
    assert all(c["condition"] in conditions for c in out["cells"]) and len(out["cells"]) == 2 * (2 - reals_only)
    assert not [f for f in out["key_findings"] if "drop" in f["kind"]]
    if reals_only:
        assert (
            "This run has no original condition, so no drift is measured: each RealR stands alone." in out["warnings"]
        )
        assert (
            "4 real anchors, 4 real videos, no generated video, 2 conditions"
            in (tmp_path / "run" / "report.md").read_text()
        )


def test_counts_of_one_read_in_the_singular(tmp_path):
    build_report(_run(tmp_path / "run", _rows(1, {"original": set()}), ["original"]), replicates=50)
    md = (tmp_path / "run" / "report.md").read_text()
    assert (
        "1 real anchor, 1 real video, no generated video, 1 condition, 1 result row (1 scored, 0 video failures" in md
    )


def test_flips_to_generated_count_what_a_net_drift_of_zero_hides():
    """Five videos flagged under full that were kept on original, five the other way: drift 0, flips 5 of 35."""
    rows = _rows(40, {"original": set(range(5)), "full": set(range(5, 10))})
    c = evaluate_reals(rows, replicates=500).cell("alpha", "full")
    assert c.real_recall_drift == 0.0 and c.flips_to_generated == 5 / 35
    _, lo, hi = intervals.wilson_interval(5, 35)
    assert c.flips_to_generated_ci[0] <= lo and c.flips_to_generated_ci[1] >= hi and c.flips_to_generated_ci[0] > 0
    assert evaluate_reals(rows, replicates=50).cell("alpha", "original").flips_to_generated is None


SAYS = [("user videos (--real-dir)", "your own, as `lastmile corpus synth"),
        ("synthetic", "synthetic camera-like scenes, not camera footage")]  # fmt: skip


@pytest.mark.parametrize("anchors, says", SAYS)
def test_real_videos_of_the_proxy_corpus_are_said_to_be_what_they_are(tmp_path, anchors, says):
    corpus = {"notice": "PROXY corpus", "real_anchors": anchors}
    out = json.loads(build_report(_run(tmp_path / "run", _rows(3, {"original": set()}), ["original"], corpus),
                                  replicates=50)["json"].read_text())  # fmt: skip
    assert says in out["notice"] and "generated videos are" not in out["notice"]
    assert says.replace("`", "<code>", 1) in (tmp_path / "run" / "report.html").read_text()


def test_a_reals_only_run_compares_champion_and_challenger_on_the_real_videos_both_decided(tmp_path):
    """`--compare` was refused on a run of real videos only, though the A/B question a platform with real uploads
    asks first is there: does the challenger flag more of them, and more so once they are disseminated?"""
    infra = {"error": "down", "error_kind": "infra", "score": None}
    champion = _rows(40, {"original": {0}, "full": {0, 1}}, "alpha")
    challenger = [_row(f"v{i:03d}", "original", i in {0, 2}, "beta") for i in range(40)]
    challenger += [_row(f"v{i:03d}", "full", i < 12, "beta") for i in range(38)]
    challenger += [_row("v038", "full", None, "beta"), _row("v039", "full", None, "beta").model_copy(update=infra)]
    failed = [_row(f"v{i:03d}", cond, None, "gamma") for cond in ("original", "full") for i in range(40)]
    run = _run(tmp_path / "run", champion + challenger + failed, conditions=["original", "full"])
    paths = build_report(run, replicates=300, comparisons=["alpha:beta", "alpha:gamma"])
    (beta, gamma) = json.loads(paths["comparison_json"].read_text())
    full = next(c for c in beta["conditions"] if c["condition"] == "full")
    assert full["videos"] == 39  # v039: no decision by beta, so in neither side
    assert full["champion_real_recall"][0] == pytest.approx(37 / 39)
    assert full["challenger_real_recall"][0] == pytest.approx(26 / 39)  # 12 flagged, 1 failure (a miss)
    d, (lo, hi) = full["real_recall_difference"]
    kept = lambda bad: [i not in bad for i in range(39)]  # noqa: E731
    n_d, n_lo, n_hi = intervals.paired_proportion_difference(kept(set(range(12)) | {38}), kept({0, 1}))
    assert d == pytest.approx(n_d) == pytest.approx(-11 / 39) and lo <= n_lo and hi >= n_hi and hi < 0
    assert full["disagreement"][0] == pytest.approx(10 / 38)  # decided by both: v038 failed for beta
    original = next(c for c in beta["conditions"] if c["condition"] == "original")
    assert original["real_recall_difference"][0] == pytest.approx(-1 / 40) and original["videos"] == 40
    assert all(
        c["challenger_real_recall"][0] is None and c["real_recall_difference"][0] is None for c in gamma["conditions"]
    )  # fmt: skip  (it scored nothing: no RealR, no difference)
    md = paths["md"].read_text()
    assert "## Champion vs challenger" in md and "### beta (challenger) vs alpha (champion), real videos only" in md
    assert "| full | 39 | 94.9 [" in md and "| full | 40 | 95.0 [" in md and "| - | - | - |" in md
    assert "gamma (challenger) none (nothing scored)" in md and "nan" not in md.lower()
    assert json.loads(paths["json"].read_text())["comparisons"] == [beta, gamma]
    assert "Champion vs challenger" in paths["html"].read_text() and (run / "comparison.md").is_file()
    build_report(run, replicates=100)  # without --compare: no comparison outlives the report it belonged to
    assert not (run / "comparison.md").exists() and not (run / "comparison.json").exists()


def test_a_reals_only_report_names_the_real_videos_a_condition_flipped_and_says_why_it_draws_no_strip(tmp_path):
    rows = _rows(20, {"original": {0}, "full": {1, 2, 3}})  # v001-v003 flipped to generated; v000 back to real
    run = _run(tmp_path / "run", rows, conditions=["original", "full"])
    paths = build_report(run, replicates=50, flips=2)
    out = json.loads(paths["json"].read_text())
    (section,) = out["flips"]
    assert (section["detector"], section["condition"], section["paired_videos"]) == ("alpha", "full", 20)
    assert section["flipped"] == {"real_to_generated": 3, "generated_to_real": 1}
    shown = section["shown"]["real_to_generated"]
    assert len(shown) == 2 and {s["video_id"] for s in shown} <= {"v001", "v002", "v003"}
    assert all(s["strip"] is None and s["note"] for s in shown)  # rows built by hand: no video to render again
    html = paths["html"].read_text()
    assert "<h2>Flipped videos</h2>" in html and "<em>No strip: cannot read the run&#39;s manifest again" in html
    assert "| alpha | full | 20 | 3 | 1 |" in paths["md"].read_text()
