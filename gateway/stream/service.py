"""``lastmile gateway run``: the streaming gateway on Kafka.

One thread polls; a bounded pool of worker processes runs the pipeline (decode, conditions, sampling,
inference); the same thread publishes each video's score events, waits for the broker's acknowledgement, and
only then marks the message's offset done. Offsets are committed per partition up to the first message not
yet done, so a crash redelivers (at-least-once) and never skips. Scores are deterministic, so a redelivered
video yields duplicates with equal scores that consumers drop by key. Bad input never stops the line: it is
published as error score events and dead-lettered with its reason and original bytes or reference.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import multiprocessing as mp
import queue
import signal
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field

from gateway.core import worker
from gateway.core.config import GatewayConfig
from gateway.core.messages import LabelEvent, ScoreRow, VideoEvent, VideoItem, parse_video_message
from gateway.core.worker import FetchRules, VideoRequest
from gateway.stream.http import Endpoints
from gateway.stream.live import LiveMetrics
from gateway.stream.offsets import OffsetTracker, rebalance_listener
from gateway.stream.publisher import Publisher

log = logging.getLogger("lastmile.gateway")


@dataclass
class Job:
    tp: object
    offset: int
    event: VideoEvent
    inline: bytes | None
    original: bytes
    headers: list
    conditions: list[str]
    started: float
    attempts: int = 0
    future: Future | None = field(default=None, repr=False)


def fanout(video_id: str, all_names: list[str], policy: str, rate: float) -> list[str]:
    """The conditions one video gets: all, ``original`` only, or all for a deterministic sample by id hash."""
    if policy == "all" or "original" not in all_names:
        return all_names
    if policy == "original_only":
        return ["original"]
    share = int.from_bytes(hashlib.sha256(video_id.encode()).digest()[:8], "big") / 2**64
    return all_names if share < rate else ["original"]


class Gateway:
    def __init__(self, cfg: GatewayConfig, metrics: LiveMetrics | None = None) -> None:
        self.cfg = cfg
        self.metrics = metrics or LiveMetrics(cfg.windows)
        self.stop_event = threading.Event()
        self.ready = threading.Event()
        self.heartbeat = time.monotonic()
        self.completed: queue.Queue[Job] = queue.Queue()
        self.tracker = OffsetTracker()
        self.retry_at: list[tuple[float, Job]] = []
        self.http: Endpoints | None = None

    # -- lifecycle -------------------------------------------------------------------------------------------
    def run(self) -> None:
        from kafka import KafkaConsumer

        from gateway.core.assembly import build_pipeline
        from gateway.stream import kafka_io

        k = self.cfg.kafka
        # validates conditions and detectors before consuming, and makes the rows of videos refused before the pool
        self.pipeline = build_pipeline(self.cfg)
        self.condition_names = [c.name for c in self.pipeline.conditions]
        self.producer = kafka_io.producer(k)
        self.publisher = Publisher(self.producer, k)
        topics = [k.input_topic] + ([k.labels_topic] if k.labels_topic else [])
        self.consumer = KafkaConsumer(
            **k.client_options(),
            group_id=k.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_interval_ms=k.max_poll_interval_ms,
            session_timeout_ms=k.session_timeout_ms,
            heartbeat_interval_ms=k.heartbeat_interval_ms,
            max_poll_records=k.max_poll_records,
            fetch_max_bytes=k.max_message_bytes + 1024 * 1024,
            max_partition_fetch_bytes=k.max_message_bytes + 1024 * 1024,
        )
        self.consumer.subscribe(topics, listener=rebalance_listener(self._commit, self.tracker))
        ctx = mp.get_context("spawn")
        rules = FetchRules(sources=self.cfg.sources, max_bytes=self.cfg.limits.max_bytes)
        self.pool = ProcessPoolExecutor(
            self.cfg.workers, mp_context=ctx, initializer=worker.init, initargs=worker.initargs(self.cfg, rules)
        )
        self.start_http()
        log.info("gateway consuming %s as group %s", topics, k.group_id)
        try:
            self._loop()
        finally:
            self._shutdown()

    def install_signal_handlers(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self.stop_event.set())

    def _loop(self) -> None:
        last_lag = 0.0
        while not self.stop_event.is_set():
            self.heartbeat = time.monotonic()
            records = self.consumer.poll(timeout_ms=100)
            self.ready.set()
            for tp, messages in records.items():
                for msg in messages:
                    self._accept(tp, msg)
            self._retry_due()
            self._drain()
            self._commit()
            self._backpressure()
            if time.monotonic() - last_lag > 5:
                self._update_lag()
                last_lag = time.monotonic()

    def _shutdown(self) -> None:
        """Stop polling, finish what is in flight, publish, commit, close."""
        log.info("gateway stopping: %d videos in flight", self.tracker.count)
        with contextlib.suppress(Exception):
            self.consumer.pause(*self.consumer.assignment())
        while self.tracker.count and not self.retry_at:
            self._drain(block=True)
            self._commit()
        self.pool.shutdown(wait=True, cancel_futures=True)
        self._commit()
        self.producer.flush()
        self.producer.close()
        self.consumer.close(autocommit=False)
        if self.http:
            self.http.close()
        log.info("gateway stopped")

    # -- messages --------------------------------------------------------------------------------------------
    def _accept(self, tp: object, msg: object) -> None:
        k = self.cfg.kafka
        if msg.topic == k.labels_topic:
            self.tracker.start(tp, msg.offset)  # committed like videos, so a restart does not re-read every label
            self._label(msg)
            self.tracker.done(tp, msg.offset)
            return
        self.tracker.start(tp, msg.offset)
        try:
            event, inline = parse_video_message(msg.value, msg.headers)
        except ValueError as exc:
            self.publisher.dead_letter(msg.value, msg.headers, "InvalidMessage", str(exc)[:500], None)
            self.metrics.videos.labels("dead_lettered").inc()
            self.tracker.done(tp, msg.offset)
            return
        if inline is not None and len(inline) > self.cfg.limits.max_bytes:  # before any heavy work
            from transforms.errors import LimitExceeded

            self._fail_fast(
                tp,
                msg,
                event,
                LimitExceeded(f"inline video is {len(inline)} bytes; the limit is {self.cfg.limits.max_bytes}"),
            )
            return
        names = fanout(event.video_id, self.condition_names, self.cfg.fanout.policy, self.cfg.fanout.sample_rate)
        job = Job(tp, msg.offset, event, inline, msg.value, list(msg.headers or []), names, time.monotonic())
        self._submit(job)

    def _submit(self, job: Job) -> None:
        job.attempts += 1
        request = VideoRequest(
            **job.event.model_dump(include={"video_id", "label", "source", "anchor_id", "tenant", "uri"}),
            inline=job.inline,
            conditions=tuple(job.conditions),
        )
        job.future = self.pool.submit(worker.run, [request])
        job.future.add_done_callback(lambda _f, j=job: self.completed.put(j))
        self.metrics.in_flight.set(self.tracker.count)

    def _fail_fast(self, tp: object, msg: object, event: VideoEvent, exc: Exception) -> None:
        """A video refused before the pool: error score events and a dead letter, like any failed video."""
        names = fanout(event.video_id, self.condition_names, self.cfg.fanout.policy, self.cfg.fanout.sample_rate)
        item = VideoItem(data=b"", **event.model_dump(include={"video_id", "label", "source", "anchor_id", "tenant"}))
        digest = hashlib.sha256(msg.value).hexdigest()
        rows = self.pipeline.error_rows(item, exc, self.pipeline.select(names), digest)
        job = Job(tp, msg.offset, event, None, msg.value, list(msg.headers or []), [], time.monotonic())
        self._publish(job, rows)

    def _drain(self, block: bool = False) -> None:
        while True:
            try:
                job = self.completed.get(timeout=0.5) if block else self.completed.get_nowait()
            except queue.Empty:
                return
            block = False
            try:
                rows = [ScoreRow.model_validate(r) for r in job.future.result()]
            except Exception as exc:  # a worker crashed (not a video error): retry, never a verdict
                log.warning("worker failed on %s: %s", job.event.video_id, exc)
                self._schedule_retry(job)
                continue
            if any(r.error_kind == "infra" for r in rows):
                self._schedule_retry(job)
                continue
            self._publish(job, rows)

    def _schedule_retry(self, job: Job) -> None:
        self.metrics.retries.inc()
        backoff = min(self.cfg.retry_backoff_s * 2 ** (job.attempts - 1), self.cfg.retry_backoff_max_s)
        self.retry_at.append((time.monotonic() + backoff, job))

    def _retry_due(self) -> None:
        now = time.monotonic()
        due = [j for t, j in self.retry_at if t <= now]
        self.retry_at = [(t, j) for t, j in self.retry_at if t > now]
        for job in due:
            self._submit(job)

    def _publish(self, job: Job, rows: list[ScoreRow]) -> None:
        """Score events (and a dead letter for a failed video), acknowledged by the broker, then done."""
        t0 = time.monotonic()
        cause = self.publisher.publish(rows, job.original, job.headers, job.event.video_id)
        self.metrics.observe_rows(rows, time.monotonic() - t0)
        for cond in {r.condition for r in rows if r.variant_s is not None}:
            self.metrics.observe_condition_seconds(cond, next(r.variant_s for r in rows if r.condition == cond))
        self.metrics.stage.labels("end_to_end").observe(time.monotonic() - job.started)
        self.metrics.videos.labels("scored" if cause is None else "dead_lettered").inc()
        if cause is not None:
            self.metrics.dead_letters.labels(cause.error_class or "VideoError").inc()
        self.tracker.done(job.tp, job.offset)
        self.metrics.in_flight.set(self.tracker.count)

    def _label(self, msg: object) -> None:
        try:
            event = LabelEvent.model_validate_json(msg.value)
        except ValueError:
            self.metrics.labels_joined.labels("invalid").inc()
            return
        self.metrics.observe_label(event.video_id, event.label)

    # -- offsets and flow ------------------------------------------------------------------------------------
    def _commit(self) -> None:
        from kafka.structs import OffsetAndMetadata

        offsets = self.tracker.committable()
        if not offsets:
            return
        try:
            self.consumer.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()})
            self.tracker.mark_committed(offsets)
        except Exception as exc:  # a rebalance took the partition: its next owner redelivers, scores are equal
            log.warning("commit failed (%s); uncommitted videos will be redelivered", exc)

    def _backpressure(self) -> None:
        assigned = [tp for tp in self.consumer.assignment() if tp.topic == self.cfg.kafka.input_topic]
        if self.tracker.count >= self.cfg.max_in_flight:
            self.consumer.pause(*assigned)
        elif self.consumer.paused():
            self.consumer.resume(*assigned)

    def _update_lag(self) -> None:
        try:
            assigned = [tp for tp in self.consumer.assignment() if tp.topic == self.cfg.kafka.input_topic]
            if not assigned:
                return
            ends = self.consumer.end_offsets(assigned)
            self.metrics.lag.set(sum(max(0, ends[tp] - self.consumer.position(tp)) for tp in assigned))
        except Exception:
            pass

    # -- health and metrics ----------------------------------------------------------------------------------
    def healthy(self) -> bool:
        """The poll loop ran within the last minute."""
        return time.monotonic() - self.heartbeat < 60

    def is_ready(self) -> bool:
        return self.ready.is_set() and not self.stop_event.is_set()

    def start_http(self) -> int:
        self.http = Endpoints(
            self.cfg.http_host, self.cfg.http_port, self.metrics.registry, self.healthy, self.is_ready
        )
        self.port = self.http.port
        log.info("metrics and health on :%d", self.port)
        return self.port
