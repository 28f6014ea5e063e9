"""The service's HTTP endpoints: prometheus_client's own exposition (OpenMetrics negotiation, name[] filtering,
gzip), the health probes, and the monitor's windowed-gauge collector the registry can check for name clashes."""

from __future__ import annotations

import gzip
import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, Gauge

from gateway.core.messages import ScoreRow
from gateway.monitor.config import WindowSettings
from gateway.monitor.exporter import MonitorMetrics
from gateway.monitor.store import Store
from gateway.stream.live import LiveMetrics
from gateway.toolkit.http import Endpoints


@pytest.fixture
def served():
    metrics = LiveMetrics()
    rows = [
        ScoreRow(
            video_id=f"v{i}",
            condition="original",
            detector="npr",
            detector_version="1",
            runtime="embedded",
            label="generated" if i % 2 else "real",
            score=float(i),
            decision=bool(i % 2),
            threshold=0.5,
        )
        for i in range(6)
    ]
    metrics.observe_rows(rows, 0.01)
    state = {"healthy": True, "ready": False}
    http = Endpoints("127.0.0.1", 0, metrics.registry, lambda: state["healthy"], lambda: state["ready"])
    yield f"http://127.0.0.1:{http.port}", state
    http.close()


def _get(url: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_metrics_negotiates_openmetrics_and_falls_back_to_the_text_format(served):
    base, _ = served
    status, headers, body = _get(f"{base}/metrics", {"Accept": "application/openmetrics-text; version=1.0.0"})
    assert status == 200 and headers["Content-Type"].startswith("application/openmetrics-text")
    assert body.decode().endswith("# EOF\n") and "lastmile_score_bucket{" in body.decode()
    status, headers, body = _get(f"{base}/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert "# EOF" not in body.decode() and "lastmile_predictions_total{" in body.decode()
    status, headers, body = _get(f"{base}/metrics", {"Accept-Encoding": "gzip"})
    assert headers.get("Content-Encoding") == "gzip" and b"lastmile_predictions_total" in gzip.decompress(body)


def test_metrics_honours_name_filters(served):
    base, _ = served
    _, _, body = _get(f"{base}/metrics?name[]=lastmile_predictions_total&name[]=lastmile_in_flight_videos")
    families = {line.split()[2] for line in body.decode().splitlines() if line.startswith("# TYPE")}
    assert families == {"lastmile_predictions_total", "lastmile_in_flight_videos"}


def test_probes_answer_as_the_service_says(served):
    base, state = served
    assert _get(f"{base}/healthz")[0] == 200 and _get(f"{base}/readyz")[:3:2] == (503, b"not ready")
    state.update(healthy=False, ready=True)
    assert _get(f"{base}/healthz")[::2] == (503, b"stalled") and _get(f"{base}/readyz")[0] == 200
    assert _get(f"{base}/nothing")[0] == 404


def test_windowed_gauges_are_described_so_a_name_clash_is_refused():
    registry = CollectorRegistry()
    Gauge("lastmile_auc", "somebody else's gauge", registry=registry)
    with pytest.raises(ValueError, match="lastmile_auc"):
        MonitorMetrics(Store(WindowSettings()), WindowSettings(), lambda: 0.0, lambda: True, registry=registry)
