"""Condition specifications as data: steps, conditions, profiles and their stable hashes.

A *condition* is a named, ordered list of *steps*; a *profile* says how fast (and how faithfully) the
encoders run. Both are pydantic models, loadable from YAML or JSON, and both go into :func:`spec_hash`,
which every output carries as provenance. The six LastMile conditions of RA-Bench (arXiv 2608.14391,
§4.3.3 and §B) are :data:`LASTMILE`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

_FROZEN = ConfigDict(extra="forbid", frozen=True)


class Vp9Step(BaseModel):
    """Platform storage encode to VP9 at constant quality, then decode (YouTube-style storage)."""

    model_config = _FROZEN
    kind: Literal["vp9"] = "vp9"
    crf: int = Field(32, ge=0, le=63)
    bitrate: int = Field(0, ge=0, description="b:v; 0 with crf means constant quality")


class ScaleStep(BaseModel):
    """Downsample both sides by ``factor`` (aspect kept, rounded to even), optionally capped."""

    model_config = _FROZEN
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


class FpsStep(BaseModel):
    """Drop or duplicate frames to a constant rate (no interpolation); duration is kept."""

    model_config = _FROZEN
    kind: Literal["fps"] = "fps"
    fps: float = Field(8.0, gt=0, le=240)


class BadgeStep(BaseModel):
    """An opaque news-style badge composited in a corner (RA-Bench 'presentation')."""

    model_config = _FROZEN
    kind: Literal["badge"] = "badge"
    text: str = Field("BREAKING", min_length=1, max_length=32)
    label: str = Field("NEWS 24", max_length=32)
    height_frac: float = Field(0.12, gt=0, le=0.5)
    margin_frac: float = Field(0.02, ge=0, le=0.2)
    corner: Literal["upper-right", "upper-left", "lower-right", "lower-left"] = "upper-right"
    box_color: str = "#c8102e"
    label_color: str = "#1a1a1a"
    text_color: str = "#ffffff"


class H264Step(BaseModel):
    """The repost platform's final encode: H.264 in MP4, same size and fps as its input."""

    model_config = _FROZEN
    kind: Literal["h264"] = "h264"
    crf: int = Field(23, ge=0, le=51)
    profile: Literal["baseline", "main", "high"] = "high"


class TrimStep(BaseModel):
    """Keep a window of the video: frames from ``start_s`` for ``duration_s`` seconds, re-timed to start at 0."""

    model_config = _FROZEN
    kind: Literal["trim"] = "trim"
    start_s: float = Field(0.0, ge=0)
    duration_s: float = Field(5.0, gt=0)


class SpeedStep(BaseModel):
    """Play ``factor`` times as fast (0.75: slowed down; 1.25: sped up): timestamps rewritten, no frame dropped."""

    model_config = _FROZEN
    kind: Literal["speed"] = "speed"
    factor: float = Field(1.25, ge=0.25, le=4)


class ReorderStep(BaseModel):
    """Shuffle fixed-length segments with a seeded permutation (re-timed to play back to back)."""

    model_config = _FROZEN
    kind: Literal["reorder"] = "reorder"
    segment_s: float = Field(1.0, gt=0)
    seed: int = 0


Step = Annotated[
    Vp9Step | ScaleStep | FpsStep | BadgeStep | H264Step | TrimStep | SpeedStep | ReorderStep,
    Field(discriminator="kind"),
]


class Condition(BaseModel):
    """A named, ordered list of steps. No steps means the source bytes as they are."""

    model_config = _FROZEN
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_\-@.=^]{0,127}$")  # sweeps and reposts: full@scale.factor=0.5, full^2
    steps: tuple[Step, ...] = ()
    description: str = ""

    @model_validator(mode="after")
    def _check_order(self) -> Condition:
        kinds = [s.kind for s in self.steps]
        if kinds and kinds[-1] != "h264":
            raise ValueError(f"condition {self.name!r}: a perturbed condition must end with an 'h264' step")
        return self  # an 'h264' inside a chain (a repost) encodes and decodes; the last one is the output


class Profile(BaseModel):
    """How the encoders run. Part of every spec hash, because it changes the output bytes.

    The default is the ``fidelity`` profile: VP9 ``deadline good``, ``cpu-used 3`` (the protocol fixes CRF 32,
    not the speed; measured here with the ffmpeg CLI, 3 costs 0.1-0.2 dB PSNR and under 1% more bytes than 1
    for a third less VP9 CPU, README "Benchmarks"), x264 ``medium`` (the protocol's).
    """

    model_config = _FROZEN
    name: str = "fidelity"
    vp9_deadline: Literal["good", "realtime", "best"] = "good"
    vp9_cpu_used: int = Field(3, ge=-8, le=8)
    x264_preset: Literal[
        "ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow"
    ] = "medium"
    h264_encoder: Literal["libx264", "h264_nvenc", "auto"] = "libx264"
    threads: int = Field(0, ge=0, le=64, description="encoder threads; 0 = the codec's choice")
    deterministic: bool = Field(False, description="one thread, no row-mt: byte-identical output")

    def encoder_threads(self) -> int:
        """Threads each encoder gets: 1 when deterministic, else the configured count (0 = auto)."""
        return 1 if self.deterministic else self.threads

    def with_determinism(self, deterministic: bool) -> Profile:
        return self.model_copy(update={"deterministic": deterministic})


PROFILES: dict[str, Profile] = {
    "fidelity": Profile(),
    "throughput": Profile(
        name="throughput",
        vp9_deadline="realtime",
        vp9_cpu_used=8,
        x264_preset="veryfast",
        h264_encoder="auto",
    ),
}

_VP9, _H264 = Vp9Step(), H264Step()

LASTMILE: tuple[Condition, ...] = (
    Condition(name="original", description="the source bytes as they are"),
    Condition(name="transcode", steps=(_VP9, _H264), description="VP9 storage encode, H.264 repost"),
    Condition(name="spatial", steps=(_VP9, ScaleStep(), _H264), description="VP9, 0.5x downsample, H.264"),
    Condition(name="temporal", steps=(_VP9, FpsStep(), _H264), description="VP9, 8 fps, H.264"),
    Condition(name="presentation", steps=(_VP9, BadgeStep(), _H264), description="VP9, news badge, H.264"),
    Condition(
        name="full",
        steps=(_VP9, ScaleStep(), FpsStep(), BadgeStep(), _H264),
        description="VP9, downsample, 8 fps, badge, H.264",
    ),
)


def canonical_json(obj: object) -> str:
    """Canonical JSON (sorted keys, no spaces) of a pydantic model or plain data."""
    data = obj.model_dump(mode="json") if isinstance(obj, BaseModel) else obj
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def spec_hash(condition: Condition, profile: Profile) -> str:
    """sha256 of the canonical JSON of (condition steps, profile): the provenance of every variant.

    The condition's free-text description is left out, so rewording it does not change the hash; a
    condition without steps (the source as it is) hashes without the profile.
    """
    payload: dict[str, object] = {
        "name": condition.name,
        "steps": [s.model_dump(mode="json") for s in condition.steps],
    }
    if condition.steps:  # `original` does not depend on the profile: same bytes, same hash
        payload["profile"] = profile.model_dump(mode="json")
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


STEP_ADAPTER: TypeAdapter[Step] = TypeAdapter(Step)
