"""A video in the gateway, from its message to its acknowledged score events: the job, its fan-out of conditions,
and the rows it ends with."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

from gateway.core.config import GatewayConfig
from gateway.core.messages import ScoreRow, VideoEvent, VideoFacts
from gateway.scoring.worker import VideoRequest
from gateway.stream.records import Refusal, Video
from transforms.support.config_errors import ConfigError


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
    rows: list[ScoreRow] | None = None  # computed, waiting for the broker to acknowledge them
    event_time: float | None = None  # the input message's Kafka timestamp, in seconds
    key: int = 0  # the job's key with the supervisor, the same on every run of it
    detectors: list[str] | None = (
        None  # None: every detector; else the shadow challengers it is not sampled for left out
    )

    @property
    def digest(self) -> str | None:
        """The video's sha256, for rows written without the worker: an inline video's; None for a video by
        reference, which only its worker reads (the message's own hash would pass for the video's)."""
        return None if self.inline is None else hashlib.sha256(self.inline).hexdigest()

    def request(self) -> VideoRequest:
        """The worker's request: the event's facts (its rows carry its event time and canary flag too)."""
        facts = VideoFacts.of(self.event, event_time=self.event_time)
        detectors = None if self.detectors is None else tuple(self.detectors)
        return VideoRequest(
            **facts,
            uri=self.event.uri,
            inline=self.inline,
            sha256=self.event.sha256,
            conditions=tuple(self.conditions),
            detectors=detectors,
        )


def admit(
    tp: object, offset: int, got: Video, cfg: GatewayConfig, conditions: list[str], detectors: list[str], key: int
) -> Job:
    """The job of a video record: which of ``conditions`` it gets (the fan-out) and which of ``detectors`` score
    it (shadow challengers only on their share of videos)."""
    video_id, shadow = got.event.video_id, cfg.shadow
    picked = fanout(video_id, conditions, cfg.fanout.policy, cfg.fanout.sample_rate)
    job = Job(tp, offset, got.event, got.inline, got.value, got.headers, picked, time.monotonic())
    job.event_time, job.key = got.event_time, key
    if shadow.detectors:
        job.detectors = scorers(video_id, detectors, shadow.detectors, shadow.share)
    return job


def check_shadow(shadow: list[str], share: float, detectors: list[str]) -> None:
    """Raise :class:`ConfigError` unless the shadow detectors are some, not all, of the gateway's ``detectors``
    (a video outside the share would have none, which the pipeline reads as every detector)."""
    if unknown := set(shadow) - set(detectors):
        raise ConfigError(f"shadow.detectors names detectors the gateway does not run: {sorted(unknown)}")
    if share < 1 and set(detectors) <= set(shadow):
        raise ConfigError(
            "shadow.detectors names every detector the gateway runs: a video outside shadow.share would be scored "
            "by none (leave the champion out of it)"
        )


def video_share(video_id: str) -> float:
    """A video's place in [0, 1), from the hash of its id: the same on every gateway and every delivery."""
    return int.from_bytes(hashlib.sha256(video_id.encode()).digest()[:8], "big") / 2**64


def fanout(video_id: str, all_names: list[str], policy: str, rate: float) -> list[str]:
    """The conditions one video gets: all, ``original`` only, or all for a deterministic sample by id hash."""
    if policy == "all" or "original" not in all_names:
        return all_names
    if policy == "original_only":
        return ["original"]
    return all_names if video_share(video_id) < rate else ["original"]


def scorers(video_id: str, all_names: list[str], shadow: list[str], share: float) -> list[str]:
    """The detectors one video is scored by: every one, but a shadow detector (a challenger) only on the videos
    whose :func:`video_share` is below ``share``. The same hash as :func:`fanout`: with ``share`` at least the
    fan-out's rate, every video that gets every condition is also scored by the challengers."""
    if video_share(video_id) < share:
        return all_names
    return [name for name in all_names if name not in shadow]


@dataclass
class Refused:
    """A record that is not a video, its dead letter waiting for the broker to acknowledge it."""

    tp: object
    offset: int
    refusal: Refusal


def _publishes(entry: Job | Refused) -> bool:
    return isinstance(entry, Refused) or entry.rows is not None


@dataclass
class Waiting:
    """Jobs waiting for a part to come back: to run again (the scorer) or to publish again (the broker), and
    refused records whose dead letter is to be published again."""

    entries: list[tuple[float, Job | Refused]] = field(default_factory=list)

    def hold(self, job: Job | Refused, delay_s: float) -> None:
        self.entries.append((time.monotonic() + delay_s, job))

    def due(self, broker_down: bool) -> list[Job | Refused]:
        """Jobs whose time has come; while the broker is down, only one of those waiting to publish (each try
        can wait up to the acknowledgement timeout, and one answer tells for all)."""
        now = time.monotonic()
        due = [j for t, j in self.entries if t <= now]
        if broker_down:
            due = [j for j in due if not _publishes(j)] + [j for j in due if _publishes(j)][:1]
        taken = {id(j) for j in due}
        self.entries = [(t, j) for t, j in self.entries if id(j) not in taken]
        return due

    @property
    def publishing(self) -> bool:
        return any(_publishes(j) for _, j in self.entries)

    def __len__(self) -> int:
        return len(self.entries)
