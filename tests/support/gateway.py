"""Shared by `tests/test_gateway.py`, `tests/test_record_limits.py`."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

from gateway import bus
from gateway.core.config import GatewayConfig, KafkaSettings
from tests.support.streaming import (
    FAST_GROUP,
)

CONDITIONS = "original,spatial"


DETECTORS = "d3_px,spectral"


def _config(broker, tmp_path: Path, name: str, **extra) -> GatewayConfig:
    kafka = KafkaSettings(
        bootstrap=broker.bootstrap,
        input_topic=f"{name}.videos",
        output_topic=f"{name}.scores",
        group_id=f"{name}-gw",
        **FAST_GROUP,
    )
    settings = {
        "conditions": CONDITIONS,
        "detectors": DETECTORS,
        "profile": "throughput",
        "workers": 2,
        "http_port": 0,
        "sources": {"file_roots": [str(tmp_path.parent)]},  # this test session's folders, where the videos lie
        **extra,
    }
    cfg = GatewayConfig(kafka=kafka, **settings)
    bus.ensure_topics(cfg.kafka, partitions=2)
    return cfg


def _with_kafka(cfg: GatewayConfig, **kafka) -> GatewayConfig:
    return cfg.model_copy(update={"kafka": cfg.kafka.model_copy(update=kafka)})


def _readyz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _stop(gw, thread) -> None:
    gw.stop_event.set()
    thread.join(90)
    assert not thread.is_alive()
