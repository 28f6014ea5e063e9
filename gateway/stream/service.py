"""``lastmile gateway run``: the streaming gateway on Kafka.

One thread polls and admits at most ``max_in_flight`` videos (it fetches only as many records as there are
free slots); a :class:`~gateway.scoring.pool.WorkerPool` runs the pipeline, one video per worker process, each
worker with a memory cap and a per-video deadline. The same thread publishes each video's score events (and
its dead letter if it failed), waits for the broker's acknowledgement, and only then marks the message's
offset done; offsets are committed per partition up to the first message not yet done, so a crash redelivers
(at-least-once) and never skips. Scores are deterministic, so a redelivery yields equal duplicates that
consumers drop by key.

Failures, by whose they are, as :mod:`gateway.scoring.supervisor` decides them (the replay gets the same fates): a
bad video is error rows and a dead letter; a video whose own worker died, overran or raised unexpectedly is run
again up to ``limits.max_attempts``, then dead-lettered (``WorkerCrashed``, ``VideoTimeout``, ``JobError``); an
unavailable scorer or broker is never a verdict: the gateway stops admitting, reports not ready, backs off and
retries until it answers (:mod:`gateway.toolkit.health`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from itertools import count

from gateway import bus
from gateway.core.config import GatewayConfig
from gateway.core.messages import ScoreRow
from gateway.scoring.assembly import build_pipeline
from gateway.scoring.supervisor import Fate, RetryLater, Scored, Supervisor
from gateway.scoring.worker import ENTRY, Entry, FetchRules
from gateway.stream import records
from gateway.stream.inputs import EventReader
from gateway.stream.jobs import Job, Refused, Waiting, admit, check_shadow
from gateway.stream.live import LiveMetrics
from gateway.stream.offsets import OffsetTracker, rebalance_listener
from gateway.stream.progress import Progress
from gateway.stream.publisher import Publisher, Source
from gateway.toolkit.health import Health
from gateway.toolkit.http import Endpoints
from transforms.errors import LimitExceeded
from transforms.support.backoff import Backoff

log = logging.getLogger("lastmile.gateway")


class Gateway:
    def __init__(self, cfg: GatewayConfig, metrics: LiveMetrics | None = None, entry: Entry = ENTRY) -> None:
        self.cfg, self.entry = cfg, entry  # entry: what the worker processes run
        self.metrics = metrics or LiveMetrics()
        self.health = Health(self.metrics.runtime_up, Backoff(cfg.retry_backoff_s, cfg.retry_backoff_max_s))
        self.stop_event = threading.Event()
        self.ready = threading.Event()  # set once the loop runs
        self.heartbeat = time.monotonic()
        self.tracker = OffsetTracker()
        self.running: dict[int, Job] = {}  # job key -> job, while the supervisor has it
        self.waiting = Waiting()
        self.reader = EventReader(cfg.input, cfg.messages)  # the project's video event, or the platform's, mapped
        self.http: Endpoints | None = None
        self.publisher: Publisher | None = None  # these three once started (_start)
        self.consumer: bus.Consumer | None = None
        self.supervisor: Supervisor | None = None
        self.progress = Progress(cfg.kafka, self.metrics)  # stalls and idle membership: readiness is progress
        self._ids = count()

    # -- lifecycle -------------------------------------------------------------------------------------------
    def run(self) -> None:
        """Check the configuration, serve health and metrics, start the parts, run the loop; whatever of it
        started is stopped, however the run ends (a port taken, a broker refusing, SIGTERM)."""
        self._configure()
        self.start_http()
        try:
            self._start()
            self._loop()
        finally:
            self._shutdown()

    def _configure(self) -> None:
        """The pipeline this gateway writes rows with, and the checks of its configuration: nothing started."""
        # no runtime here: the workers hold them; this one writes the rows of videos refused before the pool
        self.pipeline = build_pipeline(self.cfg, runtimes=False)
        self.condition_names = [c.name for c in self.pipeline.conditions]
        self.detector_names = [d.key for d in self.pipeline.detectors]
        check_shadow(self.cfg.shadow.detectors, self.cfg.shadow.share, self.detector_names)

    def _start(self) -> None:
        k, limits = self.cfg.kafka, self.cfg.limits
        self.metrics.observe_detectors(self.pipeline.detectors)
        bus.ping(k)  # no broker at the bootstrap: one line naming it, within seconds (not a silent retry loop)
        # a topic admitting records over ours is refused in one line; the fetch is sized to the topic's limit
        consumed = bus.check_record_limits(k, [k.input_topic])
        self.publisher = Publisher(bus.producer(k), k)
        self.consumer = bus.consumer(consumed)
        topics = [k.input_topic]  # labels are the monitor's (lastmile monitor run), not the gateway's
        self.consumer.subscribe(topics, listener=rebalance_listener(self.tracker))
        rules = FetchRules(sources=self.cfg.sources, max_bytes=limits.max_bytes)
        self.supervisor = Supervisor(self.cfg, rules, self.cfg.workers, self.pipeline, self.entry, self._attempt_failed)
        log.info("gateway consuming %s as group %s", topics, k.group_id)

    def _loop(self) -> None:
        last_probe = 0.0
        while not self.stop_event.is_set():
            self.heartbeat = time.monotonic()
            fetched = self._poll()
            self.ready.set()
            for msg in fetched:
                self._accept(msg.topic_partition, msg)
            self._due()
            self._collect(self.supervisor.poll(0.0 if fetched else 0.05))
            self._check_workers()
            self._commit()
            if time.monotonic() - last_probe > self.cfg.kafka.probe_interval_s:
                self._probe_broker()
                last_probe = time.monotonic()

    def _shutdown(self) -> None:
        """Stop admitting, finish what is in flight (bounded by ``shutdown_timeout_s``), publish, commit, close:
        each part that was started."""
        log.info("gateway stopping: %d videos in flight", self.tracker.count)
        if self.supervisor is not None:  # (started after the consumer)
            with contextlib.suppress(bus.BusError):
                self.consumer.pause(*self.consumer.assignment())
            deadline = time.monotonic() + self.cfg.shutdown_timeout_s
            while self.tracker.count and time.monotonic() < deadline and self.health.ok:
                self._due()
                self._collect(self.supervisor.poll(0.2))
                self._commit()
            self.supervisor.close()
        if self.consumer is not None:
            self._commit()
            with contextlib.suppress(bus.BusError):
                self.consumer.close(autocommit=False)
        if self.publisher is not None:
            with contextlib.suppress(bus.BusError):
                self.publisher.close()
        if self.http:
            self.http.close()
        log.info("gateway stopped (%d videos left uncommitted, redelivered on restart)", self.tracker.count)

    # -- admission -------------------------------------------------------------------------------------------
    def _poll(self) -> list[records.Fetched]:
        """Fetch at most as many records as there are free slots; admit nothing while a part is down."""
        free = self.cfg.max_in_flight - self.tracker.count
        inputs = {tp for tp in self.consumer.assignment() if tp.topic == self.cfg.kafka.input_topic}
        paused = inputs & set(self.consumer.paused())
        if free > 0 and self.health.ok:
            if paused:  # (pausing or resuming on every round would restart the fetches)
                self.consumer.resume(*paused)
        elif inputs - paused:
            self.consumer.pause(*(inputs - paused))
        fetched = self.consumer.poll(timeout_ms=100, max_records=max(free, 1))
        self.progress.observe(self.consumer)
        return fetched

    def _accept(self, tp: bus.Partition, msg: records.Fetched) -> None:
        """Every record gets an outcome, and its offset is done once that outcome is acknowledged
        (:mod:`gateway.stream.records`): a video is scored, anything else dead-lettered or skipped and counted."""
        self.tracker.start(tp, msg.offset)
        got = records.read(msg, self.cfg.kafka.max_message_bytes, self.cfg.messages, self.reader)
        if isinstance(got, records.Skip):
            log.info("skipping offset %s of %s: %s", msg.offset, tp, got.reason)
            self.metrics.videos.labels(got.outcome).inc()
            self.tracker.finish(tp, msg.offset)
            return
        if isinstance(got, records.Refusal):
            self._dead_letter_message(tp, msg.offset, got)
            return
        job = admit(tp, msg.offset, got, self.cfg, self.condition_names, self.detector_names, next(self._ids))
        if got.inline is not None and len(got.inline) > self.cfg.limits.max_bytes:  # before any heavy work
            limit = self.cfg.limits.max_bytes
            too_big = LimitExceeded(f"inline video is {len(got.inline)} bytes; the limit is {limit}")
            self._finish(job, self.supervisor.refuse(job.request(), too_big, job.digest).rows)
            return
        self._submit(job)

    def _submit(self, job: Job) -> None:
        self.running[job.key] = job
        self.supervisor.submit(job.key, job.request(), job.digest)
        self.metrics.in_flight.set(self.tracker.count)

    # -- outcomes --------------------------------------------------------------------------------------------
    def _collect(self, fates: list[tuple[int, Fate]]) -> None:
        for key, fate in fates:
            job = self.running.pop(key)
            if isinstance(fate, RetryLater):  # never a verdict: wait, then run it again
                self.metrics.retries.inc()
                self.waiting.hold(job, self.health.down(fate.down, fate.reason))
                continue
            if isinstance(fate, Scored):
                self.health.up("scorer")
                self.health.up("store")
            self._finish(job, fate.rows)

    def _attempt_failed(self, error: Exception, again: bool) -> None:
        """A failed attempt (the supervisor runs the video again, or makes it final)."""
        self.metrics.worker_failures.labels(type(error).__name__).inc()
        if again:
            self.metrics.retries.inc()

    def _due(self) -> None:
        """Run again, or publish again, what waited for the scorer or the broker."""
        for job in self.waiting.due(broker_down="broker" in self.health.down_since):
            if isinstance(job, Refused):
                self._dead_letter_message(job.tp, job.offset, job.refusal)
            elif job.rows is not None:
                self._finish(job, job.rows)
            else:
                self._submit(job)

    def _check_workers(self) -> None:
        """A pool whose workers cannot start (e.g. Triton down at start-up) makes the scorer down."""
        if self.supervisor.start_error is not None:
            self.health.down("scorer", self.supervisor.start_error)
        elif self.supervisor.started and "scorer" in self.health.down_since and not (self.waiting or self.running):
            self.health.up("scorer")

    # -- publishing ------------------------------------------------------------------------------------------
    def _finish(self, job: Job, rows: list[ScoreRow]) -> None:
        """Publish a video's rows; once the broker acknowledged them, its offset is done."""
        t0 = time.monotonic()
        try:
            source = Source(job.tp.topic, job.tp.partition, job.offset)
            cause = self.publisher.publish(rows, job.original, job.headers, job.event.video_id, source)
        except bus.BusError as exc:  # not acknowledged: keep the rows, retry later, commit nothing past it
            job.rows = rows
            self.waiting.hold(job, self.health.down("broker", str(exc) or type(exc).__name__))
            return
        self.health.up("broker")
        self.metrics.observe_rows(rows, time.monotonic() - t0)
        for cond in {r.condition for r in rows if r.variant_s is not None}:
            self.metrics.observe_condition_seconds(cond, next(r.variant_s for r in rows if r.condition == cond))
        self.metrics.stage.labels("end_to_end").observe(time.monotonic() - job.started)
        self.metrics.videos.labels("scored" if cause is None else "dead_lettered").inc()
        if cause is not None:
            self.metrics.dead_letters.labels(cause.error_class or "VideoError").inc()
        self.tracker.finish(job.tp, job.offset)
        self.metrics.in_flight.set(self.tracker.count)

    def _dead_letter_message(self, tp: bus.Partition, offset: int, refusal: records.Refusal) -> None:
        """A record that is no video: its dead letter (unacknowledged, it waits as rows do), then its offset done."""
        r, source = refusal, Source(tp.topic, tp.partition, offset)
        try:
            self.publisher.dead_letter(r.value, r.headers, r.error_class, r.reason, None, key=r.key, source=source)
        except bus.BusError as exc:  # not acknowledged: keep it, publish it again later, commit nothing past it
            self.waiting.hold(Refused(tp, offset, refusal), self.health.down("broker", str(exc) or type(exc).__name__))
            return
        self.health.up("broker")
        self.metrics.videos.labels("dead_lettered").inc()
        self.metrics.dead_letters.labels(r.error_class).inc()
        self.tracker.finish(tp, offset)

    # -- offsets ---------------------------------------------------------------------------------------------
    def _commit(self) -> None:
        offsets = self.tracker.committable()
        if not offsets:
            return
        try:
            self.consumer.commit(offsets)
            self.tracker.mark_committed(offsets)
        except bus.CommitFailed as exc:  # a rebalance took the partition: its next owner redelivers
            log.warning("commit failed (%s); uncommitted videos will be redelivered", exc)
        except bus.BusError as exc:
            self.health.down("broker", f"commit failed: {exc}")

    def _probe_broker(self) -> None:
        """Every few seconds, the input's end offsets: the consumer lag, and proof that the broker answers (so an
        idle gateway notices an outage too). Success clears a broker outage once nothing waits to be published.
        Also whether the input moves, without which the gateway is not ready (:mod:`gateway.stream.progress`)."""
        try:
            self.progress.check(self.consumer)
        except bus.BusError as exc:
            self.health.down("broker", f"no answer to an offsets request: {exc or type(exc).__name__}")
            return
        if not self.waiting.publishing:
            self.health.up("broker")

    # -- health and metrics ----------------------------------------------------------------------------------
    def healthy(self) -> bool:
        """The poll loop ran within the last minute."""
        return time.monotonic() - self.heartbeat < 60

    def is_ready(self) -> bool:
        return self.ready.is_set() and not self.stop_event.is_set() and self.health.ok and not self.progress.stuck

    def not_ready_reason(self) -> str:
        """What keeps it from being ready, for ``/readyz``'s body."""
        parts = [f"{c} unavailable: {r}" for c, r in self.health.reasons.items()] + self.progress.reasons()
        return "; ".join(parts) or ("stopping" if self.stop_event.is_set() else "starting")

    def start_http(self) -> int:
        cfg = self.cfg
        self.http = Endpoints(
            cfg.http_host, cfg.http_port, self.metrics.registry, self.healthy, self.is_ready, self.not_ready_reason
        )
        self.port = self.http.port
        log.info("metrics and health on :%d", self.port)
        return self.port
