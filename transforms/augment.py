"""Dissemination as a training augmentation: a clip and a draw key ``(seed, index, epoch)`` in, the frames of one
condition drawn from a configured distribution out.

The distribution is data (:class:`AugmentConfig`): the six conditions, severity sweeps and repost chains
(:mod:`transforms.sweeps`), each entry with a weight split evenly over the conditions it expands to. A draw depends
on nothing but its key, so two processes (two ``DataLoader`` workers, or a run today and one next month) draw the
same condition; the encoders run single-threaded (the profile's ``deterministic``), so they also produce the same
bytes, and the same frames. Each :class:`Augmenter` opens its own codecs per call: nothing is shared across
processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from transforms.catalog import load_spec_file
from transforms.engine import Engine, Variant
from transforms.errors import LimitExceeded, SpecError
from transforms.limits import Limits
from transforms.profile import PROFILES, Profile
from transforms.sampling import SamplingPolicy, every_frame, sample_frames
from transforms.spec import LASTMILE, Condition
from transforms.sweeps import Repost, Sweep, expand_repost, expand_sweep

_STRICT = ConfigDict(extra="forbid", frozen=True)


class Entry(BaseModel):
    """One entry of the distribution: exactly one of a condition's name, a sweep, or a repost chain, and its
    weight (a sweep's or chain's weight is split evenly over the conditions it expands to)."""

    model_config = _STRICT
    condition: str | None = Field(None, min_length=1, description="one of the six, or a name `conditions:` defines")
    sweep: Sweep | None = None
    repost: Repost | None = None
    weight: float = Field(1.0, gt=0, le=1e6)

    @model_validator(mode="after")
    def _one_kind(self) -> Entry:
        given = [k for k in ("condition", "sweep", "repost") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"an entry names exactly one of condition, sweep, repost (got {given or 'none'})")
        return self


def _six() -> list[Entry]:
    return [Entry(condition=c.name) for c in LASTMILE]


class AugmentConfig(BaseModel):
    """The augmentation's distribution, encoder profile and sampling (YAML: ``draws:``, ``conditions:``,
    ``profile:``, ``sampling:``). The default draws the six conditions with equal weight, with the ``throughput``
    profile (the encoders' fast settings: an augmentation runs once per sample and epoch)."""

    model_config = _STRICT
    draws: list[Entry] = Field(default_factory=_six, min_length=1)
    conditions: list[Condition] = Field(default_factory=list, description="conditions of the file's own")
    profile: str | Profile = "throughput"
    sampling: SamplingPolicy | None = Field(None, description="frames as a detector card says; None: every frame")

    def expanded(self) -> list[tuple[Condition, float]]:
        """Every condition that can be drawn, with its probability (the entries' order kept)."""
        pool = {c.name: c for c in LASTMILE} | {c.name: c for c in self.conditions}
        weighted: dict[str, tuple[Condition, float]] = {}
        for entry in self.draws:
            if entry.condition is not None:
                if entry.condition not in pool:
                    raise SpecError(f"augment: unknown condition {entry.condition!r}; known: {sorted(pool)}")
                conds = [pool[entry.condition]]
            elif entry.sweep is not None:
                conds = expand_sweep(entry.sweep, pool)
            else:
                conds = expand_repost(entry.repost, pool)
            for cond in conds:
                prior = weighted.get(cond.name, (cond, 0.0))[1]
                weighted[cond.name] = (cond, prior + entry.weight / len(conds))
        total = sum(w for _, w in weighted.values())
        return [(c, w / total) for c, w in weighted.values()]

    def resolved_profile(self) -> Profile:
        """The named or given profile, made deterministic (one encoder thread: the same bytes in every process)."""
        if isinstance(self.profile, Profile):
            return self.profile.with_determinism(True)
        if self.profile not in PROFILES:
            raise SpecError(f"augment: unknown profile {self.profile!r}; known: {sorted(PROFILES)}")
        return PROFILES[self.profile].with_determinism(True)


def load_augment_config(path: str | Path) -> AugmentConfig:
    """An augmentation file (YAML or JSON; an empty one is the default); :class:`SpecError` naming the file and the
    key when it is malformed."""
    cfg = load_spec_file(path, AugmentConfig, "augmentation file", lambda raw: raw or {})
    cfg.expanded()
    cfg.resolved_profile()
    return cfg


@dataclass(frozen=True)
class Draw:
    """What one key drew: the condition, and the key itself."""

    condition: Condition
    seed: int
    index: int
    epoch: int


def draw_key(seed: int, index: int, epoch: int) -> np.random.Generator:
    """The generator of one draw: numpy's ``SeedSequence`` of the three integers, the same in every process."""
    for name, value in (("seed", seed), ("index", index), ("epoch", epoch)):
        if not isinstance(value, int | np.integer) or value < 0:
            raise SpecError(f"augment: {name} is a non-negative integer, got {value!r}")
    return np.random.default_rng(np.random.SeedSequence([int(seed), int(index), int(epoch)]))


class Augmenter:
    """Draws a condition per ``(seed, index, epoch)`` and produces that variant of a clip, or its frames."""

    def __init__(self, config: AugmentConfig | None = None, seed: int = 0, limits: Limits | None = None) -> None:
        self.config = config or AugmentConfig()
        self.seed = seed
        self.profile = self.config.resolved_profile()
        self.limits = limits or Limits()
        expanded = self.config.expanded()
        self.conditions: tuple[Condition, ...] = tuple(c for c, _ in expanded)
        self.probabilities = np.array([p for _, p in expanded])

    def draw(self, index: int, epoch: int = 0) -> Draw:
        """The condition for sample ``index`` in ``epoch``: depends on ``(seed, index, epoch)`` only."""
        rng = draw_key(self.seed, index, epoch)
        pick = int(rng.choice(len(self.conditions), p=self.probabilities))
        return Draw(self.conditions[pick], self.seed, index, epoch)

    def variant(self, clip: bytes | str | Path, index: int, epoch: int = 0) -> tuple[Variant, Draw]:
        """The drawn condition's variant of ``clip`` (bytes, or a file's path): an MP4 and its provenance."""
        drawn = self.draw(index, epoch)
        result = Engine(self.profile, self.limits, concurrent=False).run(_bytes(clip, self.limits), [drawn.condition])
        return result.variants[drawn.condition.name], drawn

    def frames(
        self, clip: bytes | str | Path, index: int, epoch: int = 0, sampling: SamplingPolicy | None = None
    ) -> tuple[np.ndarray, Draw]:
        """The drawn variant's frames, ``[N, H, W, 3]`` uint8 RGB: sampled as ``sampling`` (or the config's) says,
        else every frame at the variant's own size."""
        variant, drawn = self.variant(clip, index, epoch)
        policy = sampling or self.config.sampling
        if policy is None:
            return every_frame(variant.data, self.limits), drawn
        return sample_frames(variant.data, policy, self.limits), drawn


def _bytes(clip: bytes | str | Path, limits: Limits) -> bytes:
    """A clip's bytes; a file over ``limits.max_bytes`` is refused by its size, before it is read."""
    if isinstance(clip, bytes | bytearray | memoryview):
        return bytes(clip)
    size = Path(clip).stat().st_size
    if size > limits.max_bytes:
        raise LimitExceeded(f"{clip} is {size} bytes; the limit is {limits.max_bytes}")
    return Path(clip).read_bytes()
