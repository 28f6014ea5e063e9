"""Frame sampling for detectors: a variant's bytes -> ``[T, H, W, 3]`` uint8 RGB, streaming.

Only the frames a policy selects are kept; the rest are decoded and dropped (uniform sampling counts
packets first, which needs no decoding).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import av
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from transforms.errors import InvalidVideo
from transforms.limits import Limits
from transforms.probe import ffmpeg_says, open_input


class SamplingPolicy(BaseModel):
    """Which frames a detector sees, and at what size (part of every model card)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    mode: Literal["uniform", "fps_window", "first_k"] = "uniform"
    frames: int = Field(8, ge=1, le=512, description="T, the number of frames")
    fps: float | None = Field(None, gt=0, le=240, description="rate of an fps_window (D3: 8)")
    height: int = Field(224, ge=8, le=4096)
    width: int = Field(224, ge=8, le=4096)
    resize: Literal["stretch", "short_side_center_crop", "center_crop", "short_side"] = Field(
        "short_side_center_crop",
        description="short_side: the shorter side scaled to `height`, the aspect kept, nothing cropped (`width` is "
        "unused; RA-Bench's protocol for multimodal models: short side 256)",
    )
    interpolation: Literal["bilinear", "bicubic", "area", "nearest"] = "bilinear"

    @model_validator(mode="after")
    def _fps_needed(self) -> SamplingPolicy:
        if self.mode == "fps_window" and self.fps is None:
            raise ValueError("an fps_window sampling policy needs 'fps'")
        return self


def sample_frames(data: bytes, policy: SamplingPolicy, limits: Limits | None = None) -> np.ndarray:
    """Decode ``data`` and return the frames ``policy`` selects, as ``[T, H, W, 3]`` uint8 RGB.

    A video shorter than the policy needs repeats its last selected frame (as a detector would see a
    frozen end), so the shape is always ``[policy.frames, policy.height, policy.width, 3]`` (with ``short_side``:
    ``policy.height`` on the shorter side, the longer one as the video's aspect gives it).
    """
    limits = limits or Limits()
    selected: list[np.ndarray] = []
    for frame in _select(data, policy, limits):
        selected.append(_resize(frame, policy))
    if not selected:
        raise InvalidVideo("no frame could be decoded for sampling")
    while len(selected) < policy.frames:
        selected.append(selected[-1])
    return np.stack(selected[: policy.frames])


def every_frame(data: bytes, limits: Limits | None = None) -> np.ndarray:
    """Every frame of ``data`` as ``[N, H, W, 3]`` uint8 RGB at its own size, upright (an augmentation's frames
    when no sampling policy is given)."""
    frames = []
    for frame in _frames(data, limits or Limits()):
        rgb = frame.to_ndarray(format="rgb24")
        rot = frame.rotation % 360
        frames.append(np.ascontiguousarray(np.rot90(rgb, k=rot // 90)) if rot else rgb)
    if not frames:
        raise InvalidVideo("no frame could be decoded")
    return np.stack(frames)


def _select(data: bytes, policy: SamplingPolicy, limits: Limits) -> Iterator[av.VideoFrame]:
    if policy.mode == "uniform":
        total = count_frames(data)
        wanted = np.linspace(0, max(total - 1, 0), policy.frames).round().astype(int).tolist()
        for i, frame in enumerate(_frames(data, limits)):
            for _ in range(wanted.count(i)):
                yield frame
            if i >= wanted[-1]:
                return
    elif policy.mode == "first_k":
        for i, frame in enumerate(_frames(data, limits)):
            if i >= policy.frames:
                return
            yield frame
    else:
        yield from _fps_window(data, policy, limits)


def _fps_window(data: bytes, policy: SamplingPolicy, limits: Limits) -> Iterator[av.VideoFrame]:
    """Frames at 0, 1/fps, 2/fps, ... from the first frame: the latest frame at or before each instant."""
    start, k, prev = None, 0, None
    for frame in _frames(data, limits):
        t = frame.time if frame.time is not None else 0.0
        start = t if start is None else start
        while prev is not None and k < policy.frames and t > start + k / policy.fps + 1e-9:
            yield prev
            k += 1
        if k >= policy.frames:
            return
        prev = frame
    if prev is not None and k < policy.frames:
        yield prev


def count_frames(data: bytes) -> int:
    """Frames in the first video stream, by counting packets (no decoding)."""
    with open_input(data) as container:
        stream = container.streams.video[0] if container.streams.video else None
        if stream is None:
            raise InvalidVideo("no video stream to sample")
        if stream.frames:
            return stream.frames
        return sum(1 for p in container.demux(stream) if p.size)


def _frames(data: bytes, limits: Limits) -> Iterator[av.VideoFrame]:
    with open_input(data) as container:
        if not container.streams.video:
            raise InvalidVideo("no video stream to sample")
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        try:
            for i, frame in enumerate(container.decode(stream), start=1):
                limits.check_frame(frame, i)  # the original is sampled without the engine's decode
                yield frame
        except av.error.FFmpegError as exc:
            raise InvalidVideo(f"decoding failed while sampling: {ffmpeg_says(exc)}") from exc


def _resize(frame: av.VideoFrame, policy: SamplingPolicy) -> np.ndarray:
    """One frame to ``[H, W, 3]`` RGB by the policy's resize rule, upright per its display rotation."""
    w, h = frame.width, frame.height
    if frame.rotation % 180 == 90:
        w, h = h, w
    if policy.resize == "stretch":
        size = (policy.width, policy.height)
    elif policy.resize == "short_side":
        scale = policy.height / min(w, h)
        size = (max(1, round(w * scale)), max(1, round(h * scale)))
    else:
        scale = max(policy.width / w, policy.height / h)
        if policy.resize == "center_crop":
            scale = max(scale, 1.0)  # native pixels when the frame is large enough: fine cues survive
        size = (max(policy.width, round(w * scale)), max(policy.height, round(h * scale)))
    rot = frame.rotation % 360
    rw, rh = (size[1], size[0]) if rot % 180 == 90 else size
    rgb = frame.to_ndarray(width=rw, height=rh, format="rgb24", interpolation=policy.interpolation.upper())
    if rot:
        rgb = np.rot90(rgb, k=rot // 90)
    if policy.resize == "short_side":
        return np.ascontiguousarray(rgb)
    top, left = (rgb.shape[0] - policy.height) // 2, (rgb.shape[1] - policy.width) // 2
    return np.ascontiguousarray(rgb[top : top + policy.height, left : left + policy.width])
