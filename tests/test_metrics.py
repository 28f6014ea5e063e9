"""Our metric functions against scikit-learn and scipy, on random and adversarial inputs."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm, spearmanr
from sklearn.metrics import balanced_accuracy_score, f1_score, roc_auc_score, roc_curve

from detectors import stats
from detectors.stats import metrics
from gateway.core.messages import ScoreRow
from gateway.evaluation.paired import evaluate
from tests.support.report import _failed


def _cases():
    rng = np.random.default_rng(7)
    for n in (2, 3, 5, 20, 200):
        y = rng.integers(0, 2, n)
        y[0], y[1] = 0, 1
        yield "random", y, rng.normal(size=n)
        yield "ties", y, rng.integers(0, 3, n).astype(float)  # heavy ties
        yield "all-tied", y, np.zeros(n)
        yield "separable", y, y + 0.01 * rng.random(n)
        yield "inverted", y, -y.astype(float)


CASES = list(_cases())
IDS = [f"{name}-{len(y)}" for name, y, _ in CASES]


@pytest.mark.parametrize("name, y, s", CASES, ids=IDS)
def test_auc_matches_sklearn(name, y, s):
    assert metrics.auc(y, s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)


@pytest.mark.parametrize("name, y, s", CASES, ids=IDS)
def test_roc_and_operating_points_match_sklearn(name, y, s):
    fpr, tpr, thr = roc_curve(y, s, drop_intermediate=False)
    ours_fpr, ours_tpr, ours_thr = metrics.roc_points(y, s)
    np.testing.assert_allclose(ours_fpr, fpr)
    np.testing.assert_allclose(ours_tpr, tpr)
    np.testing.assert_allclose(ours_thr[1:], thr[1:])
    for x in (0.01, 0.05, 0.3):
        assert metrics.tpr_at_fpr(y, s, x) == pytest.approx(tpr[fpr <= x + 1e-12].max())
    assert metrics.fpr_at_tpr(y, s, 0.95) == pytest.approx(fpr[tpr >= 0.95 - 1e-12].min())


@pytest.mark.parametrize("name, y, s", CASES, ids=IDS)
def test_discrete_metrics_match_sklearn(name, y, s):
    thr = float(np.median(s))
    pred = metrics.decisions(s, thr)
    assert metrics.balanced_accuracy(y, pred) == pytest.approx(balanced_accuracy_score(y, pred))
    assert metrics.macro_f1(y, pred) == pytest.approx(f1_score(y, pred, average="macro", zero_division=0))
    assert metrics.recall_at(y, pred, True) == pytest.approx(np.mean(pred[y == 1]))
    assert metrics.recall_at(y, pred, False) == pytest.approx(np.mean(~pred[y == 0]))


def test_random_ranking_gives_the_paper_reference_points():
    rng = np.random.default_rng(0)
    y = np.r_[np.ones(20000), np.zeros(20000)].astype(bool)
    s = rng.random(40000)
    assert metrics.auc(y, s) == pytest.approx(0.5, abs=0.01)
    assert metrics.tpr_at_fpr(y, s, 0.05) == pytest.approx(0.05, abs=0.01)
    assert metrics.tpr_at_fpr(y, s, 0.01) == pytest.approx(0.01, abs=0.005)
    assert metrics.fpr_at_tpr(y, s, 0.95) == pytest.approx(0.95, abs=0.01)


@pytest.mark.parametrize("seed", range(5))
def test_spearman_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, 4, 7).astype(float), rng.normal(size=7)
    expected = spearmanr(a, b).statistic
    assert metrics.spearman(a, b) == pytest.approx(expected)
    assert np.isnan(metrics.spearman([1, 1, 1], [1, 2, 3]))
    assert metrics.rank_correlation({"a": 0.9, "b": 0.7, "c": 0.5}, {"a": 0.5, "b": 0.7, "c": 0.9}) == pytest.approx(-1)


def test_calibrated_threshold_gives_the_target_real_recall():
    rng = np.random.default_rng(1)
    for n in (1, 7, 20, 1000):
        reals = rng.normal(size=n)
        t = metrics.calibrate_threshold(reals, 0.95)
        assert np.mean(reals < t) >= 0.95 and np.mean(reals < np.nextafter(t, -np.inf)) <= np.mean(reals < t)
    ties = np.zeros(10)
    assert np.mean(ties < metrics.calibrate_threshold(ties, 0.95)) == 1.0


def test_degenerate_and_malformed_inputs():
    assert np.isnan(metrics.auc([1, 1, 1], [0.1, 0.2, 0.3]))  # one class: undefined, said so
    assert np.isnan(metrics.recall_at([1, 1], [True, False], positive=False))
    with pytest.raises(stats.MetricError, match="NaN"):
        metrics.auc([0, 1], [0.1, np.nan])
    with pytest.raises(stats.MetricError, match="shape"):
        metrics.auc([0, 1, 1], [0.1, 0.2])
    with pytest.raises(stats.MetricError, match="0/1"):
        metrics.auc([0, 2], [0.1, 0.2])
    with pytest.raises(stats.MetricError, match="both classes"):
        metrics.tpr_at_fpr([1, 1], [0.1, 0.2], 0.05)
    with pytest.raises(stats.MetricError):
        metrics.calibrate_threshold([], 0.95)


def _population(rng: np.random.Generator, anchors: int, shifts: dict[str, float]) -> list[ScoreRow]:
    """Anchor-clustered scores: each anchor has a random effect shared by its real video and its counterparts."""
    rows = []
    for i in range(anchors):
        a = f"a{i}"
        effect = rng.normal(0, 0.7)
        common = dict(
            condition="original", detector="sim", detector_version="1", runtime="sim", anchor_id=a, threshold=0.5
        )
        rows.append(ScoreRow(video_id=a, label="real", source="real", score=effect + rng.normal(), **common))
        for src, shift in shifts.items():
            rows.append(
                ScoreRow(
                    video_id=f"{a}_{src}", label="generated", source=src, score=effect + shift + rng.normal(), **common
                )
            )
    return rows


def test_bootstrap_interval_covers_the_true_auc_at_about_the_nominal_rate():
    """Tolerance: nominal 95 %; with 150 simulated studies the Monte Carlo sd of the coverage is ~1.8 points,
    and percentile intervals run slightly narrow on 40 clusters, so we accept [0.88, 0.99]."""
    shifts = {"s1": 0.5, "s2": 1.2}
    sd = np.sqrt(2 * 0.7**2 + 2 * 1.0**2)  # pos - neg of two independent anchors
    true_auc = float(np.mean([norm.cdf(d / sd) for d in shifts.values()]))
    rng = np.random.default_rng(11)
    covered = 0
    trials = 150
    for t in range(trials):
        ev = evaluate(_population(rng, 40, shifts), replicates=600, seed=t)
        lo, hi = ev.cell("sim", "original").auc_ci
        covered += lo <= true_auc <= hi
    assert 0.88 <= covered / trials <= 0.99, covered / trials


def test_confusion_counts_match_sklearn_and_vectorise_over_replicates():
    """One confusion type serves point estimates and bootstrap replicates: arrays of counts give, entry by
    entry, what scalar counts give, and scalar counts give scikit-learn's values."""
    rng = np.random.default_rng(11)
    counts = []
    for _ in range(40):
        y = rng.integers(0, 2, 30)
        pred = rng.random(30) < 0.5
        c = metrics.Confusion.from_predictions(y, pred)
        if (y == 1).any() and (y == 0).any():
            assert c.balanced_accuracy == pytest.approx(balanced_accuracy_score(y, pred))
        assert c.macro_f1 == pytest.approx(f1_score(y, pred, average="macro", zero_division=0))
        counts.append((c.tp, c.fn, c.tn, c.fp))
    tp, fn, tn, fp = (np.array(v, dtype=float) for v in zip(*counts, strict=True))
    batch = metrics.Confusion(tp=tp, fn=fn, tn=tn, fp=fp)
    for i, (a, b, c_, d) in enumerate(counts):
        one = metrics.Confusion(tp=a, fn=b, tn=c_, fp=d)
        for name in ("fake_recall", "real_recall", "balanced_accuracy", "macro_f1"):
            assert getattr(batch, name)[i] == pytest.approx(getattr(one, name), nan_ok=True)
    assert np.isnan(metrics.Confusion(tp=0, fn=0, tn=3, fp=1).fake_recall)  # no generated video: undefined


def test_the_calibrated_threshold_is_the_smallest_that_reaches_the_target():
    """Against a brute force over every candidate (each distinct score and the float just above it), on random
    inputs with heavy ties: RealR reaches the target at the threshold and at no smaller candidate."""
    rng = np.random.default_rng(5)
    for n in (1, 2, 5, 19, 20, 21, 60, 100, 333):
        for target in (0.5, 0.9, 0.95, 0.99):
            reals = rng.integers(0, max(2, n // 3), n).astype(float) if n % 2 else rng.normal(size=n)
            t = metrics.calibrate_threshold(reals, target)
            candidates = np.unique(np.r_[reals, np.nextafter(reals, np.inf)])
            reaching = [c for c in candidates if np.mean(reals < c) >= target]
            assert t == min(reaching), (n, target)
    # the old quantile rule overshot: 20 reals, target 0.95, gave RealR 1.00 instead of 0.95
    reals = np.arange(20.0)
    assert np.mean(reals < metrics.calibrate_threshold(reals, 0.95)) == 0.95


def _paired_population(rng: np.random.Generator, anchors: int, shifts: dict, delta: float) -> list[ScoreRow]:
    """Each video scored under `original` and under a condition that lowers its score by ``delta`` plus a little
    noise of its own: the same videos, so the two FakeR estimates are correlated, as in a real replay."""
    rows = []
    for i in range(anchors):
        a, effect = f"a{i}", rng.normal(0, 0.7)
        common = dict(detector="sim", detector_version="1", runtime="sim", anchor_id=a, threshold=0.5)
        videos = [(a, "real", "real", effect + rng.normal())]
        videos += [(f"{a}_{s}", "generated", s, effect + shift + rng.normal()) for s, shift in shifts.items()]
        for vid, label, source, score in videos:
            moved = score - (delta if label == "generated" else 0.0) + rng.normal(0, 0.3)
            for condition, value in (("original", score), ("cond", moved)):
                rows.append(
                    ScoreRow(video_id=vid, label=label, source=source, condition=condition, score=value, **common)
                )
    return rows


def test_paired_fake_recall_drift_intervals_cover_the_truth_at_about_the_nominal_rate():
    """True FakeR of a source with shift m: P(N(m, 0.7^2 + 1) >= 0.5), and under the condition
    P(N(m - delta, 0.7^2 + 1 + 0.3^2) >= 0.5); the drift is their difference averaged over sources. Over 300
    simulated datasets the 95 % paired interval must cover it 90-98 % of the time (Monte Carlo sd ~1.3 points)."""
    shifts, delta = {"s1": 0.8, "s2": 1.5}, 0.6
    before = np.mean([1 - norm.cdf((0.5 - m) / np.sqrt(1.49)) for m in shifts.values()])
    after = np.mean([1 - norm.cdf((0.5 - m + delta) / np.sqrt(1.58)) for m in shifts.values()])
    truth = after - before
    rng = np.random.default_rng(21)
    covered, trials = 0, 300
    for t in range(trials):
        cell = evaluate(_paired_population(rng, 60, shifts, delta), replicates=400, seed=t).cell("sim", "cond")
        lo, hi = cell.fake_recall_drift_ci
        covered += lo <= truth <= hi
        assert cell.real_recall_drift_ci is not None and cell.undefined_replicates["fake_recall"] == 0
    assert 0.90 <= covered / trials <= 0.98, covered / trials


def test_recall_drifts_hold_newcombes_interval_and_never_collapse():
    """PROTOCOL.md: a detector's FakeR/RealR under a condition minus under original is a difference of paired
    proportions, with a score interval that never collapses (Newcombe 1998, method 10); the bootstrap's alone was
    0 [0, 0] where no video changed its decision. The interval holds Newcombe's on the videos decided under both
    (a failure a miss; a video with no row under one of them is no pair), and its point is the difference of the
    FakeRs shown."""
    from detectors.stats.intervals import paired_proportion_difference

    rows = _paired_population(np.random.default_rng(3), 30, {"s1": 0.8, "s2": 1.5}, 0.6)
    original = {r.video_id: r.score for r in rows if r.condition == "original"}
    same = [r.model_copy(update={"score": original[r.video_id]}) for r in rows]  # cond decides as original does
    cell = evaluate(same, replicates=100).cell("sim", "cond")
    for drift, ci in (
        (cell.fake_recall_drift, cell.fake_recall_drift_ci),
        (cell.real_recall_drift, cell.real_recall_drift_ci),
    ):
        assert drift == 0 and ci[0] < 0 < ci[1]
    failed = {"a1_s1", "a2"}
    rows = [r for r in rows if not (r.condition == "cond" and r.video_id == "a5_s2")]  # no row under cond
    rows = [r.model_copy(update={"score": None, "error": "bad", "error_kind": "video", "error_class": "X"})
            if r.condition == "cond" and r.video_id in failed else r for r in rows]  # fmt: skip
    ev = evaluate(rows, replicates=100)
    cell, base = ev.cell("sim", "cond"), ev.cell("sim", "original")
    by = {(r.video_id, r.condition): r for r in rows}
    for label, key in (("generated", "fake_recall"), ("real", "real_recall")):
        assert getattr(cell, f"{key}_drift") == pytest.approx(getattr(cell, key) - getattr(base, key), abs=1e-12)
        videos = sorted(v for (v, c), r in by.items() if c == "cond" and r.label == label)
        hit = [[by[v, c].score is not None and (by[v, c].score >= 0.5) == (label == "generated") for v in videos]
               for c in ("cond", "original")]  # fmt: skip
        _, lo, hi = paired_proportion_difference(*hit)
        got = getattr(cell, f"{key}_drift_ci")
        assert got[0] <= lo + 1e-12 and got[1] >= hi - 1e-12, (label, got, (lo, hi))
    assert base.fake_recall_drift_ci == (0.0, 0.0)


def test_recall_drift_intervals_keep_an_anchors_videos_together():
    """Newcombe's interval counts each video as an independent pair. When a condition moves some anchors' videos
    more than others' (5 sources per anchor, the shift's sd 0.8 between anchors), it covered the true FakeR drift
    83 % of the time over 200 simulated datasets of 40 anchors; the interval reported (the hull of it and the
    anchor-clustered bootstrap's) covers it at 92-99 %."""
    from gateway.evaluation import proportions

    shifts, delta, spread, move = {f"s{k}": m for k, m in enumerate([0.5, 0.8, 1.1, 1.4, 1.7])}, 0.6, 1.0, 0.8
    before = np.mean([1 - norm.cdf((0.5 - m) / np.sqrt(spread**2 + 1)) for m in shifts.values()])
    after = np.mean([1 - norm.cdf((0.5 - m + delta) / np.sqrt(spread**2 + 1.09 + move**2)) for m in shifts.values()])
    rng, hull, alone, trials = np.random.default_rng(7), 0, 0, 200
    for t in range(trials):
        rows = []
        for i in range(40):
            a, effect, extra = f"a{i}", rng.normal(0, spread), rng.normal(0, move)
            common = dict(detector="sim", detector_version="1", runtime="sim", anchor_id=a, threshold=0.5)
            videos = [(a, "real", "real", effect + rng.normal())]
            videos += [(f"{a}_{s}", "generated", s, effect + m + rng.normal()) for s, m in shifts.items()]
            for vid, label, src, score in videos:
                moved = score - ((delta + extra) if label == "generated" else 0) + rng.normal(0, 0.3)
                rows += [ScoreRow(video_id=vid, label=label, source=src, condition=c, score=v, **common)
                         for c, v in (("original", score), ("cond", moved))]  # fmt: skip
        lo, hi = evaluate(rows, replicates=300, seed=t).cell("sim", "cond").fake_recall_drift_ci
        hull += lo <= after - before <= hi
        decided = proportions.decisions(rows, {"sim": 0.5})
        _, (lo, hi) = proportions.recall_differences(decided["sim", "cond"], decided["sim", "original"])[0]
        alone += lo <= after - before <= hi
    assert alone / trials < 0.9 and 0.92 <= hull / trials <= 0.99, (alone / trials, hull / trials)


def test_auc_drift_is_on_the_videos_scored_under_both_conditions():
    """PROTOCOL.md: drift on the same videos. A video that failed under one of the two conditions leaves both
    AUCs of its drift (each cell's own AUC keeps it where it was scored): the drift equals the one of a run where
    those videos failed under both, interval included, and is not the difference of the two cells' AUCs."""
    rows = _paired_population(np.random.default_rng(5), 30, {"s1": 0.8, "s2": 1.5}, 0.6)
    once = {("a2", "cond"), ("a3_s1", "original"), ("a4_s2", "cond")}
    twice = {(v, c) for v, _ in once for c in ("cond", "original")}
    ev, want = evaluate(_failed(rows, once), replicates=200), evaluate(_failed(rows, twice), replicates=200)
    got, same = ev.cell("sim", "cond"), want.cell("sim", "cond")
    assert got.auc_drift == pytest.approx(same.auc - want.cell("sim", "original").auc, abs=1e-12)
    assert got.auc_drift_ci == pytest.approx(same.auc_drift_ci, abs=1e-12)
    assert abs(got.auc_drift - (got.auc - ev.cell("sim", "original").auc)) > 1e-4
    assert abs(got.auc - same.auc) > 1e-4  # the cell's AUC keeps a3_s1, scored under cond
    from gateway.evaluation.caveats import sample_warnings

    (warning,) = [w for w in sample_warnings(ev, _failed(rows, once)) if w.startswith("AUC drift is on the videos")]
    assert "sim under cond" in warning
    assert not [w for w in sample_warnings(want, _failed(rows, twice)) if w.startswith("AUC drift is on")]


def test_undefined_metrics_warn_as_scikit_learn_does():
    with pytest.warns(stats.UndefinedMetricWarning, match="AUC with only one class"):
        assert np.isnan(metrics.auc([1, 1, 1], [0.1, 0.2, 0.3]))
    with pytest.warns(stats.UndefinedMetricWarning, match="RealR with no real video"):
        assert np.isnan(metrics.recall_at([1, 1], [True, False], positive=False))
    with pytest.warns(stats.UndefinedMetricWarning, match="FakeR with no generated video"):
        assert np.isnan(metrics.Confusion(tp=0, fn=0, tn=2, fp=1).fake_recall)


def test_average_ranks_equal_scipys_rankdata_value_for_value():
    from scipy.stats import rankdata

    rng = np.random.default_rng(8)
    for trial in range(500):
        n = int(rng.integers(1, 60))
        v = rng.integers(-3, 4, n).astype(float) if trial % 2 else rng.normal(size=n)
        if trial % 5 == 0:
            v[rng.random(n) < 0.3] = np.inf
        if trial % 7 == 0:
            v[rng.random(n) < 0.3] = -0.0  # equal to 0.0: one run of ties
        assert np.array_equal(metrics.average_ranks(v), rankdata(v))


def test_the_monitor_does_not_import_scipy_stats():
    """scipy.stats is about 70 MB of a process's memory: the monitor's statistics use scipy.special's ndtri (what
    norm.ppf calls) and their own average ranks."""
    import subprocess
    import sys

    code = "import sys, gateway.monitor.service, gateway.monitor.signals; print('scipy.stats' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_average_ranks_of_a_vector_with_nan_are_nan_as_scipys():
    from scipy.stats import rankdata

    v = np.array([0.5, np.nan, 0.7, 0.6])
    assert np.isnan(metrics.average_ranks(v)).all() and np.isnan(rankdata(v)).all()
    assert np.isnan(metrics.spearman(v, [1.0, 2.0, 3.0, 4.0]))
