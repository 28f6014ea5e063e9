"""``lastmile scores``: what comes out of the score topic and the dead-letter topic, per video.

Reads both topics from their beginning by assignment (no consumer group), de-duplicates score events by
``idempotency_key``, and either prints JSON lines (one per score event or dead letter) or a table: per video,
one line per condition with each detector's score and verdict. With ``follow`` it keeps reading until stopped;
without, it stops at the end of the topics.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from gateway import bus
from gateway.core.kafka_settings import KafkaSettings
from gateway.core.messages import ScoreEvent

ERROR_HEADERS = ("lastmile-error-class", "lastmile-error-message")
POLL_MS = 300


@dataclass
class Table:
    """Rows seen so far, per video and condition, in arrival order."""

    videos: dict[str, dict[str, dict[str, ScoreEvent]]] = field(default_factory=dict)
    dead: dict[str, tuple[str, str]] = field(default_factory=dict)  # source record -> (video, reason)

    def note_event(self, event: ScoreEvent) -> None:
        self.videos.setdefault(event.video_id, {}).setdefault(event.condition, {})[event.detector] = event

    def render(self, last: int = 20) -> str:
        lines = []
        for vid in list(self.videos)[-last:]:
            first = next(iter(next(iter(self.videos[vid].values())).values()))
            tags = " ".join(t for t in (first.label and f"label={first.label}", first.canary and "canary") if t)
            lines.append(f"{vid} {tags}".rstrip())
            for cond, by_det in self.videos[vid].items():
                cells = [_cell(e) for _, e in sorted(by_det.items())]
                lines.append(f"  {cond:<14}" + "   ".join(cells))
        lines += [f"{vid} DEAD-LETTERED {reason}" for vid, reason in list(self.dead.values())[-last:]]
        return "\n".join(lines)


ONE_WAY_SHARE = 0.9  # a detector whose verdicts go this far one way gets a warning line
ONE_WAY_MINIMUM = 10  # verdicts needed before it is said (a few videos may well all be real)


def one_way(table: Table, share: float = ONE_WAY_SHARE, minimum: int = ONE_WAY_MINIMUM) -> list[str]:
    """One line per detector whose verdicts so far (every condition, errors left out) go over ``share`` one way,
    with how many videos labelled the other way it called so: the first sign of a threshold that does not fit the
    videos (the shipped cards' were fitted on the proxy corpus), which the tap and the monitor act on as given."""
    counts: dict[str, Counter[tuple[bool, str | None]]] = {}  # detector -> (called generated, label) -> verdicts
    for by_cond in table.videos.values():
        for by_det in by_cond.values():
            for det, e in by_det.items():
                if e.error is None:
                    counts.setdefault(det, Counter())[(bool(e.decision), e.label)] += 1
    out = []
    for det, c in sorted(counts.items()):
        n = c.total()
        for called, way, other in ((True, "generated", "real"), (False, "real", "generated")):
            k = sum(v for (d, _), v in c.items() if d == called)
            if n >= minimum and k / n > share:
                wrong = c[(called, other)]
                labelled = f", {wrong} of them on videos labelled {other}" if wrong else ""
                out.append(
                    f"{det} called {k} of its {n} verdicts {way} ({k / n:.0%}{labelled}): its threshold may not fit "
                    "these videos; calibrate it on a labelled replay of your own (lastmile detectors calibrate RUN)"
                )
    return out


def row_line(record: dict) -> str:
    """One record (a score event's or dead letter's JSON, as :func:`follow` emits it) as one line of text."""
    if record.get("dead_letter"):
        return f"{record['video_id'] or record['source']} DEAD-LETTERED {record['error_class']}: {record['error']}"
    event = ScoreEvent.model_validate(record)
    return f"{event.video_id} {event.condition:<14} {_cell(event)}"


def _source(headers: dict[str, str]) -> str | None:
    """The input record a dead letter stands for, ``topic/partition@offset`` (the gateway's source headers)."""
    parts = [headers.get(f"lastmile-source-{h}") for h in ("topic", "partition", "offset")]
    return "{}/{}@{}".format(*parts) if all(parts) else None


def _cell(e: ScoreEvent) -> str:
    if e.error:
        return f"{e.detector} error ({e.error_class or e.error_kind})"
    return f"{e.detector} {e.score:+.3f} {'generated' if e.decision else 'real'}"


def follow(
    kafka: KafkaSettings,
    emit: Callable[[dict | None, Table], None],
    video_ids: set[str] | None = None,
    keep_following: bool = True,
    stop: threading.Event | None = None,
) -> Table:
    """Read the score and dead-letter topics; call ``emit(record, table)`` for each new record (a score event's
    or dead letter's JSON) and ``emit(None, table)`` after each batch."""
    stop = stop or threading.Event()
    bus.ping(kafka)  # a broker that does not answer: one line within seconds
    # a topic admitting records over ours is refused in one line; the fetch is sized to the topics' limit
    consumer = bus.reader(bus.check_record_limits(kafka, [kafka.output_topic, kafka.dlq]))
    table, seen = Table(), set()
    try:
        tps = [bus.Partition(t, p) for t in (kafka.output_topic, kafka.dlq) for p in sorted(consumer.partitions(t))]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        while not stop.is_set():
            records = consumer.poll(timeout_ms=POLL_MS)
            for msg in records:
                record = _record(msg, kafka, table, seen, video_ids)
                if record is not None:
                    emit(record, table)
            emit(None, table)
            if (
                not records
                and not keep_following
                and all(consumer.position(tp) >= end for tp, end in consumer.end_offsets(tps).items())
            ):
                break
    finally:
        consumer.close()
    return table


def _record(
    msg: bus.Record | bus.UnreadableRecord,
    kafka: KafkaSettings,
    table: Table,
    seen: set,
    video_ids: set[str] | None,
) -> dict | None:
    if not isinstance(msg, bus.Record):  # unreadable: not the gateway's
        return None
    vid = (msg.key or b"").decode(errors="replace")
    if msg.topic == kafka.dlq:
        headers = {k: (v or b"").decode(errors="replace") for k, v in msg.headers}  # a null value: empty
        vid = vid or headers.get("lastmile-video-id", "")  # a letter without a key: the record's own header
        if video_ids and vid not in video_ids:
            return None
        cls, reason = (headers.get(h, "") for h in ERROR_HEADERS)
        source = _source(headers) or f"{msg.topic}/{msg.partition}@{msg.offset}"
        table.dead[source] = (vid or source, f"{cls}: {reason}")  # one line per letter, keyed or not
        return {"dead_letter": True, "video_id": vid, "source": source, "error_class": cls, "error": reason}
    if video_ids and vid not in video_ids:
        return None
    try:
        event = ScoreEvent.model_validate_json(msg.value or b"")
    except ValueError:
        return None
    if event.idempotency_key in seen:
        return None
    seen.add(event.idempotency_key)
    table.note_event(event)
    return json.loads(event.model_dump_json())
