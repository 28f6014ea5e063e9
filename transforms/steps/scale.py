"""Downsampling: both sides by a factor (aspect kept, rounded to even), optionally capped; never upscales."""

from __future__ import annotations

from typing import Literal

import av
from pydantic import Field

from transforms.ffmpeg_graph import FrameSize
from transforms.nodes import FilterNode
from transforms.steps.kind import CliChain, CliEquivalent, NodeContext, Size, StepKind, StepSpec, filter_alone


class ScaleStep(StepSpec):
    """Downsample both sides by ``factor`` (aspect kept, rounded to even), optionally capped."""

    kind: Literal["scale"] = "scale"
    factor: float = Field(0.5, gt=0, le=1)
    max_short_side: int | None = Field(None, gt=1, description="absolute cap; never upscales")
    flags: Literal["bicubic", "bilinear", "lanczos", "area"] = "bicubic"

    def output_size(self, width: int, height: int) -> tuple[int, int]:
        """The (width, height) this step produces from a ``width`` x ``height`` input."""
        scale = self.factor
        if self.max_short_side is not None:
            scale = min(scale, self.max_short_side / min(width, height))
        return max(2, round(width * scale / 2) * 2), max(2, round(height * scale / 2) * 2)


class ScaleNode(FilterNode):
    def __init__(self, step: ScaleStep) -> None:
        super().__init__("scale")
        self.step = step

    def filters(self, frame: av.VideoFrame) -> list[tuple[str, str]]:
        w, h = self.step.output_size(frame.width, frame.height)
        return [("scale", f"{w}:{h}:flags={self.step.flags}")]


def _cli(step: ScaleStep, chain: CliChain) -> CliChain:
    w, h = step.output_size(chain.size.width, chain.size.height)
    return chain.filtered(chain.stream.filter("scale", w, h, flags=step.flags), FrameSize(w, h))


def _node(step: ScaleStep, ctx: NodeContext) -> ScaleNode:
    return ScaleNode(step)


def _size_after(step: ScaleStep, size: Size) -> Size:
    return step.output_size(*size)


KIND = StepKind(
    model=ScaleStep,
    node=_node,
    cli=CliEquivalent(_cli),
    floor=filter_alone(_cli),
    size_after=_size_after,
)
