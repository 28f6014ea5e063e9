"""One owner of a video's fate: the same injected failures, through the replay and through the stream gateway
(real worker processes, real pipeline, real Tansu broker), end with the same fate class
(:mod:`gateway.scoring.supervisor`), and with the same error class in the replay's rows and the dead letter."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from gateway import bus
from gateway.batch.replay import ReplayConfig, replay
from gateway.batch.results import read_results
from gateway.core.config import GatewayConfig, KafkaSettings
from gateway.core.messages import VideoEvent
from gateway.scoring.supervisor import Final, RetryLater, Scored
from gateway.toolkit import tansu
from tests import fate_jobs
from tests.support.streaming import FAST_GROUP, read_topics, require_broker, wait_for

# video id -> (what is injected, the fate both drivers must give it; error class of a final one)
EXPECTED = {
    "ok-1": (Scored, None),
    "poison-1": (Final, "InvalidVideo"),  # bad bytes
    "killed-1": (Final, "WorkerCrashed"),  # SIGKILL of its worker, every attempt
    "raises-1": (Final, "JobError"),  # an unexpected exception in the worker, every attempt
    "down-1": (RetryLater, None),  # RuntimeUnavailable (first run only: the stream's retry then scores it)
    "slow-1": (Final, "VideoTimeout"),  # overruns the deadline, every attempt
}
SETTINGS = dict(
    conditions="original",
    detectors="d3_px",
    profile="throughput",
    limits={"video_timeout_s": 8.0, "max_attempts": 2},
)


class FirstFates(logging.Handler):
    """The first fate the supervisor logs for each video."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.first: dict[str, object] = {}

    def emit(self, record: logging.LogRecord) -> None:
        if hasattr(record, "fate"):
            self.first.setdefault(record.video_id, record.fate)


@pytest.fixture
def fates(monkeypatch, tmp_path):
    monkeypatch.setenv("LASTMILE_FATES_DIR", str(tmp_path))  # the workers inherit it
    handler, logger = FirstFates(), logging.getLogger("lastmile.supervisor")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.DEBUG)  # (setLevel, not the attribute: it clears the enabled-for cache)
    yield handler.first
    logger.setLevel(level)
    logger.removeHandler(handler)


@pytest.fixture(scope="module")
def videos(tmp_path_factory, media) -> Path:
    """The folder of the videos: one good clip, one of bad bytes."""
    root = tmp_path_factory.mktemp("fates")
    (root / "good.mp4").write_bytes(media["basic"])
    (root / "poison.mp4").write_bytes(b"\x00\x00\x00\x18ftypisom" + b"\x17" * 3000)
    return root


def _file(video_id: str) -> str:
    return "poison.mp4" if video_id.startswith("poison") else "good.mp4"


def _assert_fates(first: dict, error_classes: dict) -> None:
    assert {v: type(f) for v, f in first.items()} == {v: cls for v, (cls, _) in EXPECTED.items()}
    assert error_classes == {v: c for v, (_, c) in EXPECTED.items() if c is not None}


def test_replay(videos, fates, tmp_path):
    manifest = videos / "manifest.jsonl"
    rows = [{"video_id": v, "uri": _file(v), "label": "real", "source": "real", "anchor_id": v} for v in EXPECTED]
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = ReplayConfig(manifest=manifest, **SETTINGS)
    results = read_results(replay(cfg, tmp_path / "run", workers=2, progress=False, entry=fate_jobs.ENTRY))
    by_video = {r.video_id: r for r in results}
    assert by_video["ok-1"].score is not None and by_video["down-1"].error_kind == "infra"  # resume runs it again
    final = {v: r.error_class for v, r in by_video.items() if r.error_kind == "video"}
    _assert_fates(fates, final)


def test_stream(videos, fates):
    require_broker()
    with tansu.start_broker() as broker:
        kafka = KafkaSettings(
            bootstrap=broker.bootstrap,
            input_topic="fates.videos",
            output_topic="fates.scores",
            group_id="fates-gw",
            request_timeout_ms=5000,
            max_block_ms=3000,
            ack_timeout_s=5,
            **FAST_GROUP,
        )
        cfg = GatewayConfig(
            kafka=kafka,
            workers=2,
            max_in_flight=len(EXPECTED),
            http_host="127.0.0.1",
            http_port=0,
            retry_backoff_s=0.5,
            retry_backoff_max_s=2.0,
            sources={"file_roots": [str(videos)]},
            **SETTINGS,
        )
        bus.ensure_topics(cfg.kafka, partitions=1)
        letters, scores = _run_gateway(cfg, videos)
    dead = {m.key.decode(): dict(m.headers)["lastmile-error-class"].decode() for m in letters}
    assert {json.loads(m.value)["video_id"] for m in scores if json.loads(m.value)["score"] is not None} == {
        "ok-1",
        "down-1",  # scored once the scorer was back
    }
    _assert_fates(fates, dead)


def _run_gateway(cfg: GatewayConfig, videos: Path) -> tuple[list, list]:
    import threading

    from gateway.stream.service import Gateway

    gw = Gateway(cfg, entry=fate_jobs.ENTRY)
    thread = threading.Thread(target=gw.run, daemon=True)
    thread.start()
    try:
        assert gw.ready.wait(120)
        producer = bus.producer(cfg.kafka)
        for vid in EXPECTED:
            event = VideoEvent(video_id=vid, uri=(videos / _file(vid)).as_uri())
            producer.send(cfg.kafka.input_topic, key=vid.encode(), value=event.model_dump_json().encode())
        producer.flush()
        producer.close()
        k = cfg.kafka
        n_final = sum(cls is Final for cls, _ in EXPECTED.values())
        got = read_topics(k.bootstrap, [k.dlq, k.output_topic], lambda g: len(g[k.dlq]) >= n_final, timeout_s=180)
        wait_for(lambda: not gw.running and not gw.waiting, what="every video settled")
        got = read_topics(k.bootstrap, [k.dlq, k.output_topic], lambda g: len(g[k.output_topic]) >= len(EXPECTED))
    finally:
        gw.stop_event.set()
        thread.join(90)
    return got[k.dlq], got[k.output_topic]
