"""The monitor's champion-vs-challenger series (issue 25): computed in the windowed computation on the videos both
scored (under the condition and under original), equal to the interval functions applied to the same score
events, every comparison family exported once a comparison is configured, none without one."""

from __future__ import annotations

import numpy as np
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from detectors.stats import intervals
from gateway.core import catalogue as mc
from gateway.monitor.config import ComparisonSettings, MonitorConfig, WindowSettings
from gateway.monitor.exporter import MonitorMetrics
from gateway.monitor.store import Store
from tests.support.monitor import NOW, Clock, event, stream

DROPPED = {f"v{i}" for i in range(0, 80, 7)}  # d3 never scored these under full


def _store(rng, comparisons):
    truth, rows = stream(rng, n=160)
    rows = [r for r in rows if not (r.detector == "d3" and r.condition == "full" and r.video_id in DROPPED)]
    store = Store(WindowSettings(count=60), Clock())
    for row in rows:
        store.add_score(row, 0.0)
    for vid, label in truth.items():
        store.add_label(vid, label, NOW)
    return truth, rows, MonitorMetrics(store, store.settings, Clock(), lambda: True, comparisons=comparisons)


def _scrape(metrics) -> dict[tuple[str, tuple], float]:
    page = generate_latest(metrics.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(page)
        for s in f.samples
    }


def test_comparison_series_equal_the_intervals_on_the_shared_videos():
    cmp = ComparisonSettings(champion="npr@1", challenger="d3", margin=-0.03, min_samples=40)
    truth, rows, metrics = _store(np.random.default_rng(9), [cmp])
    got = _scrape(metrics)
    by = {(r.detector, r.condition, r.video_id): r for r in rows}
    shared = sorted(
        {v for (d, c, v) in by if d == "d3" and c == "full"}, key=lambda v: (by["npr", "full", v].event_time, v)
    )
    assert len(shared) == 160 - len(DROPPED)

    def arr(det, cond, what):
        return np.array([getattr(by[det, cond, v], what) for v in shared])

    y = np.array([truth[v] == "generated" for v in shared])
    want = {
        "lastmile_comparison_videos": float(len(shared)),
        "lastmile_comparison_samples": float(len(shared)),
        "lastmile_comparison_disagreement": np.mean(arr("npr", "full", "decision") != arr("d3", "full", "decision")),
        "lastmile_comparison_flip_rate_difference": np.mean(
            arr("d3", "full", "decision") != arr("d3", "original", "decision")
        )
        - np.mean(arr("npr", "full", "decision") != arr("npr", "original", "decision")),
    }
    diff = intervals.auc_difference(y, arr("npr", "full", "score"), arr("d3", "full", "score"))
    rob = intervals.robustness_difference(
        y, (arr("npr", "original", "score"), arr("npr", "full", "score")),
        (arr("d3", "original", "score"), arr("d3", "full", "score")),
    )  # fmt: skip
    fr = intervals.paired_proportion_difference(arr("d3", "full", "decision")[y], arr("npr", "full", "decision")[y])
    for name, value in (("auc", diff), ("robustness", rob), ("fake_recall", fr)):
        for suffix, v in zip(("", "_lower", "_upper"), value, strict=True):
            want[f"lastmile_comparison_{name}_difference{suffix}"] = v
    labels = (("challenger", "d3"), ("champion", "npr@1"), ("condition", "full"), ("population", "traffic"),
              ("window", "time"))  # fmt: skip
    for name, value in want.items():
        assert got[name, labels] == pytest.approx(value, abs=1e-12), name
    flips = [arr(d, "full", "decision") != arr(d, "original", "decision") for d in ("d3", "npr")]
    newcombe = intervals.paired_proportion_difference(*flips)  # each video's flip, challenger's against champion's
    for suffix, v in zip(("", "_lower", "_upper"), newcombe, strict=True):
        assert got[f"lastmile_comparison_flip_rate_difference{suffix}", labels] == pytest.approx(v, abs=1e-12)
    assert newcombe[1] < newcombe[0] < newcombe[2]
    for quantity in ("lastmile_comparison_auc_difference", "lastmile_comparison_robustness_difference"):
        assert got["lastmile_comparison_interval_zero_width", tuple(sorted((*labels, ("quantity", quantity))))] == 0.0
    ident = (("challenger", "d3"), ("champion", "npr@1"), ("population", "traffic"))
    assert got["lastmile_comparison_margin", ident] == -0.03
    assert got["lastmile_comparison_min_samples", ident] == 40
    count = (("challenger", "d3"), ("champion", "npr@1"), ("condition", "full"), ("population", "traffic"),
             ("window", "count"))  # fmt: skip
    assert got["lastmile_comparison_videos", count] == 60
    original = (("challenger", "d3"), ("champion", "npr@1"), ("condition", "original"), ("population", "traffic"),
                ("window", "time"))  # fmt: skip
    assert got["lastmile_comparison_videos", original] == 160
    assert ("lastmile_comparison_robustness_difference", original) not in got
    scraped = {name for name, _ in got}
    for family in mc.families(mc.Exporter.COMPARISONS):
        assert family.name in scraped, family.name


def test_without_comparisons_or_with_an_unknown_contender_nothing_is_compared():
    _, _, plain = _store(np.random.default_rng(1), [])
    assert not any(name.startswith("lastmile_comparison") for name, _ in _scrape(plain))
    cmp = ComparisonSettings(champion="npr@7", challenger="d3")
    _, _, unknown = _store(np.random.default_rng(1), [cmp])
    assert {n for n, _ in _scrape(unknown) if n.startswith("lastmile_comparison")} == {
        "lastmile_comparison_margin",
        "lastmile_comparison_min_samples",
        "lastmile_comparison_contender_scored",
    }
    scored = {dict(labels)["role"]: v for (n, labels), v in _scrape(unknown).items() if n.endswith("contender_scored")}
    assert scored == {"champion": 0.0, "challenger": 1.0}  # no event carries npr@7: what the alert reads


def test_comparisons_are_configuration():
    cfg = MonitorConfig.model_validate({"comparisons": [{"champion": "npr@1.0.0", "challenger": "npr@1.1.0"}]})
    assert cfg.comparisons[0].margin == -0.05 and cfg.comparisons[0].min_samples == 50
    with pytest.raises(ValueError):
        MonitorConfig.model_validate({"comparisons": [{"champion": "npr", "challenger": "d3", "margin": 0.1}]})


def test_a_comparison_of_a_detector_with_itself_or_given_twice_is_refused():
    import click

    from gateway.cli.monitor import with_comparisons

    with pytest.raises(ValueError, match="two contenders"):
        ComparisonSettings(champion="npr", challenger=" npr ")
    twice = [ComparisonSettings(champion="npr", challenger="d3"), ComparisonSettings(champion="npr", challenger="d3")]
    with pytest.raises(ValueError, match="the comparison npr:d3 is given twice"):
        MonitorConfig(comparisons=twice)
    cfg = MonitorConfig(comparisons=twice[:1])
    for pairs, message in ((("d3:d3",), "two contenders"), (("npr:d3",), "given twice"), (("a:b", "a:b"), "twice")):
        with pytest.raises(click.BadParameter, match=message):
            with_comparisons(cfg, pairs)
    added = with_comparisons(cfg, ("d3:npr", "npr@1:npr@2"))
    assert [(c.champion, c.challenger) for c in added.comparisons] == [("npr", "d3"), ("d3", "npr"), ("npr@1", "npr@2")]


def test_a_configured_pair_is_kept_without_its_surrounding_spaces():
    """The sides name series and select scores: ``" npr "`` must be ``npr`` (it used to be kept as written, so it
    matched no score and escaped the check for a pair given twice)."""
    cmp = ComparisonSettings(champion=" npr@1 ", challenger="d3 ")
    assert (cmp.champion, cmp.challenger) == ("npr@1", "d3")
    spaced = [{"champion": "npr", "challenger": "d3"}, {"champion": " npr", "challenger": "d3 "}]
    with pytest.raises(ValueError, match="the comparison npr:d3 is given twice"):
        MonitorConfig.model_validate({"comparisons": spaced})


def test_a_comparison_on_canaries_reads_the_labelled_canaries_only():
    """Comparisons read traffic only, so canaries, the live AUC without production labels, could not drive one
    (lastmile_comparison_samples stayed 0). ``population: canary`` compares on them, and on nothing else."""
    rng = np.random.default_rng(5)
    store = Store(WindowSettings(count=60), Clock())
    y = rng.random(80) < 0.5
    scores = {det: rng.normal(y * shift, 1.0) for det, shift in (("npr", 1.5), ("d3", 0.5))}
    for i in range(80):
        label = ("real", "generated")[int(y[i])]
        for det in ("npr", "d3"):
            store.add_score(
                event(f"c{i}", "original", float(scores[det][i]), NOW - 80 + i, det, label, canary=True), 0.0
            )
        store.add_score(event(f"t{i}", "original", float(rng.normal()), NOW - 80 + i, "npr"), 0.0)  # traffic: npr only
    cmps = [ComparisonSettings(champion="npr", challenger="d3", population=p) for p in ("canary", "traffic")]
    got = _scrape(MonitorMetrics(store, store.settings, Clock(), lambda: True, comparisons=cmps))
    on = (("challenger", "d3"), ("champion", "npr"), ("condition", "original"), ("population", "canary"),
          ("window", "time"))  # fmt: skip
    assert got["lastmile_comparison_samples", on] == 80 == got["lastmile_comparison_videos", on]
    diff = intervals.auc_difference(y, scores["npr"], scores["d3"])
    for suffix, value in zip(("", "_lower", "_upper"), diff, strict=True):
        assert got[f"lastmile_comparison_auc_difference{suffix}", on] == pytest.approx(value, abs=1e-12)
    traffic = {k for k in got if k[0].startswith("lastmile_comparison_") and ("population", "traffic") in k[1]
               and ("condition", "original") in k[1]}  # fmt: skip
    assert traffic == set()  # d3 scored no traffic: nothing compared there
    scored = {(dict(k)["population"], dict(k)["role"]): v for n, k in got if n == "lastmile_comparison_contender_scored"
              for v in [got[n, k]]}  # fmt: skip
    assert scored == {("canary", "champion"): 1, ("canary", "challenger"): 1, ("traffic", "champion"): 1,
                      ("traffic", "challenger"): 0}  # d3 on traffic: none, so its alert can fire  # fmt: skip
    with pytest.raises(ValueError, match="given twice"):
        MonitorConfig(comparisons=[*cmps, cmps[0]])  # a pair once per population
