"""A constant frame rate: frames dropped or duplicated (no interpolation), duration kept."""

from __future__ import annotations

from fractions import Fraction
from typing import Literal

import av
from pydantic import Field

from transforms.nodes import FilterNode, fps_text
from transforms.steps.kind import CliChain, CliEquivalent, NodeContext, StepKind, StepSpec, filter_alone


class FpsStep(StepSpec):
    """Drop or duplicate frames to a constant rate (no interpolation); duration is kept."""

    kind: Literal["fps"] = "fps"
    fps: float = Field(8.0, gt=0, le=240)


class FpsNode(FilterNode):
    def __init__(self, step: FpsStep) -> None:
        super().__init__("fps")
        self.step = step

    def filters(self, frame: av.VideoFrame) -> list[tuple[str, str]]:
        return [("fps", f"fps={fps_text(self.step.fps)}")]


def _cli(step: FpsStep, chain: CliChain) -> CliChain:
    return chain.filtered(chain.stream.filter("fps", fps=fps_text(step.fps)))


def _node(step: FpsStep, ctx: NodeContext) -> FpsNode:
    return FpsNode(step)


def _rate_after(step: FpsStep, rate: Fraction) -> Fraction:
    return Fraction(step.fps).limit_denominator(1001)


KIND = StepKind(model=FpsStep, node=_node, cli=CliEquivalent(_cli), floor=filter_alone(_cli), rate_after=_rate_after)
