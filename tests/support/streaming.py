"""Helpers for tests against the real broker and gateway: read topics, scrape /metrics, probe endpoints."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from gateway import bus
from gateway.core.config import GatewayConfig
from gateway.toolkit import tansu
from tests.support.tools import IN_CI

FAST_GROUP = {
    "max_poll_interval_ms": 4000,
    "session_timeout_ms": 4000,
    "heartbeat_interval_ms": 500,
    "probe_timeout_ms": 2000,  # at most half the poll interval (the settings refuse more)
}


def require_broker() -> None:
    try:
        tansu.tansu_binary()
    except tansu.BrokerError as exc:
        if IN_CI:
            pytest.fail(f"the Tansu broker is required in CI: {exc}")
        pytest.skip(str(exc))


def read_topics(bootstrap: str, topics: list[str], until, timeout_s: float = 120) -> dict[str, list]:
    """Records of ``topics`` from the start (the bus's reader: every partition assigned, no group to join), until
    ``until(got)`` holds (fails after ``timeout_s``)."""
    from gateway.core.kafka_settings import KafkaSettings

    reader = bus.reader(KafkaSettings(bootstrap=bootstrap, client_id=f"reader-{time.monotonic_ns()}"))
    got: dict[str, list] = {t: [] for t in topics}
    deadline = time.monotonic() + timeout_s
    try:
        parts: list[bus.Partition] = []
        while len({p.topic for p in parts}) < len(topics):  # (a topic the gateway has not made yet: asked again)
            assert time.monotonic() < deadline, f"topics {topics} not found"
            parts = [bus.Partition(t, p) for t in topics for p in sorted(reader.partitions(t))]
        reader.assign(parts)
        reader.seek_to_beginning(*parts)
        while not until(got):
            assert time.monotonic() < deadline, {t: len(v) for t, v in got.items()}
            for record in reader.poll(300, max_records=10_000):
                got[record.topic].append(record)
    finally:
        reader.close()
    return got


def keys_seen(messages: list) -> set[str]:
    return {json.loads(m.value)["idempotency_key"] for m in messages}


def scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("lastmile_") and " " in line:
            name_labels, value = line.rsplit(" ", 1)
            out[name_labels] = float(value)
    return out


def metric(scraped: dict, name: str, **labels) -> float:
    want = [f'{k}="{v}"' for k, v in labels.items()]
    return sum(v for k, v in scraped.items() if k.split("{")[0] == name and all(w in k for w in want))


def status(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:  # not listening (yet, or any more)
        return 0


def gateway_process(cfg: GatewayConfig, folder: Path, name: str) -> tuple[subprocess.Popen, Path]:
    """`lastmile gateway run` in its own session (a SIGKILL of its group takes its workers too), its config in
    ``folder / name.yaml`` and its output in ``folder / name.log``."""
    config_file, log = folder / f"{name}.yaml", folder / f"{name}.log"
    config_file.write_text(yaml.safe_dump(json.loads(cfg.model_dump_json())))
    cmd = [sys.executable, "-m", "gateway.cli", "gateway", "run", "--config", str(config_file)]
    with log.open("wb") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True), log


def start_gateway(cfg: GatewayConfig):
    from gateway.stream.service import Gateway

    gw = Gateway(cfg)
    thread = threading.Thread(target=gw.run, daemon=True)
    thread.start()
    assert gw.ready.wait(120)
    return gw, thread


def start_monitor(cfg):
    """A monitor on a thread, once its windows are rebuilt (it has read both topics to their end)."""
    from gateway.monitor.service import Monitor

    mon = Monitor(cfg)
    thread = threading.Thread(target=mon.run, daemon=True)
    thread.start()
    assert mon.caught_up.wait(120)
    return mon, thread


def committed_offsets(settings, group: str, topic: str) -> dict[int, int]:
    """Per partition of ``topic``, the offset ``group`` committed (partitions it never committed are absent), asked
    with librdkafka's admin client whichever engine the settings name."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    from gateway.bus.librdkafka.config import admin_client

    client = admin_client(settings)
    meta = client.list_topics(topic, timeout=10).topics.get(topic)
    parts = [] if meta is None or meta.error is not None else sorted(meta.partitions)
    if not parts:
        return {}
    asked = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in parts])
    (future,) = client.list_consumer_group_offsets([asked], request_timeout=10).values()
    return {tp.partition: tp.offset for tp in future.result(timeout=10).topic_partitions if tp.offset >= 0}


def wait_for(check, timeout_s: float = 120, what: str = "condition"):
    """Poll ``check()`` until it returns a truthy value (returned), failing after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)  # the polling interval of a condition, not a synchronisation


def stop_process(pid: int, timeout_s: float = 10) -> None:
    """SIGSTOP ``pid`` and return once every thread of it is stopped. ``kill`` returns once the signal is sent; a
    thread running on another core stops only at its next entry to the kernel, and a request that reaches it
    meanwhile is still answered."""
    os.kill(pid, signal.SIGSTOP)

    def stopped() -> bool:
        states = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
            except (OSError, IndexError):
                continue  # (a thread that ended meanwhile)
        return bool(states) and all(s in ("T", "t") for s in states)

    wait_for(stopped, timeout_s, f"every thread of process {pid} to stop")
