"""The news-style badge of the `presentation` condition (RA-Bench 'presentation'): an opaque badge composited in a
corner, rendered once per frame size with Pillow; the CLI equivalent overlays the same badge from a PNG."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import av
import ffmpeg
import numpy as np
from PIL import Image, ImageDraw, ImageFont
from pydantic import Field

from transforms.nodes import Node
from transforms.steps.kind import CliChain, CliEquivalent, NodeContext, StepKind, StepSpec, filter_alone


class BadgeStep(StepSpec):
    """An opaque news-style badge composited in a corner (RA-Bench 'presentation')."""

    kind: Literal["badge"] = "badge"
    text: str = Field("BREAKING", min_length=1, max_length=32)
    label: str = Field("NEWS 24", max_length=32)
    height_frac: float = Field(0.12, gt=0, le=0.5)
    margin_frac: float = Field(0.02, ge=0, le=0.2)
    corner: Literal["upper-right", "upper-left", "lower-right", "lower-left"] = "upper-right"
    box_color: str = "#c8102e"
    label_color: str = "#1a1a1a"
    text_color: str = "#ffffff"


@dataclass(frozen=True)
class BadgePatch:
    """An opaque badge as yuv420p planes, and where it goes (even coordinates, so chroma aligns)."""

    x: int
    y: int
    rgb: np.ndarray  # [h, w, 3] uint8, for backends that composite in RGB or from a PNG
    y_plane: np.ndarray
    u_plane: np.ndarray
    v_plane: np.ndarray

    @property
    def width(self) -> int:
        return self.rgb.shape[1]

    @property
    def height(self) -> int:
        return self.rgb.shape[0]


def _even(v: float) -> int:
    return max(2, round(v / 2) * 2)


def _font(size: int) -> ImageFont.ImageFont:
    try:
        return ImageFont.load_default(size=size)  # Pillow >= 10.1 ships a scalable default font
    except TypeError:  # pragma: no cover - very old Pillow
        return ImageFont.load_default()


def render_badge_rgb(step: BadgeStep, frame_width: int, frame_height: int) -> np.ndarray:
    """Render the badge for a ``frame_width`` x ``frame_height`` frame as an opaque RGB array."""
    h = _even(frame_height * step.height_frac)
    text_font = _font(max(6, int(h * 0.62)))
    label_font = _font(max(5, int(h * 0.42)))
    probe = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    text_w = probe.textbbox((0, 0), step.text, font=text_font)[2]
    label_w = probe.textbbox((0, 0), step.label, font=label_font)[2] if step.label else 0
    pad = max(2, h // 5)
    red_w = text_w + 2 * pad
    label_box = label_w + 2 * pad if step.label else 0
    w = min(_even(red_w + label_box), _even(frame_width * 0.9))
    img = Image.new("RGB", (w, h), step.label_color)
    draw = ImageDraw.Draw(img)
    draw.rectangle((0, 0, min(red_w, w) - 1, h - 1), fill=step.box_color)
    draw.text((pad, h / 2), step.text, font=text_font, fill=step.text_color, anchor="lm")
    if step.label:
        draw.text((red_w + pad, h / 2), step.label, font=label_font, fill=step.text_color, anchor="lm")
    return np.asarray(img, dtype=np.uint8)


@lru_cache(maxsize=64)
def badge_patch(step: BadgeStep, frame_width: int, frame_height: int) -> BadgePatch:
    """The badge for one frame size, with its position; cached, since every frame of a size shares it."""
    rgb = render_badge_rgb(step, frame_width, frame_height)
    h, w = rgb.shape[:2]
    margin_x, margin_y = _even(frame_width * step.margin_frac), _even(frame_height * step.margin_frac)
    x = frame_width - w - margin_x if step.corner.endswith("right") else margin_x
    y = margin_y if step.corner.startswith("upper") else frame_height - h - margin_y
    x, y = max(0, x // 2 * 2), max(0, y // 2 * 2)
    yuv = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
    planes = [_plane_array(yuv, i) for i in range(3)]
    return BadgePatch(x=x, y=y, rgb=rgb, y_plane=planes[0], u_plane=planes[1], v_plane=planes[2])


def _plane_array(frame: av.VideoFrame, index: int) -> np.ndarray:
    plane = frame.planes[index]
    arr = np.frombuffer(plane, np.uint8).reshape(plane.height, plane.line_size)
    return arr[:, : plane.width]


def composite(frame: av.VideoFrame, patch: BadgePatch) -> av.VideoFrame:
    """A new yuv420p frame: ``frame`` with the opaque badge written in (the input is left untouched)."""
    out = av.VideoFrame(frame.width, frame.height, "yuv420p")
    for i, src in enumerate((patch.y_plane, patch.u_plane, patch.v_plane)):
        dst = _plane_array(out, i)
        dst[:] = _plane_array(frame, i)
        div = 1 if i == 0 else 2
        x, y = patch.x // div, patch.y // div
        h, w = min(src.shape[0], dst.shape[0] - y), min(src.shape[1], dst.shape[1] - x)
        dst[y : y + h, x : x + w] = src[:h, :w]
    out.pts, out.time_base, out.duration = frame.pts, frame.time_base, frame.duration
    return out


class BadgeNode(Node):
    kind = "badge"

    def __init__(self, step: BadgeStep) -> None:
        super().__init__()
        self.step = step

    def process(self, frame: av.VideoFrame) -> list[av.VideoFrame]:
        return [composite(frame, badge_patch(self.step, frame.width, frame.height))]


def _cli(step: BadgeStep, chain: CliChain) -> CliChain:
    """The same badge, saved as a PNG and overlaid."""
    size = chain.size
    patch = badge_patch(step, size.width, size.height)
    png = chain.work / f"badge_{size.width}x{size.height}.png"
    Image.fromarray(patch.rgb).save(png)
    return chain.filtered(ffmpeg.overlay(chain.stream, ffmpeg.input(str(png)), x=patch.x, y=patch.y))


def _node(step: BadgeStep, ctx: NodeContext) -> BadgeNode:
    return BadgeNode(step)


KIND = StepKind(model=BadgeStep, node=_node, cli=CliEquivalent(_cli), floor=filter_alone(_cli))
