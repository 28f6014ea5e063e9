"""The memory a fan-out's encoders hold at once, and how the prefix tree is run in passes that fit a budget.

Each open encoder holds a number of frames of its own size (lookahead, references, threads): a 1080p libx264 at
preset medium about 146, so five H.264 tails and the VP9 storage encode of one 1080p video hold 1.7 GB at once.
A budget (:attr:`transforms.limits.Limits.max_encoder_mb`) splits the children of a *replayable* node into
groups that each fit: the first group runs with the first decode; each later group is fed the same frames again,
decoded from the source bytes (the tree's root) or from the VP9 packets that the storage encode kept
(a few MB). Every encoder still sees the same frames in the same order, so the output bytes do not change; the
price is one extra decode per extra pass, which ``lastmile bench transforms`` counts against the floor.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

import yaml
from pydantic import BaseModel, ConfigDict, Field

from transforms.profile import Profile


class EncoderMemory(BaseModel):
    """Frames held per open encoder, by encoder and its speed setting (``transforms/data/encoder_memory.yaml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    vp9: dict[str, float] = Field(alias="libvpx-vp9")
    x264: dict[str, float] = Field(alias="libx264")
    nvenc: dict[str, float] = Field(alias="h264_nvenc")
    unmeasured: float = Field(gt=0)

    def frames(self, encoder: str, profile: Profile) -> float:
        """Frames of its own size that ``encoder`` holds under ``profile``."""
        table, key = {
            "vp9": (self.vp9, profile.vp9_deadline),
            "libx264": (self.x264, profile.x264_preset),
            "h264_nvenc": (self.nvenc, "any"),
        }[encoder]
        return table.get(key, self.unmeasured)

    def encoder_bytes(self, encoder: str, profile: Profile, pixels: int) -> int:
        """Estimated resident bytes of one ``encoder`` on frames of ``pixels`` pixels (yuv420p)."""
        return int(self.frames(encoder, profile) * pixels * 1.5)


@lru_cache(maxsize=1)
def encoder_memory() -> EncoderMemory:
    text = resources.files("transforms").joinpath("data/encoder_memory.yaml").read_text()
    return EncoderMemory.model_validate(yaml.safe_load(text))


def split(own: int, children: list[int], budget: int) -> list[list[int]]:
    """Indices of ``children`` (their estimated bytes) in passes that each fit ``budget``. The first pass also
    holds ``own``, the replayable node's own encoder, which runs only then. First-fit by decreasing size, the
    input order kept within a pass; a child over the budget alone gets a pass of its own, and when no child fits
    beside ``own`` the lightest pass goes first."""
    passes: list[list[int]] = [[]]
    room = [budget - own]
    for i in sorted(range(len(children)), key=lambda i: -children[i]):
        fit = next((p for p, left in enumerate(room) if children[i] <= left), None)
        if fit is None:
            passes.append([])
            room.append(budget)
            fit = len(passes) - 1
        passes[fit].append(i)
        room[fit] -= children[i]
    if not passes[0]:  # nothing fits beside ``own``: it runs with the lightest pass (over budget, unavoidably)
        passes.pop(0)
        passes.sort(key=lambda p: sum(children[i] for i in p))
    return [sorted(p) for p in passes]
