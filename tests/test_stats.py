"""The statistics package (detectors/stats/): its own floor (nothing of the project imported, no scipy.stats), and
the pieces no library has, each against a worked example: runs of ties, the bootstrap's strata and draws, the
percentile interval, and the estimates as the reports give them."""

from __future__ import annotations

import ast
import itertools
import tomllib
from pathlib import Path

import numpy as np
import pytest

from detectors.stats import MetricError, estimates, intervals
from detectors.stats.bootstrap import percentile_interval, strata_of, stratified_counts
from detectors.stats.ties import average_ranks, run_ends, run_starts, runs

ROOT = Path(__file__).resolve().parents[1]
STATS = ROOT / "detectors" / "stats"


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_statistics_contract_forbids_every_other_detectors_module():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["id"] == "statistics"]
    assert contract["source_modules"] == ["detectors.stats"]
    others = {f"detectors.{p.stem}" for p in (ROOT / "detectors").glob("*.py") if p.stem != "__init__"}
    others |= {f"detectors.{p.parent.name}" for p in (ROOT / "detectors").glob("*/__init__.py")}
    assert others - {"detectors.stats"} <= set(contract["forbidden_modules"])
    assert {"gateway", "transforms"} <= set(contract["forbidden_modules"])


def test_no_statistics_module_imports_scipy_stats_or_another_package_of_the_project():
    for path in STATS.glob("*.py"):
        for name in _imports(path):
            assert not name.startswith("scipy.stats"), (path.name, name)
            assert not name.startswith(("gateway", "transforms")), (path.name, name)
            assert not name.startswith("detectors.") or name.startswith("detectors.stats"), (path.name, name)


def test_runs_of_ties_are_those_of_a_written_out_example():
    ascending = np.array([0.1, 0.1, 0.2, 0.5, 0.5, 0.5, 0.9])
    assert run_starts(ascending).tolist() == [True, False, True, True, False, False, True]
    run, ends = runs(ascending)
    assert run.tolist() == [0, 0, 1, 2, 2, 2, 3]
    assert ends.tolist() == [2, 3, 6, 7] == run_ends(ascending).tolist()
    # mid-ranks: the run at sorted positions s..e-1 takes (s + e + 1) / 2
    assert average_ranks(np.array([0.5, 0.1, 0.9, 0.5, 0.2, 0.1, 0.5])).tolist() == [5, 1.5, 7, 5, 3, 1.5, 5]


@pytest.mark.parametrize("seed", range(5))
def test_runs_equal_those_itertools_groupby_finds(seed):
    v = np.sort(np.random.default_rng(seed).integers(0, 6, 40).astype(float))
    lengths = [len(list(g)) for _, g in itertools.groupby(v.tolist())]
    assert run_ends(v).tolist() == np.cumsum(lengths).tolist()
    assert runs(np.array([]))[1].tolist() == [] and run_ends(np.array([3.0])).tolist() == [1]


def test_an_anchor_alone_in_its_stratum_joins_the_nearest_one():
    a, ab, abc, z = frozenset("a"), frozenset("ab"), frozenset("abc"), frozenset("z")
    # clusters 0-1 share {a, b}, 2-4 share {a, b, c}; 5 alone with {a}: nearest by Jaccard is {a, b} (1/2 > 1/3)
    assert strata_of([ab, ab, abc, abc, abc, a]) == [[0, 1, 5], [2, 3, 4]]
    # {z} shares nothing with either: the larger stratum takes it
    assert strata_of([ab, ab, abc, abc, abc, z]) == [[0, 1], [2, 3, 4, 5]]
    # a single stratum stays as it is, even of one cluster; two lone clusters join each other
    assert strata_of([a]) == [[0]] and strata_of([a, z]) == [[0, 1]]


def test_stratified_counts_keep_each_stratum_size_and_a_merged_anchor_varies():
    keys = [frozenset("ab")] * 3 + [frozenset("a")]
    strata = strata_of(keys)
    counts = stratified_counts(strata, 4, replicates=400, seed=3)
    assert counts.shape == (400, 4) and (counts.sum(axis=1) == 4).all()
    alone = stratified_counts([[0, 1, 2], [3]], 4, replicates=400, seed=3)
    assert (alone[:, 3] == 1).all()  # alone, the anchor is drawn once in every replicate: no spread
    assert counts[:, 3].std() > 0.5  # merged, it is drawn 0 to 4 times: it varies as its neighbours do
    assert np.array_equal(counts, stratified_counts(strata, 4, replicates=400, seed=3))  # seeded
    with pytest.raises(MetricError):
        stratified_counts(strata, 4, replicates=0, seed=3)


def test_the_percentile_interval_is_numpys_percentiles_of_the_defined_replicates():
    samples = np.array([np.nan, *np.linspace(0, 1, 101), np.nan])
    assert percentile_interval(samples) == pytest.approx((0.025, 0.975))
    assert percentile_interval(samples, 0.9) == pytest.approx(tuple(np.percentile(np.linspace(0, 1, 101), [5, 95])))
    assert all(np.isnan(percentile_interval(np.full(3, np.nan))))
    with pytest.raises(MetricError):
        percentile_interval(samples, 1.0)


def test_estimates_of_a_worked_example():
    # 3 of 4 pairs hit on x, 1 of 4 on y: mean difference 0.5 with Newcombe's interval of those pairs
    x, y = [True, True, True, False], [True, False, False, False]
    d, (lo, hi) = estimates.paired_difference(x, y)
    assert d == 0.5 and (d, lo, hi) == intervals.paired_proportion_difference(np.array(x), np.array(y))
    assert estimates.share(3, 4) == (0.75, intervals.wilson_interval(3, 4)[1:])
    assert (
        all(np.isnan(estimates.share(0, 0)[0]) for _ in [0])
        and estimates.paired_difference([], []) is estimates.NO_PAIRS
    )
    # the hull: the lower end of one, the upper of the other; an undefined end takes the other's
    assert estimates.widened((0.4, (0.3, 0.5)), (0.41, (0.2, 0.45))) == (0.4, (0.2, 0.5))
    assert estimates.widened((0.4, (np.nan, 0.5)), (0.41, (0.2, 0.45))) == (0.4, (0.2, 0.5))
    # two clusters, 3 of 4 and 1 of 4; weights pick cluster 0 twice, then cluster 1 twice
    (point, (lo, hi)), replicates = estimates.clustered_share(np.array([3.0, 1.0]), np.array([4.0, 4.0]),
                                                               np.array([[2.0, 0.0], [0.0, 2.0]]))  # fmt: skip
    assert point == 0.5 and replicates.tolist() == [0.75, 0.25]
    wilson = intervals.wilson_interval(4, 8)
    assert (lo, hi) == (
        min(np.percentile([0.75, 0.25], 2.5), wilson[1]),
        max(np.percentile([0.75, 0.25], 97.5), wilson[2]),
    )


@pytest.mark.parametrize(("k", "n"), [(0, 1), (3, 10), (10, 10), (17, 250), (499, 1000)])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_wilson_equals_scipys_binomtest_wilson_interval(k, n, confidence):
    from scipy.stats import binomtest

    want = binomtest(k, n).proportion_ci(confidence, method="wilson")
    p, lo, hi = intervals.wilson_interval(k, n, confidence)
    assert p == k / n and lo == pytest.approx(want.low, abs=1e-12) and hi == pytest.approx(want.high, abs=1e-12)


def test_the_normal_quantile_is_scipys_and_refuses_a_level_outside_0_1():
    from scipy.stats import norm

    from detectors.stats.inputs import z_quantile

    for c in (0.5, 0.9, 0.95, 0.99):
        assert z_quantile(c) == pytest.approx(norm.ppf(0.5 + c / 2), abs=1e-12)
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(MetricError):
            z_quantile(bad)


def test_every_is_one_read_only_array_per_recent_length_and_is_everything_knows_it():
    from detectors.stats.ranks import every, is_everything

    a = every(5)
    assert a.tolist() == [0, 1, 2, 3, 4] and not a.flags.writeable and every(5) is a
    assert is_everything(a, 5) and is_everything(np.arange(5), 5)
    assert not is_everything(np.array([0, 2, 1, 3, 4]), 5) and not is_everything(np.arange(4), 5)
