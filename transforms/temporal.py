"""Temporal edits as engine nodes: keep a window (trim), change the speed (timestamps rewritten), and shuffle
fixed-length segments with a seeded permutation (reorder). Reorder holds the whole video until its end, so
the engine's memory bound covers the six LastMile conditions, not reorder."""

from __future__ import annotations

from fractions import Fraction

import av
import numpy as np

from transforms.nodes import Node
from transforms.spec import ReorderStep, SpeedStep, TrimStep


def _copy(frame: av.VideoFrame) -> av.VideoFrame:
    """A frame of our own to re-time: the tree hands the same frame object to every sibling branch."""
    out = av.VideoFrame.from_ndarray(frame.to_ndarray(), format=frame.format.name)
    out.pts, out.time_base, out.duration = frame.pts, frame.time_base, frame.duration
    return out


class TrimNode(Node):
    """Frames whose time lies in [start_s, start_s + duration_s), re-timed to start at 0."""

    kind = "trim"

    def __init__(self, step: TrimStep) -> None:
        super().__init__()
        self.step = step
        self.offset: int | None = None

    def process(self, frame: av.VideoFrame) -> list[av.VideoFrame]:
        t = float(frame.pts * frame.time_base)
        if not self.step.start_s <= t < self.step.start_s + self.step.duration_s:
            return []
        if self.offset is None:
            self.offset = frame.pts
        frame = _copy(frame)
        frame.pts -= self.offset
        return [frame]


class SpeedNode(Node):
    """Played ``factor`` = p/q times as fast: every timestamp and duration divided by ``factor`` exactly (the
    time base divided by p, the counts multiplied by q), no frame dropped."""

    kind = "speed"

    def __init__(self, step: SpeedStep) -> None:
        super().__init__()
        self.factor = Fraction(step.factor).limit_denominator(1000)

    def process(self, frame: av.VideoFrame) -> list[av.VideoFrame]:
        p, q = self.factor.numerator, self.factor.denominator
        frame = _copy(frame)
        frame.time_base = frame.time_base / p
        frame.pts *= q
        frame.duration = (frame.duration or 0) * q
        return [frame]


class ReorderNode(Node):
    """Segments of ``segment_s`` seconds emitted in a seeded random order, re-timed to play back to back."""

    kind = "reorder"

    def __init__(self, step: ReorderStep) -> None:
        super().__init__()
        self.step = step
        self.segments: dict[int, list[av.VideoFrame]] = {}

    def process(self, frame: av.VideoFrame) -> list[av.VideoFrame]:
        index = int(float(frame.pts * frame.time_base) // self.step.segment_s)
        self.segments.setdefault(index, []).append(_copy(frame))
        return []

    def drain(self) -> list[av.VideoFrame]:
        keys = sorted(self.segments)
        order = [keys[i] for i in np.random.default_rng(self.step.seed).permutation(len(keys))]
        out, clock = [], 0
        for key in order:
            frames = self.segments.pop(key)
            start = frames[0].pts
            for f in frames:
                f.pts = clock + (f.pts - start)
                out.append(f)
            last = frames[-1]
            clock = last.pts + max(1, last.duration or 1)
        return out
