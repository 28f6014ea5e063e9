"""Encoder profiles: how fast (and how faithfully) the encoders run. Part of every spec hash
(:func:`transforms.spec.spec_hash`), because a profile changes the output bytes."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Profile(BaseModel):
    """How the encoders run. Part of every spec hash, because it changes the output bytes.

    The default is the ``fidelity`` profile: VP9 ``deadline good``, ``cpu-used 3`` (the protocol fixes CRF 32,
    not the speed; measured here with the ffmpeg CLI, 3 costs 0.1-0.2 dB PSNR and under 1% more bytes than 1
    for a third less VP9 CPU, README "Benchmarks"), x264 ``medium`` (the protocol's).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
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
