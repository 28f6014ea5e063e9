"""The one owner of a video's fate: the worker pool, the attempts, and the rows written in the parent.

The replay and the stream gateway submit videos and read back one typed fate per video:

- :class:`Scored`: the worker's rows (some rows may carry this video's own errors for one condition).
- :class:`RetryLater`: a part was down (``down``: ``"scorer"``: a runtime raised :class:`RuntimeUnavailable`, or
  no worker could start; ``"store"``: the video's object store did not answer); never a verdict and never an
  attempt. The rows are ``infra`` rows: the replay writes
  them (``replay --resume`` runs the video again), the stream waits with its backoff and submits it again.
- :class:`Final`: every row is this video's error, kind ``video``; the stream dead-letters it. A bad video
  (undecodable bytes, a refused source, over a limit) is final at once; so is a video after
  ``limits.max_attempts`` failed attempts.

A failed attempt is the video's own worker dying (killed, over its memory cap), overrunning its deadline, or an
unexpected exception in the worker (a bug, an exhausted resource). The one policy, for both drivers: an
unexpected exception is an attempt like a dead worker, run again up to the cap, then final. Why not "infra,
retried without end": the pipeline already names every known outage (:class:`RuntimeUnavailable`) and every
known fault of an input (:class:`VideoError`), so what is left is either transient (a retry covers it) or a bug
this video triggers every time; retried without end it would stall the stream's partition (offsets are
committed only up to it) and come back on every ``replay --resume``. Final, it is counted, logged, kept in the
dead letter for a rerun after a fix, and the run goes on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from gateway.core.config import PipelineSettings
from gateway.core.messages import ScoreRow
from gateway.scoring.pipeline import Pipeline
from gateway.scoring.pool import Done, JobError, WorkerFailure
from gateway.scoring.worker import ENTRY, Answer, Entry, FetchRules, VideoRequest, error_rows, start_pool

log = logging.getLogger("lastmile.supervisor")


@dataclass(frozen=True)
class Scored:
    rows: list[ScoreRow]


@dataclass(frozen=True)
class RetryLater:
    down: str  # the part that is down: "scorer", or "store" (the object store a video lies in)
    reason: str
    rows: list[ScoreRow]  # infra rows, for a driver that records the video instead of waiting


@dataclass(frozen=True)
class Final:
    rows: list[ScoreRow]  # every row this video's error (kind "video")
    reason: str


Fate = Scored | RetryLater | Final
FailureHook = Callable[[Exception, bool], None]  # (the failed attempt's error, whether the video runs again)


@dataclass
class _Entry:
    request: VideoRequest
    digest: str | None = None  # the input's sha256, for rows written in the parent (None: not known there)
    attempts: int = 0


class Supervisor:
    """``size`` workers for ``settings``; ``pipeline`` (runtimes not needed) writes the rows of the parent."""

    def __init__(
        self,
        settings: PipelineSettings,
        rules: FetchRules,
        size: int,
        pipeline: Pipeline,
        entry: Entry = ENTRY,
        on_failure: FailureHook | None = None,
    ) -> None:
        self.pipeline, self.max_attempts = pipeline, settings.limits.max_attempts
        self.on_failure = on_failure or (lambda error, again: None)
        self.pool = start_pool(settings, rules, size, entry)
        self._entries: dict[Hashable, _Entry] = {}
        self._unstarted_since: float | None = None

    def submit(self, key: Hashable, request: VideoRequest, digest: str | None = None) -> None:
        """Run a video (again, after :class:`RetryLater`: its failed attempts still count)."""
        entry = self._entries.setdefault(key, _Entry(request, digest))
        self.pool.submit(key, entry.request)

    def poll(self, timeout_s: float) -> list[tuple[Hashable, Fate]]:
        """The fates decided within ``timeout_s``; a failed attempt under the cap is run again here."""
        fates = []
        for done in self.pool.poll(timeout_s):
            fate = self._fate(done)
            if fate is not None:
                fates.append((done.job_id, self._settle(done.job_id, fate)))
        self._unstarted_since = None if self.pool.any_ready else self._unstarted_since or time.monotonic()
        return fates

    def refuse(self, request: VideoRequest, error: Exception, digest: str | None = None) -> Final:
        """The fate of a video refused before any worker saw it (e.g. its inline bytes are over the limit)."""
        return Final(error_rows(self.pipeline, request, error, "video", digest), str(error))

    @property
    def started(self) -> bool:
        """Whether some worker has started."""
        return self.pool.any_ready

    @property
    def start_error(self) -> str | None:
        """Why no worker could start (the last line of its error), while none has."""
        error = self.pool.start_error
        return error.strip().splitlines()[-1] if error and not self.pool.any_ready else None

    def stalled(self, grace_s: float) -> list[tuple[Hashable, RetryLater]]:
        """When no worker could start for ``grace_s``: every video still queued, told to retry later."""
        since = self._unstarted_since
        if self.start_error is None or since is None or time.monotonic() - since <= grace_s:
            return []
        failure = RuntimeError(f"no worker could start: {self.start_error}")
        return [(key, self._retry_later(key, "scorer", failure)) for key in self.pool.cancel_queued()]

    def close(self) -> None:
        self.pool.close()

    # -- internals ------------------------------------------------------------------------------------------
    def _fate(self, done: Done) -> Fate | None:
        entry = self._entries[done.job_id]
        if done.error is None:
            answer: Answer = done.result
            if answer.fault is None:
                return _verdict(answer.rows)
            if answer.fault == "unavailable":
                return RetryLater(answer.down, answer.reason, answer.rows)
            error: Exception = JobError(answer.reason)
        else:
            error = done.error  # WorkerFailure: its worker died or overran; JobError: it raised out of the worker
        entry.attempts += 1
        again = entry.attempts < self.max_attempts
        self.on_failure(error, again)
        if again:
            self.pool.submit(done.job_id, entry.request)
            return None
        what = "worker failures" if isinstance(error, WorkerFailure) else "attempts"
        log.warning("final after %d %s: %s: %s", entry.attempts, what, entry.request.video_id, error)
        return Final(error_rows(self.pipeline, entry.request, error, "video", entry.digest), str(error))

    def _retry_later(self, key: Hashable, down: str, error: Exception) -> RetryLater:
        entry = self._entries[key]
        return self._settle(key, RetryLater(down, str(error), error_rows(self.pipeline, entry.request, error, "infra")))

    def _settle(self, key: Hashable, fate: Fate) -> Fate:
        """Log the fate; a video with a final fate is forgotten (one told to retry later keeps its attempts)."""
        entry = self._entries[key] if isinstance(fate, RetryLater) else self._entries.pop(key)
        level = logging.DEBUG if isinstance(fate, Scored) else logging.INFO
        vid = entry.request.video_id
        log.log(level, "%s: %s", vid, type(fate).__name__, extra={"fate": fate, "video_id": vid})
        return fate


def _verdict(rows: list[ScoreRow]) -> Scored | Final:
    """Final when every row is this video's own error (it failed under every condition), else scored."""
    failed = [r for r in rows if r.error_kind == "video"]
    if rows and len(failed) == len(rows):
        return Final(rows, failed[0].error or failed[0].error_class or "video error")
    return Scored(rows)
