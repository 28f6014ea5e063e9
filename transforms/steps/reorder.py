"""Segments shuffled with a seeded permutation, re-timed to play back to back. It holds the whole video until its
end, so the engine's memory bound covers the six LastMile conditions, not reorder. A temporal edit: the engine runs
it; the CLI cross-check and the floor cover the LastMile shape only."""

from __future__ import annotations

from typing import Literal

import av
import numpy as np
from pydantic import Field

from transforms.nodes import Node, copy_frame
from transforms.steps.kind import NodeContext, StepKind, StepSpec


class ReorderStep(StepSpec):
    """Shuffle fixed-length segments with a seeded permutation (re-timed to play back to back)."""

    kind: Literal["reorder"] = "reorder"
    segment_s: float = Field(1.0, gt=0)
    seed: int = 0


class ReorderNode(Node):
    """Segments of ``segment_s`` seconds emitted in a seeded random order, re-timed to play back to back."""

    kind = "reorder"

    def __init__(self, step: ReorderStep) -> None:
        super().__init__()
        self.step = step
        self.segments: dict[int, list[av.VideoFrame]] = {}

    def process(self, frame: av.VideoFrame) -> list[av.VideoFrame]:
        index = int(float(frame.pts * frame.time_base) // self.step.segment_s)
        self.segments.setdefault(index, []).append(copy_frame(frame))
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


def _node(step: ReorderStep, ctx: NodeContext) -> ReorderNode:
    return ReorderNode(step)


KIND = StepKind(model=ReorderStep, node=_node)
