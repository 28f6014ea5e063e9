"""``lastmile monitor run``: reads the score topic of every gateway replica and the labels topic, and serves
the windowed metrics (:mod:`gateway.monitor.signals`) on /metrics, and draws them on a live page at /
(:mod:`gateway.monitor.page`).

It commits no offsets: on a start it assigns itself every partition of both topics and seeks to the first
message of its longest window (by timestamp; a broker that answers with an earlier offset only costs reading
more, since the windows filter by event time), or, when a checkpoint (:mod:`gateway.monitor.checkpoint`) was
loaded, to the positions it covers where those are later; then it rebuilds its windows. Until it has read to the
end of both topics once and one computation of the windowed series is served, /readyz says 503 and the
windowed families are withheld. So a killed monitor comes back with the same values, and two monitors on the
same topics export the same values.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
import time
from collections.abc import Callable, Iterable

from gateway import bus
from gateway.core.messages import LabelEvent
from gateway.monitor import allocator
from gateway.monitor.alerts import AlertSource
from gateway.monitor.checkpoint import Checkpointer
from gateway.monitor.config import MonitorConfig
from gateway.monitor.decode import by_model, fast_fields, score_fields
from gateway.monitor.exporter import MonitorMetrics
from gateway.monitor.page_app import page_app
from gateway.monitor.store import Store
from gateway.toolkit.health import Health
from gateway.toolkit.http import Endpoints

log = logging.getLogger("lastmile.monitor")
POLL_MS = 200
# share of max_videos held past the bound between evictions (a frame evicts first)
EVICTION_SLACK = 1 / 128


class Monitor:
    def __init__(self, cfg: MonitorConfig, clock: Callable[[], float] = time.time) -> None:
        # before its threads start (gateway.monitor.allocator)
        allocator.one_arena()
        self.cfg, self.clock = cfg, clock
        self.store = Store(cfg.windows, clock, lambda: self._watermark)
        self.caught_up = threading.Event()
        self.stop_event = threading.Event()
        self.metrics = MonitorMetrics(
            self.store, cfg.windows, clock, self.caught_up.is_set, comparisons=cfg.comparisons
        )
        self.health = Health(self.metrics.runtime_up, components=("broker",))
        self.heartbeat = time.monotonic()
        self.http: Endpoints | None = None
        self.consumer: bus.Consumer | None = None
        # at the start: read to these once, the windows are rebuilt
        self._ends: dict[bus.Partition, int] = {}
        # when asked, the ends then
        self._latest_ends: tuple[float, dict[bus.Partition, int]] = (0.0, {})
        # per score partition, the latest Kafka timestamp read
        self._seen: dict[bus.Partition, float] = {}
        self._watermark = float("-inf")
        self.checkpoints = Checkpointer(cfg, self.store, clock)
        # from a checkpoint: where its tail starts
        self._resume: dict[bus.Partition, int] = {}

    # -- lifecycle -------------------------------------------------------------------------------------------
    def run(self) -> None:
        self.start_http()
        self.metrics.windows.start(self.stop_event, self.caught_up.is_set)
        if (cp := self.checkpoints.load()) is not None:
            self._resume = {bus.Partition(*tp): offset for tp, offset in cp.positions.items()}
            self._seen = {bus.Partition(*tp): t for tp, t in cp.seen.items()}
            self._watermark = cp.watermark
        # the store holds what it restored; the checkpoint's own columns and ids (about 60 MB at a million videos, Arrow
        # buffers included) must not stay referenced for the whole run
        del cp
        try:
            # no broker at the bootstrap: one line naming it, within seconds
            bus.ping(self.cfg.kafka)
            # a topic admitting records over ours is refused in one line; the fetch is sized to the topics' limit
            self.consumer = bus.reader(bus.check_record_limits(self.cfg.kafka, list(self._topics())))
            # what the process holds now (modules, schemas, the client) is left out of every collection until the
            # monitor stops: a full one no longer walks it (it cost the ingest a fifth of its time)
            gc.freeze()
            while not self.stop_event.is_set() and not self._assign():
                self.stop_event.wait(self.health.down("broker", "topics not found or broker not answering"))
            self._loop()
        finally:
            gc.unfreeze()
            # however the run ended: the computing thread stops too
            self.stop_event.set()
            # its thread sees stop_event now
            self.metrics.windows.kick.set()
            if self.consumer is not None:
                with contextlib.suppress(bus.BusError):
                    self.consumer.close()
            if self.http:
                self.http.close()
            log.info("monitor stopped")

    def _topics(self) -> dict[str, float]:
        """Each topic read, with how far back (seconds) a start reads it."""
        k, w = self.cfg.kafka, self.cfg.windows
        return {k.output_topic: w.lookback_s, **({k.labels_topic: w.label_lookback_s} if k.labels_topic else {})}

    def _assign(self) -> bool:
        """Assign every partition of the topics and seek to the start of the longest window; False if the
        broker does not answer or a topic does not exist yet."""
        try:
            starts = {}
            for topic, lookback in self._topics().items():
                parts = self.consumer.partitions(topic)
                if not parts:
                    return False
                for p in parts:
                    starts[bus.Partition(topic, p)] = int((self.clock() - lookback) * 1000)
            self.consumer.assign(starts)
            found = self.consumer.offsets_for_times(starts)
            asked = self.clock()
            self._ends = self.consumer.end_offsets(starts)
            self._latest_ends = (asked, dict(self._ends))
            for tp, hit in found.items():
                # none that recent: nothing of this partition is in a window
                start = self._ends[tp] if hit is None else hit
                # a checkpoint: only its tail
                self.consumer.seek(tp, max(start, self._resume.get(tp, start)))
        except bus.BusError as exc:
            log.warning("cannot assign the monitor's partitions: %s", exc)
            return False
        self.health.up("broker")
        log.info("monitor reading %s from the start of its windows", sorted(self._topics()))
        return True

    def _loop(self) -> None:
        last_probe = 0.0
        while not self.stop_event.is_set():
            self.heartbeat = time.monotonic()
            polled = self.consumer.poll_views(timeout_ms=POLL_MS, max_records=self.cfg.poll_max_records)
            self.take(polled.views, polled.passed_on)
            # it never goes back
            self._watermark = max(self._watermark, self.watermark())
            if self.store.held > self.cfg.windows.max_videos * (1 + EVICTION_SLACK):
                # each eviction is a pass over every video held: one per slack's worth
                self.store.expire()
            if not polled.views and not polled.passed_on and not self.caught_up.is_set() and self._at_end():
                self.caught_up.set()
                self.metrics.caught_up.set(1)
                # ready once this first computation is served
                self.metrics.windows.kick.set()
                log.info("windows rebuilt: %d videos held", self.store.held)
            if self.caught_up.is_set() and self.checkpoints.due():
                self.checkpoint()
            if time.monotonic() - last_probe > self.cfg.kafka.probe_interval_s:
                self._probe()
                self.store.expire()
                last_probe = time.monotonic()

    # -- messages --------------------------------------------------------------------------------------------
    def take(self, views: list[bus.MessageView], passed_on: Iterable[bus.UnreadableRecord] = ()) -> None:
        """A poll's records (:attr:`bus.Polled.views`), in order: each run of score events kept together
        (:meth:`Store.add_scores`), each label on its own; one with no score or label in it is counted and
        skipped, as is each record the bus could not read (:attr:`bus.Polled.passed_on`)."""
        for record in passed_on:
            self.metrics.invalid.labels(record.topic).inc()
        scores: list[bus.MessageView] = []
        output = self.cfg.kafka.output_topic
        for msg in views:
            if msg.topic() == output:
                scores.append(msg)
            else:
                self._scores(scores)
                scores = []
                self.handle(msg.topic(), msg.value(), bus.timestamp_ms(msg.timestamp()))
        self._scores(scores)

    def _scores(self, records: list[bus.MessageView]) -> None:
        """Score events: the latest Kafka timestamp of each partition noted, the readable ones kept (by their
        fields: :mod:`gateway.monitor.decode`), the others counted. One loop, no call per event it can spare."""
        latest: dict[int, int] = {}
        events, invalid, clock = [], 0, self.clock
        for msg in records:
            # bus.timestamp_ms's rule, inline: once per score event
            kind, stamp = msg.timestamp()
            if not kind or stamp < 0:
                # no timestamp
                record_time = clock()
            else:
                partition = msg.partition()
                if stamp > latest.get(partition, -1):
                    latest[partition] = stamp
                record_time = stamp / 1000
            value = msg.value()
            fields = fast_fields(value)
            if fields is None:
                try:
                    fields = by_model(value)
                except ValueError:
                    invalid += 1
                    continue
            events.append((fields, record_time))
        if events:
            self.store.add_scores(events)
        if invalid:
            self.metrics.invalid.labels(self.cfg.kafka.output_topic).inc(invalid)
        for partition, stamp in latest.items():
            tp = bus.Partition(self.cfg.kafka.output_topic, partition)
            self._seen[tp] = max(self._seen.get(tp, float("-inf")), stamp / 1000)

    def _record_time(self, timestamp_ms: int | None) -> float:
        return timestamp_ms / 1000 if timestamp_ms is not None and timestamp_ms >= 0 else self.clock()

    def handle(self, topic: str, value: bytes | None, timestamp_ms: int | None) -> None:
        """One message of the score or labels topic; an unreadable one is counted and skipped, never fatal."""
        fallback = self._record_time(timestamp_ms)
        try:
            if topic == self.cfg.kafka.output_topic:
                self.store.add_scores([(score_fields(value), fallback)])
            else:
                event = LabelEvent.model_validate_json(value or b"")
                self.store.add_label(event.video_id, event.label, fallback)
        except ValueError:
            self.metrics.invalid.labels(topic).inc()

    def watermark(self) -> float:
        """A time before which no score event remains to be read: per score partition, the latest timestamp read,
        or, once read to the end the broker last reported, the time it was asked; the least of those, less
        ``timestamp_skew_s`` (timestamps on a partition are only nearly in order)."""
        asked, ends = self._latest_ends
        marks = []
        try:
            for tp, end in ends.items():
                if tp.topic == self.cfg.kafka.output_topic:
                    at_end = self.consumer.position(tp) >= end
                    marks.append(asked if at_end else self._seen.get(tp, float("-inf")))
        except bus.BusError:
            return self._watermark
        return min(marks, default=float("-inf")) - self.cfg.windows.timestamp_skew_s

    def checkpoint(self) -> None:
        """Start writing a checkpoint of what is held now, with the positions it covers (the reader's thread)."""
        try:
            positions = {tp: self.consumer.position(tp) for tp in self.consumer.assignment()}
        except bus.BusError:
            return
        self.checkpoints.save(positions, self._seen, self._watermark)

    def _at_end(self) -> bool:
        try:
            return all(self.consumer.position(tp) >= end for tp, end in self._ends.items())
        except bus.BusError:
            return False

    def _probe(self) -> None:
        """The topics' end offsets: the lag, and proof that the broker answers."""
        try:
            tps = list(self.consumer.assignment())
            asked = self.clock()
            ends = self.consumer.end_offsets(tps, timeout_ms=self.cfg.kafka.probe_timeout_ms)
            self._latest_ends = (asked, ends)
        except bus.BusError as exc:
            self.health.down("broker", f"no answer to an offsets request: {exc or type(exc).__name__}")
            return
        for topic in self._topics():
            lag = sum(max(0, e - self.consumer.position(tp)) for tp, e in ends.items() if tp.topic == topic)
            self.metrics.lag.labels(topic).set(lag)
        self.health.up("broker")

    # -- health ----------------------------------------------------------------------------------------------
    def healthy(self) -> bool:
        return time.monotonic() - self.heartbeat < 60

    def is_ready(self) -> bool:
        computed = self.metrics.windows.latest is not None or not self.metrics.windows.background
        return self.caught_up.is_set() and computed and self.health.ok and not self.stop_event.is_set()

    def start_http(self) -> int:
        cfg = self.cfg
        alerts = AlertSource(None if cfg.alerts_from is None else str(cfg.alerts_from))
        pages = page_app(self.metrics.registry, alerts, self.cfg.canary_command)
        self.http = Endpoints(
            cfg.http_host, cfg.http_port, self.metrics.registry, self.healthy, self.is_ready, pages=pages
        )
        self.port = self.http.port
        log.info("monitor page, metrics and health on :%d", self.port)
        return self.port
