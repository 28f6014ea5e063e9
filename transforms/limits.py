"""Input limits, checked from the container header before heavy work and again while decoding."""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from transforms.errors import LimitExceeded, UnsupportedVideo

# The longest side every encoder of the tree opens with, whatever the settings: libx264 refuses a width or height
# over 16384 in avcodec_open2 (libvpx-vp9 takes 65536). Every later step only shrinks a side (scale never
# upscales, normalize crops to even, rotation swaps the sides), so a source within it stays within it.
MAX_ENCODED_SIDE = 16384


class DecodedFrame(Protocol):  # what a check needs of a decoded frame (an av.VideoFrame)
    width: int
    height: int
    time: float | None


class Limits(BaseModel):
    """Bounds on one input video. Defaults suit a moderation tap of short-form uploads."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_bytes: int = Field(256 * 1024 * 1024, gt=0, description="largest accepted input, in bytes")
    max_pixels: int = Field(3840 * 2160, gt=0, description="largest width x height")
    max_duration_s: float = Field(600.0, gt=0, description="longest accepted duration, seconds")
    max_frames: int = Field(36_000, gt=0, description="most frames decoded from one input")
    max_encoder_mb: int = Field(
        850,
        gt=0,
        description="memory the encoders of one video may hold at once (estimated, transforms.memory); "
        "conditions beyond it run in further passes over the same frames, with the same output bytes",
    )

    def check_frame(self, frame: DecodedFrame, count: int) -> None:
        """Raise :class:`LimitExceeded` for the ``count``-th decoded frame (1-based) past a limit: a header can
        say less than the stream holds, so every decode (the engine's, the sampler's) checks each frame."""
        if count > self.max_frames:
            raise LimitExceeded(f"more than {self.max_frames} frames decoded")
        if max(frame.width, frame.height) > MAX_ENCODED_SIDE:  # as the probe refuses it from the header
            side = f"{frame.width}x{frame.height}: a side over {MAX_ENCODED_SIDE} pixels"
            raise UnsupportedVideo(f"a frame of {side}, more than H.264 encodes")
        if frame.width * frame.height > self.max_pixels:
            raise LimitExceeded(f"a frame of {frame.width}x{frame.height} exceeds {self.max_pixels} pixels")
        if frame.time is not None and frame.time > self.max_duration_s:
            raise LimitExceeded(f"a frame at {frame.time:.1f} s exceeds the {self.max_duration_s:.1f} s limit")
