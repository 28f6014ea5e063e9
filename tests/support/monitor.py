"""Shared by `tests/test_monitor.py`, `tests/test_monitor_labels.py`, `tests/test_monitor_stream.py`,
`tests/test_monitor_page.py` and `tests/test_live_page.py`."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import yaml

from detectors.serving.processes import free_port, kill_group
from gateway import bus
from gateway.core.config import KafkaSettings
from gateway.core.messages import LabelEvent, ScoreEvent, idempotency_key
from gateway.monitor.config import MonitorConfig, MonitorKafka, WindowSettings
from gateway.monitor.signals import FAMILIES
from tests.support.streaming import (
    metric,
    scrape,
    status,
    wait_for,
)
from tests.support.tools import require_tool

ROOT = Path(__file__).resolve().parents[2]

NOW = 1_800_000_000.0


class Clock:
    def __init__(self, t: float = NOW) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def event(vid: str, cond: str, score: float, t: float, det: str = "npr", label=None, canary=False, thr=0.0):
    return ScoreEvent(
        video_id=vid,
        condition=cond,
        detector=det,
        detector_version="1",
        runtime="embedded",
        score=score,
        decision=score > thr,
        threshold=thr,
        label=label,
        event_time=t,
        canary=canary,
        idempotency_key=idempotency_key(vid, cond, det, "1"),
    )


def stream(rng, n=300, dets=("npr", "d3")):
    """Rows of n videos x 2 conditions x dets, with labels, in a random order, some redelivered."""
    truth, rows = {}, []
    for i in range(n):
        vid, y = f"v{i}", bool(rng.random() < 0.4)
        truth[vid] = "generated" if y else "real"
        t = NOW - 5 * n + i * 5
        for det in dets:
            base = rng.normal(1.0 if y else -0.5)
            rows.append(event(vid, "original", round(base, 2), t, det))
            rows.append(event(vid, "full", round(base * 0.4 + rng.normal(0, 0.8), 2), t, det))
    order = rng.permutation(len(rows))
    return truth, [rows[i] for i in order] + [rows[i] for i in order[:100]]  # 100 redeliveries


FAST = {"count": 100, "timestamp_skew_s": 1.0, "compute_interval_s": 0.2}  # a test's windows, computed often


def topics(broker, name: str, partitions: int = 2) -> MonitorKafka:
    k = MonitorKafka(
        bootstrap=broker.bootstrap,
        input_topic=f"{name}.videos",
        output_topic=f"{name}.scores",
        labels_topic=f"{name}.labels",
        probe_interval_s=0.5,
        probe_timeout_ms=1000,
        request_timeout_ms=3000,
    )
    bus.ensure_topics(k, partitions=partitions, extra=(k.labels_topic,))
    return k


def computed_after(port: int, t: float) -> dict:
    """A scrape whose windowed series were computed after ``t`` (the monitor's clock is this machine's)."""
    return wait_for(lambda: (s := scrape(port)) and metric(s, "lastmile_monitor_computed_timestamp_seconds") > t and s)


def windowed(scraped: dict) -> dict:
    return {k: v for k, v in scraped.items() if k.split("{")[0] in FAMILIES}


class MonitorProcess:
    """``lastmile monitor run`` in a process of its own (its own session, so a SIGKILL takes all of it)."""

    def __init__(self, cfg: MonitorConfig, tmp_path, log: Path | None = None) -> None:
        self.port, self.log = cfg.http_port, log
        config = tmp_path / "monitor.yaml"
        config.write_text(yaml.safe_dump(json.loads(cfg.model_dump_json())))
        self.cmd = [sys.executable, "-m", "gateway.cli", "monitor", "run", "--config", str(config)]
        self.proc: subprocess.Popen | None = None

    def start(self) -> MonitorProcess:
        err = self.log.open("a") if self.log else subprocess.DEVNULL
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        wait_for(lambda: status(self.port, "/readyz") == 200, what="the monitor to be ready")
        return self

    def settled(self, done: Callable[[dict], bool]) -> dict:
        return wait_for(lambda: (s := scrape(self.port)) and done(s) and s, timeout_s=90, what="the monitor to settle")

    def kill(self) -> None:
        kill_group(self.proc)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(30) == 0


FAST_WINDOWS = WindowSettings(compute_interval_s=0.2)  # the windowed series computed often


def _produce(k: KafkaSettings, topic: str, items: list[tuple[str, bytes]], partition=None) -> None:
    producer = bus.producer(k)
    for i, (key, value) in enumerate(items):
        p = None if partition is None else partition(i)
        producer.send(topic, key=key.encode(), value=value, partition=p)
    producer.flush()
    producer.close()


def _unique(messages) -> dict[str, ScoreEvent]:
    return {e.idempotency_key: e for e in (ScoreEvent.model_validate_json(m.value) for m in messages)}


@contextlib.contextmanager
def prometheus_scraping(tmp_path: Path, target_port: int) -> Iterator[int]:
    """A real Prometheus server scraping ``127.0.0.1:target_port`` every second with the shipped rules (their
    ``for:`` and ranges shortened); yields its port, stops it on exit."""
    prometheus = require_tool("prometheus")
    rules = tmp_path / "rules.yaml"
    _fast_rules(ROOT / "dashboards" / "prometheus" / "lastmile-rules.yaml", rules)
    prom_port = free_port()
    (tmp_path / "prometheus.yml").write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(rules)],
                "scrape_configs": [
                    {"job_name": "monitor", "static_configs": [{"targets": [f"127.0.0.1:{target_port}"]}]}
                ],
            }
        )
    )
    proc = subprocess.Popen(
        [
            prometheus,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield prom_port
    finally:
        proc.terminate()
        proc.wait(30)


def _prom(port: int, path: str) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return json.loads(r.read())


def _fast_rules(src: Path, dst: Path) -> None:
    """The shipped rules with only ``for:`` and the range windows shortened, so a test sees them fire."""
    text = re.sub(r"for: \d+[smh]", "for: 2s", src.read_text())
    text = re.sub(r"\[\d+[smh]\]", "[30s]", text)
    dst.write_text(text)


def synthetic(k: MonitorKafka, n: int, now: float, collapse: str | None = None, canary: bool = False) -> int:
    """n labelled videos x 2 detectors x 3 conditions of score events (and labels on their topic, some before
    and some after), 10% sent twice; ``collapse``: that detector calls every video real under ``full``."""
    rng = np.random.default_rng(0)
    scores, labels = [], []
    for i in range(n):
        vid, y = f"s{i}-{canary}", i % 2 == 1
        label = "generated" if y else "real"
        for det in ("npr", "d3"):
            base = rng.normal(1.5 if y else -1.5)
            for cond, shift in (("original", 0.0), ("spatial", -0.5), ("full", -1.0)):
                s = -5.0 if (det == collapse and cond == "full") else base + shift + rng.normal(0, 0.5)
                ev = event(vid, cond, s, now - 60 + i * 0.1, det, label if canary else None, canary)
                scores.append((vid, ev.model_dump_json().encode()))
        labels.append((vid, LabelEvent(video_id=vid, label=label).model_dump_json().encode()))
    _produce(k, k.output_topic, scores + scores[: len(scores) // 10])
    if not canary:
        _produce(k, k.labels_topic, labels)
    return len(scores)
