"""The monitor's live page without a server or a browser: built from the very collectors that serve /metrics,
every cell it shows equals the exported sample to the page's precision; names from the stream are escaped; the
alerts are Prometheus's, the project's only; its own script and style are all it loads."""

from __future__ import annotations

import json

import numpy as np
import pytest

from detectors.serving.processes import free_port
from gateway.monitor.alerts import Alerts, AlertSource, parse
from gateway.monitor.config import ComparisonSettings, WindowSettings
from gateway.monitor.exporter import MonitorMetrics
from gateway.monitor.page import DIGITS, PERCENT_DIGITS, RAW, build
from gateway.monitor.page_app import page_app, render
from gateway.toolkit.http import endpoints_app
from tests.support.monitor import NOW, Clock, event, stream
from tests.support.page import by_series, cell, of_class, read

PAIR = ComparisonSettings(champion="npr", challenger="d3")


def _metrics(ready: bool = True, extra=(), comparisons=(PAIR,), all_real: bool = False) -> MonitorMetrics:
    rng = np.random.default_rng(3)
    truth, rows = stream(rng)
    truth = {vid: "real" for vid in truth} if all_real else truth
    clock = Clock()
    from gateway.monitor.store import Store

    store = Store(WindowSettings(count=100), clock)
    for r in [*rows, *extra]:
        store.add_score(r, NOW)
    for vid, label in truth.items():
        store.add_label(vid, label, NOW)
    return MonitorMetrics(store, store.settings, clock, lambda: ready, comparisons=list(comparisons))


def _samples(metrics: MonitorMetrics, name: str, **labels: str) -> dict[tuple[str, ...], float]:
    return {
        tuple(s.labels.values()): s.value
        for f in metrics.registry.collect()
        for s in f.samples
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())
    }


def _shown(x: float, family: str = "lastmile_auc") -> str:
    """As the page shows a sample of ``family``: in % (an AUC, a share, their differences), or as it is (issue 64:
    the page showed AUC on a 0-1 scale where the report uses %)."""
    return f"{x:.{DIGITS}f}" if family in RAW else f"{100 * x:.{PERCENT_DIGITS}f}"


LABELLED = {"lastmile_auc": "auc", "lastmile_fake_recall": "fake-recall", "lastmile_real_recall": "real-recall",
            "lastmile_auc_drift": "auc-drift", "lastmile_fake_recall_drift": "fake-recall-drift",
            "lastmile_real_recall_drift": "real-recall-drift"}  # fmt: skip
LABEL_FREE = {"lastmile_generated_rate": "generated-rate", "lastmile_score_shift_mean": "score-shift",
              "lastmile_score_ks_statistic": "ks"}  # fmt: skip
FLIPS = {"real_to_generated": "flips-to-generated", "generated_to_real": "flips-to-real"}


def _want(metrics: MonitorMetrics, family: str, **where: str) -> dict[tuple[str, str, str], dict[str, str]]:
    """What the page must show for ``family``'s samples that match ``where``: the value, and the interval."""
    want = {}
    for labels, value in _samples(metrics, family, **where).items():
        names = ("detector", "version", "condition", "window", "population")
        at = dict(zip(names, labels, strict=False)) | where  # (a flip rate: its direction too)
        lo, hi = (_samples(metrics, f"{family}_{side}", **at) for side in ("lower", "upper"))
        interval = f"[{_shown(*lo.values(), family)}, {_shown(*hi.values(), family)}]" if lo else ""
        want[labels[:3]] = {"value": _shown(value, family), "interval": interval}
    return want


@pytest.mark.parametrize("window", ["time", "count"])
def test_every_cell_equals_the_metrics_sample_to_the_shown_precision(window):
    metrics = _metrics()
    page = read(render(build(metrics.registry, {"window": window}, Alerts(None))))
    for family, cls in LABELLED.items():
        want = _want(metrics, family, window=window, population="labelled")
        assert len(want) == (2 if family.endswith("drift") else 4)  # 2 detectors x (full, or original and full)
        got = by_series(page, cls)
        assert {k: v for k, v in got.items() if v["value"]} == want, family
    for family, cls in LABEL_FREE.items():
        want = _want(metrics, family, window=window, population="traffic")
        assert want and {k: v for k, v in by_series(page, cls).items() if v["value"]} == want, family
    for direction, cls in FLIPS.items():
        want = _want(metrics, "lastmile_flip_rate", window=window, population="traffic", direction=direction)
        assert want and {k: v for k, v in by_series(page, cls).items() if v["value"]} == want, direction


def test_a_window_of_real_videos_only_shows_its_realr_rows():
    metrics = _metrics(all_real=True)
    page = read(render(build(metrics.registry, {}, Alerts(None))))
    want = _want(metrics, "lastmile_real_recall", window="time", population="labelled")
    assert len(want) == 4 and {k: v for k, v in by_series(page, "real-recall").items() if v["value"]} == want
    assert not {k: v for k, v in by_series(page, "auc").items() if v["value"]}  # no AUC without a generated video


def test_a_comparison_shows_each_difference_with_its_interval():
    metrics = _metrics()
    page = read(render(build(metrics.registry, {}, Alerts(None))))
    pair = {"champion": "npr", "challenger": "d3", "population": "traffic"}
    shown = of_class(page, "auc-difference")
    assert len(shown) == 2  # original and full
    for cond in ("original", "full"):
        at = {**pair, "condition": cond, "window": "time"}
        (value,) = _samples(metrics, "lastmile_comparison_auc_difference", **at).values()
        (lo,) = _samples(metrics, "lastmile_comparison_auc_difference_lower", **at).values()
        (hi,) = _samples(metrics, "lastmile_comparison_auc_difference_upper", **at).values()
        got = cell(page, "auc-difference", **pair, condition=cond)
        assert got == {"value": _shown(value), "interval": f"[{_shown(lo)}, {_shown(hi)}]"}
    at = {**pair, "condition": "full", "window": "time"}  # the flip-rate difference, with Newcombe's interval
    (value,), (lo,), (hi,) = (_samples(metrics, f"lastmile_comparison_flip_rate_difference{s}", **at).values()
                              for s in ("", "_lower", "_upper"))  # fmt: skip
    got = cell(page, "flip-rate-difference", **pair, condition="full")
    assert got == {"value": _shown(value), "interval": f"[{_shown(lo)}, {_shown(hi)}]"} and lo < hi
    robust = cell(page, "robustness-difference", **pair, condition="full")
    assert robust["interval"].startswith("[") and robust["value"]


def test_a_zero_width_interval_is_flagged_by_the_monitor_and_marked_on_the_page_alone():
    """A detector that separates the classes perfectly has a DeLong AUC interval of zero width: the monitor exports
    lastmile_interval_zero_width 1 for it and 0 for the others, and the page marks that cell alone, as the report
    does; a Wilson interval is never flagged."""
    truth, _ = stream(np.random.default_rng(3))  # the videos _metrics scores
    oracle = [event(vid, cond, 1.0 if label == "generated" else -1.0, NOW - 1500 + 5 * i, "oracle")
              for i, (vid, label) in enumerate(truth.items()) for cond in ("original", "full")]  # fmt: skip
    metrics = _metrics(extra=oracle)
    where = {"window": "time", "population": "labelled"}
    flags = _samples(metrics, "lastmile_interval_zero_width", quantity="lastmile_auc", **where)
    assert {labels[:3]: v for labels, v in flags.items()} == {
        (det, "1", cond): float(det == "oracle") for det in ("npr", "d3", "oracle") for cond in ("original", "full")
    }
    (lo,), (hi,) = (_samples(metrics, f"lastmile_auc_{s}", detector="oracle", condition="full", **where).values()
                    for s in ("lower", "upper"))  # fmt: skip
    assert lo == hi == 1.0
    drift = _samples(metrics, "lastmile_interval_zero_width", quantity="lastmile_auc_drift", detector="oracle", **where)
    assert list(drift.values()) == [1.0]  # 1 - 1 on the same videos: zero width too
    assert not _samples(metrics, "lastmile_interval_zero_width", quantity="lastmile_fake_recall")
    page = read(render(build(metrics.registry, {}, Alerts(None))))
    marked = {k for k, v in by_series(page, "auc").items() if v.get("marked")}
    assert marked == {("oracle", "1", "original"), ("oracle", "1", "full")}
    assert {k for k, v in by_series(page, "auc-drift").items() if v.get("marked")} == {("oracle", "1", "full")}


def test_names_from_the_score_topic_are_escaped():
    hostile = '<script>alert("x")</script>'
    rows = [event(f"h{i}", cond, float(i % 3), NOW - i, det=hostile) for i in range(6) for cond in ("original", "full")]
    html = render(build(_metrics(extra=rows).registry, {"window": "time"}, Alerts(None)))
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    assert "<script>alert" not in html


def test_while_the_windows_are_rebuilt_the_page_says_so_and_shows_no_number():
    html = render(build(_metrics(ready=False).registry, {}, Alerts(None)))
    assert "Rebuilding the windows" in html
    assert not read(html).cells


def test_an_unknown_window_or_population_falls_back_to_the_first():
    metrics = _metrics()
    page = build(metrics.registry, {"window": "year", "population": "<b>"}, Alerts(None))
    assert (page.window, page.population) == ("time", "labelled")
    canary = build(metrics.registry, {"population": "canary"}, Alerts(None))
    assert all(not p.rows for p in canary.panels)  # no canary in this stream: no labelled row on canaries
    assert all(p.signals for p in canary.panels)  # the label-free signals stay


PROMETHEUS_ALERTS = {
    "status": "success",
    "data": {
        "alerts": [
            {"labels": {"alertname": "Watchdog"}, "state": "firing", "annotations": {}},
            {"labels": {"alertname": "LastmileAucDrift", "detector": "npr", "condition": "full",
                        "severity": "warning"}, "state": "pending", "annotations": {"summary": "AUC fell"}},
            {"labels": {"alertname": "LastmileFakeRecallCollapse", "detector": "npr", "condition": "full"},
             "state": "firing", "annotations": {"summary": "FakeR collapsed"}},
            {"labels": {"alertname": "LastmileNoData"}, "state": "inactive", "annotations": {}},
        ]
    },
}  # fmt: skip


def test_only_the_projects_firing_and_pending_alerts_are_kept_firing_first():
    alerts = parse(json.dumps(PROMETHEUS_ALERTS).encode())
    assert [(a.name, a.state) for a in alerts] == [
        ("LastmileFakeRecallCollapse", "firing"),
        ("LastmileAucDrift", "pending"),
    ]
    assert alerts[1].where == "condition=full, detector=npr"
    html = render(build(_metrics().registry, {}, Alerts("http://prom:9090", alerts, at=0.0)))
    assert read(html).alerts == ["LastmileFakeRecallCollapse", "LastmileAucDrift"]
    with pytest.raises(ValueError):
        parse(b'{"status": "error"}')


def test_a_prometheus_that_does_not_answer_is_said_and_asked_again_only_after_the_ttl():
    clock = Clock(100.0)
    source = AlertSource(f"http://127.0.0.1:{free_port()}", deadline_s=1.0, ttl_s=2.0, clock=clock)
    first = source.current()  # the first answer is waited for
    assert first.error and not first.alerts and first.at == 100.0
    assert source.current() is first  # within the ttl: the same answer, no second question
    clock.t += 2.0
    assert source.current(wait=True).at == 102.0  # past it: asked again
    html = render(build(_metrics().registry, {}, first))
    assert "No answer from http://127.0.0.1:" in html
    assert "No Prometheus configured" in render(build(_metrics().registry, {}, AlertSource(None).current()))


@pytest.mark.parametrize(
    "body",
    [b'{"status": "success", "data": null}', b'{"status": "success", "data": {"alerts": [1]}}',
     b'{"status": "success", "data": {"alerts": [{"labels": ["x"]}]}}', b"[" * 100_000 + b"]" * 100_000,
     b"<html>not json</html>", b'{"status": "error"}'],
)  # fmt: skip
def test_an_answer_of_any_other_shape_is_a_value_error_the_page_shows(body):
    with pytest.raises(ValueError):
        parse(body)


def _get(app, path: str, query: str = ""):
    got = {}

    def start_response(status, headers):
        got["status"], got["headers"] = status, dict(headers)

    body = app({"PATH_INFO": path, "QUERY_STRING": query, "REQUEST_METHOD": "GET"}, start_response)
    return None if body is None else (got["status"], got["headers"], b"".join(body))


def test_the_page_loads_its_own_script_and_style_only_and_the_endpoints_keep_their_paths():
    metrics = _metrics()
    pages = page_app(metrics.registry, AlertSource(None))
    status, headers, body = _get(pages, "/")
    assert status == "200 OK" and body.startswith(b"<!doctype html>")
    assert (
        "script-src 'self'" in headers["Content-Security-Policy"]
        and "default-src 'none'" in headers["Content-Security-Policy"]
    )
    assert (
        b'<script src="/static/page.js"' in body and b"<script>" not in body and b"://" not in body.split(b"<main")[0]
    )
    _, _, live = _get(pages, "/live", "window=count")
    assert b"<html" not in live and b'class="auc"' in live
    _, js_headers, js = _get(pages, "/static/page.js")
    assert js_headers["Content-Type"].startswith("text/javascript") and b'fetch("/live"' in js
    assert _get(pages, "/static/../config.py") is None and _get(pages, "/nothing") is None
    app = endpoints_app(metrics.registry, lambda: True, lambda: True, pages=pages)
    assert _get(app, "/metrics")[2].count(b"lastmile_auc{") == 8
    assert _get(app, "/healthz")[2] == b"ok"
    assert _get(app, "/nothing")[0] == "404 Not Found"
    assert _get(app, "/")[0] == "200 OK"


def test_an_empty_canary_side_is_waiting_and_names_the_command_that_fills_it():
    """`up --compare` filled the traffic comparison while the canary side stayed empty with only a pending alert;
    the page now says that side waits for canaries, and names the command `up` gave the monitor."""
    canary = ComparisonSettings(champion="npr", challenger="d3", population="canary")
    metrics = _metrics(comparisons=(PAIR, canary))
    command = "lastmile canary run --manifest examples/manifest.jsonl --config /s/lastmile-up/gateway.yaml"
    from gateway.monitor.alerts import Alert

    def pending(population: str) -> Alert:
        labels = {"alertname": "LastmileComparisonWithoutScores", "champion": "npr", "challenger": "d3",
                  "population": population, "role": "challenger"}  # fmt: skip
        return Alert("LastmileComparisonWithoutScores", "pending", labels, "no score events")

    alerts = Alerts("http://prometheus:9090", (pending("canary"), pending("traffic")))
    page = build(metrics.registry, {"population": "canary"}, alerts, command)
    # the canary side's pending alert is the waiting state the page shows; the traffic side's, which has rows, stays
    assert [a.labels["population"] for a in page.alerts.alerts] == ["traffic"]
    html = render(page)
    assert 'class="quiet empty waiting" data-population="canary">Waiting for canary: no video scored by both' in html
    assert html.count(f"<code>{command}</code>") >= 2  # (the comparison, and each detector's empty labelled table)
    assert 'data-population="traffic">' in html and "Waiting for traffic" not in html  # (traffic has its rows)
    assert "No labelled video in the time window on labelled canaries yet: canaries fill it" in html


def test_conditions_come_in_the_order_of_dissemination_and_each_detector_has_its_headline():
    metrics = _metrics()
    html = render(build(metrics.registry, {}, Alerts(None)))
    import re

    for det in ("npr", "d3"):
        rows = re.findall(rf'<tr data-detector="{det}" data-version="1" data-condition="([a-z]+)">', html)
        assert rows[:2] == ["original", "full"]  # (by name, full came before original's peers; original first)
        assert re.search(rf'<p class="headline[^"]*" data-detector="{det}" data-version="1"', html)
