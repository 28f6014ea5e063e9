"""``lastmile replay --via kafka``: the manifest goes through a real broker and a real gateway, and the score
events come back as the same results file the in-process replay writes (rows sorted, timings aside)."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from detectors.manifest import read_manifest
from detectors.repository import get_detectors
from gateway import bus
from gateway.batch.replay import ReplayConfig, prepare_run
from gateway.batch.results import merge, schema
from gateway.client.send import SendError, manifest_item
from gateway.core.config import GatewayConfig, KafkaSettings, PipelineSettings
from gateway.core.messages import ScoreEvent, ScoreRow, VideoEvent, idempotency_key, series_version
from gateway.toolkit import tansu

COLLECT_POLL_MS = 500
MAX_GROUPS = 3  # a gateway that holds no partition is started again in a fresh group, at most this many in all

log = logging.getLogger("lastmile.replay")


class Tap(Protocol):
    """What the replay needs of a gateway: run until its stop event is set, say whether it is ready and why not, the
    partitions its consumer holds, and its progress (:attr:`progress.unassigned`: holding none while videos wait)."""

    stop_event: threading.Event
    progress: Any
    consumer: bus.Consumer

    def run(self) -> None: ...

    def is_ready(self) -> bool: ...

    def not_ready_reason(self) -> str: ...


TapFactory = Callable[[GatewayConfig], Tap]


class ReplayTimeout(RuntimeError):
    """Not every expected score event arrived in time."""


class ReplayStuck(ReplayTimeout):
    """The replay's gateway held no partition of its input, in every group it was started in."""


def gateway_config(cfg: ReplayConfig, bootstrap: str, run_id: str, workers: int) -> GatewayConfig:
    kafka = KafkaSettings(
        bootstrap=bootstrap,
        input_topic=f"lastmile.replay.{run_id}.videos",
        output_topic=f"lastmile.replay.{run_id}.scores",
        group_id=f"lastmile-replay-{run_id}",
        max_poll_interval_ms=5_000,
        session_timeout_ms=5_000,
        heartbeat_interval_ms=500,
        probe_timeout_ms=2_000,  # the poll loop's questions wait this long at most: half the poll interval
        idle_member_after_s=20.0,  # the only member: holding no partition while videos wait is never right
        joining_member_after_s=60.0,  # a fresh group's gateway once held nothing for 20 s in CI: a slow join?
    )
    pipeline = {name: getattr(cfg, name) for name in PipelineSettings.model_fields}  # every field, none forgotten
    return GatewayConfig(
        **pipeline,
        kafka=kafka,
        sources=cfg.fetch_rules().sources,
        workers=workers,
        max_in_flight=2 * workers,
        http_port=0,
    )


def expected_keys(cfg: ReplayConfig, video_ids: list[str]) -> set[str]:
    conditions, _ = cfg.resolve_conditions()
    cards = [i.card for i in get_detectors(cfg.detectors, cfg.repo)]
    return {
        idempotency_key(v, c.name, d.name, series_version(d.version, d.threshold.id))
        for v in video_ids
        for c in conditions
        for d in cards
    }


def replay_via_kafka(
    cfg: ReplayConfig,
    run_dir: Path,
    bootstrap: str | None = None,
    workers: int = 2,
    timeout_s: float = 1800.0,
    stats: dict | None = None,
    sequential: bool = False,
    run_id: str | None = None,
    *,
    tap: TapFactory,
) -> Path:
    """Produce every manifest row to a fresh input topic, run a gateway (``tap``, in this process) on it, and write
    the collected score events as ``run_dir/results.parquet``. Starts a local broker unless ``bootstrap`` is given.
    The topics and groups are named for ``run_id`` (a fresh one by default). The tap is given by the caller (the
    command line gives :class:`gateway.stream.service.Gateway`): the replay and the tap are siblings, neither
    imports the other."""
    rows = read_manifest(cfg.manifest)
    via = f"the Kafka cluster at {bootstrap}" if bootstrap else "a local Tansu broker"
    prepare_run(cfg, run_dir, resume=False, rows=rows, route=f"through Kafka ({via}) and a gateway in this process")
    if bootstrap:
        bus.ping(KafkaSettings(bootstrap=bootstrap))  # no broker there: one line naming it, before any work
    broker = None if bootstrap else tansu.start_broker(die_with_parent=True)  # (a killed replay leaves no broker)
    gw_cfg = gateway_config(cfg, bootstrap or broker.bootstrap, run_id or uuid.uuid4().hex[:10], workers)
    try:
        bus.ensure_topics(gw_cfg.kafka, partitions=max(2, workers))
        run = ReplayGateway(gw_cfg, tap)
        try:
            events, sent, received = _produce_and_collect(gw_cfg.kafka, cfg, rows, timeout_s, sequential, run)
        except ReplayStuck:
            raise
        except ReplayTimeout as exc:  # say where it stopped: the gateway's state when the wait ended
            raise ReplayTimeout(f"{exc}; the gateway then: {run.state()}") from exc
        finally:
            run.stop()
    finally:
        if broker:
            broker.stop()
    if stats is not None:
        stats.update(sent=sent, received=received, groups=run.groups, restarts=run.restarts)
    delivery = {"idempotency_key", "event_time"}  # when this replay sent a video is not part of its results
    table = pa.Table.from_pylist(
        [ScoreRow.model_validate(e.model_dump(exclude=delivery)).model_dump() for e in events.values()],
        schema=schema(),
    )
    parts = run_dir / "parts"
    pq.write_table(table, parts / f"part-0000000-{len(rows) - 1:07d}.parquet")
    return merge(run_dir)


class ReplayGateway:
    """The replay's gateway, in this process, the only member of its group. One that holds no partition while the
    videos wait (:class:`~gateway.stream.membership.Unassigned`: seen once on Tansu, for the 300 s of a test) is
    stopped and started again in a fresh group (``<group>-1``, ...), at most ``MAX_GROUPS`` in all. A fresh group
    reads the topic from its start: the collector keeps one event per key (:func:`keep`).
    A gateway whose run ends by itself (an error) ends the replay with that error, not with the timeout."""

    def __init__(self, cfg: GatewayConfig, tap: TapFactory) -> None:
        self.cfg, self.tap, self.groups = cfg, tap, 0
        self.restarts: list[str] = []  # why each fresh group was needed
        self._start()

    def _start(self) -> None:
        k = self.cfg.kafka
        group = k.group_id if self.groups == 0 else f"{k.group_id}-{self.groups}"
        self.gateway = self.tap(self.cfg.model_copy(update={"kafka": k.model_copy(update={"group_id": group})}))
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True, name="lastmile-replay-gateway")
        self.thread.start()
        self.groups += 1

    def _run(self) -> None:
        try:
            self.gateway.run()
        except BaseException as exc:  # (the thread's end: kept for check(), which raises it where the replay waits)
            self.error = exc

    def check(self) -> None:
        """While collecting: the gateway's own error if its run ended; start it again in a fresh group if it holds
        no partition while videos wait; :class:`ReplayStuck` once it did so in ``MAX_GROUPS`` groups."""
        if not self.thread.is_alive() and not self.gateway.stop_event.is_set():
            if self.error is not None:
                raise self.error
            raise ReplayTimeout("the replay's gateway stopped before every score event came")
        stuck = self.gateway.progress.unassigned
        if stuck is None:
            return
        if self.groups >= MAX_GROUPS:
            before = "".join(f"; before that, it {r}" for r in self.restarts)
            raise ReplayStuck(f"the replay's gateway, started in {self.groups} groups in turn, {stuck}{before}")
        log.warning("replay: the gateway %s; starting it again in a fresh group", stuck)
        self.restarts.append(str(stuck))
        self.stop()
        self._start()

    def stop(self) -> None:
        self.gateway.stop_event.set()
        self.thread.join(120)

    def state(self) -> str:
        """The gateway's readiness, its thread and its partitions, in words."""
        gateway = self.gateway
        ready = "ready" if gateway.is_ready() else f"not ready ({gateway.not_ready_reason()})"
        try:
            assigned = sorted(f"{p.topic}/{p.partition}" for p in gateway.consumer.assignment())
        except (AttributeError, bus.BusError) as exc:  # no consumer yet, or a client that cannot say
            assigned = [f"unknown: {exc}"]
        alive = "running" if self.thread.is_alive() else "stopped"
        return f"{ready}, its thread {alive}, assigned {', '.join(assigned) or 'no partition'}"


def _produce_and_collect(
    k: KafkaSettings, cfg: ReplayConfig, rows: list, timeout_s: float, sequential: bool, run: ReplayGateway
) -> tuple:
    """Send the rows (all at once, or one at a time waiting for each) and collect their score events."""
    consumer = bus.consumer(k.model_copy(update={"group_id": f"{k.group_id}-collector"}))  # the replay's fast group
    consumer.subscribe([k.output_topic])
    producer = bus.producer(k)
    events: dict[str, ScoreEvent] = {}
    sent: dict[str, float] = {}
    received: dict[str, float] = {}
    deadline = time.monotonic() + timeout_s
    try:
        for batch in [[r] for r in rows] if sequential else [rows]:
            for r in batch:
                event = VideoEvent(  # the row's URL as it is, its path as a file:// URI (as `lastmile send`)
                    video_id=r.video_id,
                    uri=_uri(cfg.manifest, r),
                    label=r.label,
                    source=r.source,
                    anchor_id=r.anchor_id,
                    sha256=r.sha256,
                )
                producer.send(k.input_topic, event.model_dump_json(exclude_none=True).encode(), key=r.video_id.encode())
                sent[r.video_id] = time.monotonic()
            producer.flush()
            want = expected_keys(cfg, [r.video_id for r in batch])
            _collect(consumer, events, received, want, deadline, timeout_s, run.check, cfg.deterministic)
    finally:
        producer.close()
        consumer.close()
    want = expected_keys(cfg, [r.video_id for r in rows])
    return {key: events[key] for key in want}, sent, received


def _uri(manifest: Path, row) -> str:
    """The row's URI as `lastmile send` would send it; one it would refuse goes as written, for the gateway to
    refuse as the in-process replay does (that video's error rows), not to end the replay halfway."""
    try:
        return manifest_item(manifest, row).uri
    except SendError:
        return row.uri


def _collect(
    consumer: bus.Consumer,
    events: dict,
    received: dict,
    want: set[str],
    deadline: float,
    timeout_s: float,
    check: Callable[[], None],
    deterministic: bool,
) -> None:
    while want - events.keys():
        check()
        if time.monotonic() > deadline:
            missing = len(want - events.keys())
            mine = len(consumer.assignment())  # 0: the collector never joined its group
            raise ReplayTimeout(
                f"{missing} of {len(want)} score events missing after {timeout_s} s (collector on "
                f"{mine} partitions, {len(events)} events read)"
            )
        for m in consumer.poll(COLLECT_POLL_MS):
            ev = ScoreEvent.model_validate_json(m.value or b"")  # the gateway's own topic: anything else is a bug
            keep(events, ev, deterministic)
            received[ev.video_id] = time.monotonic()  # the latest event of each video so far


def keep(events: dict[str, ScoreEvent], ev: ScoreEvent, deterministic: bool) -> None:
    """Keep the first event of each key, unless it is an error and the repeat (a redelivery, a fresh group's
    second reading) a score. Two scores that differ are a bug of a deterministic run (an error); without
    determinism they may, and the first stays."""
    old = events.setdefault(ev.idempotency_key, ev)
    if old is ev or ev.error is not None:
        return
    if old.error is not None:
        events[ev.idempotency_key] = ev
    elif old.score != ev.score:
        if deterministic:
            raise RuntimeError(f"two different scores for {ev.idempotency_key}: {old.score} vs {ev.score}")
        log.info("replay: a repeat of %s scored %s (kept the first, %s)", ev.idempotency_key, ev.score, old.score)
