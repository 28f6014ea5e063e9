"""The runtime interface every scorer implements, and the chunked scoring loop they share.

``score(frames) -> scores``: ``frames`` is ``[N, T, H, W, 3]`` as the model card asks (N videos, or N
condition variants of one video); ``scores`` is ``[N]`` float64 in the gateway's convention (higher = more
likely generated; the card's direction is applied). ``max_batch`` is the most videos one call to the model
takes: callers may send more, and :func:`score_in_batches` splits them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from detectors.card import ModelCard
from detectors.errors import BadRequest, DetectorError, NonFiniteScore, RuntimeUnavailable
from transforms.support.backoff import Backoff


@runtime_checkable
class Runtime(Protocol):
    card: ModelCard
    name: str  # "embedded" | "triton"
    max_batch: int

    def score(self, frames: np.ndarray) -> np.ndarray: ...


@dataclass
class RuntimeStats:
    """Counters a runtime exposes (for benchmarks and /metrics)."""

    batches: int = 0
    videos: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)


def check_frames(card: ModelCard, frames: np.ndarray) -> None:
    """Raise :class:`BadRequest` unless ``frames`` is a batch the card's model accepts."""
    want = card.input_shape(frames.shape[0] if frames.ndim == 5 else 1)
    if frames.ndim != 5 or tuple(frames.shape[1:]) != want[1:]:
        raise BadRequest(
            f"{card.name}: frames of shape {frames.shape}, the card asks for [N, {', '.join(map(str, want[1:]))}]"
        )
    if frames.dtype != np.dtype(card.input.dtype):
        raise BadRequest(f"{card.name}: frames of dtype {frames.dtype}, the card asks for {card.input.dtype}")


def score_in_batches(
    card: ModelCard, frames: np.ndarray, max_batch: int, infer: Callable[[np.ndarray], np.ndarray], stats: RuntimeStats
) -> np.ndarray:
    """Check ``frames`` against the card, run ``infer`` on chunks of at most ``max_batch`` videos, record the
    latencies, and return generated-scores (the card's direction applied): the loop every runtime shares.
    Raises :class:`NonFiniteScore` (a :class:`BadRequest`: the caller scores the videos one by one) where the
    model answered NaN or an infinity for any of them."""
    check_frames(card, frames)
    out = []
    for start in range(0, len(frames), max_batch):
        chunk = np.ascontiguousarray(frames[start : start + max_batch])
        t0 = time.perf_counter()
        native = infer(chunk)
        dt = time.perf_counter() - t0
        stats.batches += 1
        stats.videos += len(chunk)
        stats.seconds += dt
        stats.latencies.append(dt)
        out.append(card.generated_score(native))
    scores = np.concatenate(out) if out else np.zeros(0)
    if (bad := np.flatnonzero(~np.isfinite(scores))).size:
        raise NonFiniteScore(f"{card.name}: the model scored {scores[bad[0]]} (NaN or an infinity is no score)")
    return scores


def answers(probe: Callable[[], object]) -> bool:
    """Whether a readiness probe says yes; a server that cannot say is not ready."""
    try:
        return bool(probe())
    except Exception:  # the client's own errors, whatever they are: not ready
        return False


RETRY_BACKOFF_MAX_S = 5.0  # the longest wait between two tries of one request


def infer_with_retries(
    call: Callable[[], np.ndarray],
    videos: int,
    classify: Callable[[Exception], DetectorError],
    retryable: type[Exception] | tuple[type[Exception], ...],
    retries: int,
    backoff_s: float,
    who: str,
) -> np.ndarray:
    """The remote runtimes' one retry rule: ``call()`` for one score per video; a ``retryable`` error that
    ``classify`` calls a :class:`BadRequest` is this request's fault and raised, any other is retried with a
    capped exponential backoff; when the tries run out, or the answer has the wrong length, the server is
    :class:`RuntimeUnavailable` (retry later, never a verdict)."""
    last: Exception | None = None
    backoff = Backoff(backoff_s, RETRY_BACKOFF_MAX_S)
    for attempt in range(retries + 1):
        try:
            scores = np.asarray(call()).reshape(-1)
        except DetectorError:
            raise
        except retryable as exc:
            err = classify(exc)
            if isinstance(err, BadRequest):
                raise err from exc
            last = exc  # unavailable: retry
        else:
            if scores.shape != (videos,):
                raise RuntimeUnavailable(f"{who} returned {scores.shape} scores for {videos} videos")
            return scores
        time.sleep(backoff.delay(attempt + 1))
    raise RuntimeUnavailable(f"{who} did not answer after {retries + 1} attempts: {last}")
