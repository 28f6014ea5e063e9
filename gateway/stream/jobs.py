"""A video in the gateway, from its message to its acknowledged score events: the job, its fan-out of conditions,
and the rows it ends with."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

from gateway.core.messages import ScoreRow, VideoEvent
from gateway.core.worker import VideoRequest


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
    attempts: int = 0  # runs whose own worker died or overran: the retry cap counts only these
    rows: list[ScoreRow] | None = None  # computed, waiting for the broker to acknowledge them
    event_time: float | None = None  # the input message's Kafka timestamp, in seconds

    def stamp(self, rows: list[ScoreRow]) -> list[ScoreRow]:
        """The rows with what the monitor needs from the input message: its event time and canary flag."""
        return [r.model_copy(update={"event_time": self.event_time, "canary": self.event.canary}) for r in rows]

    def request(self) -> VideoRequest:
        return VideoRequest(
            **self.event.model_dump(include={"video_id", "label", "source", "anchor_id", "tenant", "uri"}),
            inline=self.inline,
            conditions=tuple(self.conditions),
        )


def fanout(video_id: str, all_names: list[str], policy: str, rate: float) -> list[str]:
    """The conditions one video gets: all, ``original`` only, or all for a deterministic sample by id hash."""
    if policy == "all" or "original" not in all_names:
        return all_names
    if policy == "original_only":
        return ["original"]
    share = int.from_bytes(hashlib.sha256(video_id.encode()).digest()[:8], "big") / 2**64
    return all_names if share < rate else ["original"]


@dataclass
class Waiting:
    """Jobs waiting for a part to come back: to run again (the scorer) or to publish again (the broker)."""

    entries: list[tuple[float, Job]] = field(default_factory=list)

    def add(self, job: Job, delay_s: float) -> None:
        self.entries.append((time.monotonic() + delay_s, job))

    def due(self, broker_down: bool) -> list[Job]:
        """Jobs whose time has come; while the broker is down, only one of those waiting to publish (each try
        can wait up to the acknowledgement timeout, and one answer tells for all)."""
        now = time.monotonic()
        due = [j for t, j in self.entries if t <= now]
        if broker_down:
            due = [j for j in due if j.rows is None] + [j for j in due if j.rows is not None][:1]
        taken = {id(j) for j in due}
        self.entries = [(t, j) for t, j in self.entries if id(j) not in taken]
        return due

    @property
    def publishing(self) -> bool:
        return any(j.rows is not None for _, j in self.entries)

    def __len__(self) -> int:
        return len(self.entries)
