"""A speed change: timestamps rewritten exactly, no frame dropped. A temporal edit: the engine runs it; the CLI
cross-check and the floor cover the LastMile shape only."""

from __future__ import annotations

from fractions import Fraction
from typing import Literal

import av
from pydantic import Field

from transforms.nodes import Node, copy_frame
from transforms.steps.kind import NodeContext, StepKind, StepSpec


class SpeedStep(StepSpec):
    """Play ``factor`` times as fast (0.75: slowed down; 1.25: sped up): timestamps rewritten, no frame dropped."""

    kind: Literal["speed"] = "speed"
    factor: float = Field(1.25, ge=0.25, le=4)

    def fraction(self) -> Fraction:
        """``factor`` as the exact fraction p/q the timestamps are rewritten by."""
        return Fraction(self.factor).limit_denominator(1000)


class SpeedNode(Node):
    """Played ``factor`` = p/q times as fast: every timestamp and duration divided by ``factor`` exactly (the
    time base divided by p, the counts multiplied by q), no frame dropped."""

    kind = "speed"

    def __init__(self, step: SpeedStep) -> None:
        super().__init__()
        self.factor = step.fraction()

    def process(self, frame: av.VideoFrame) -> list[av.VideoFrame]:
        p, q = self.factor.numerator, self.factor.denominator
        frame = copy_frame(frame)
        frame.time_base = frame.time_base / p
        frame.pts *= q
        frame.duration = (frame.duration or 0) * q
        return [frame]


def _node(step: SpeedStep, ctx: NodeContext) -> SpeedNode:
    return SpeedNode(step)


def _rate_after(step: SpeedStep, rate: Fraction) -> Fraction:
    return rate * step.fraction()


KIND = StepKind(model=SpeedStep, node=_node, rate_after=_rate_after)
