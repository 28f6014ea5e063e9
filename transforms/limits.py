"""Input limits, checked from the container header before heavy work and again while decoding."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# The longest side every encoder of the tree opens with, whatever the settings: libx264 refuses a width or height
# over 16384 in avcodec_open2 (libvpx-vp9 takes 65536). Every later step only shrinks a side (scale never
# upscales, normalize crops to even, rotation swaps the sides), so a source within it stays within it.
MAX_ENCODED_SIDE = 16384


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
