"""A window of the video: frames from ``start_s`` for ``duration_s`` seconds, re-timed to start at 0. A temporal
edit: the engine runs it; the CLI cross-check and the floor cover the LastMile shape only."""

from __future__ import annotations

from typing import Literal

import av
from pydantic import Field

from transforms.nodes import Node, copy_frame
from transforms.steps.kind import NodeContext, StepKind, StepSpec


class TrimStep(StepSpec):
    """Keep a window of the video: frames from ``start_s`` for ``duration_s`` seconds, re-timed to start at 0."""

    kind: Literal["trim"] = "trim"
    start_s: float = Field(0.0, ge=0)
    duration_s: float = Field(5.0, gt=0)


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
        frame = copy_frame(frame)
        frame.pts -= self.offset
        return [frame]


def _node(step: TrimStep, ctx: NodeContext) -> TrimNode:
    return TrimNode(step)


KIND = StepKind(model=TrimStep, node=_node)
