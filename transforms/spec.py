"""Condition specifications as data: steps, conditions, profiles and their stable hashes.

A *condition* is a named, ordered list of *steps*, each of a kind registered in :mod:`transforms.steps`; a
*profile* (:mod:`transforms.profile`) says how fast (and how faithfully) the encoders run. Both are pydantic
models, loadable from YAML or JSON, and both go into :func:`spec_hash`, which every output carries as provenance.
The six LastMile conditions of RA-Bench (arXiv 2608.14391, §4.3.3 and §B) are :data:`LASTMILE`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from transforms.names import LASTMILE_NAMES
from transforms.profile import PROFILES, Profile
from transforms.steps.badge import BadgeStep
from transforms.steps.fps import FpsStep
from transforms.steps.h264 import H264Step
from transforms.steps.kind import StepSpec
from transforms.steps.registry import STEPS, RegisteredStep
from transforms.steps.reorder import ReorderStep
from transforms.steps.scale import ScaleStep
from transforms.steps.speed import SpeedStep
from transforms.steps.trim import TrimStep
from transforms.steps.vp9 import Vp9Step

__all__ = [  # the step models and the profiles are defined with their kinds (transforms.steps), and read here
    "LASTMILE",
    "PROFILES",
    "STEP_ADAPTER",
    "BadgeStep",
    "Condition",
    "FpsStep",
    "H264Step",
    "Profile",
    "ReorderStep",
    "ScaleStep",
    "SpeedStep",
    "Step",
    "TrimStep",
    "Vp9Step",
    "canonical_json",
    "spec_hash",
]

_FROZEN = ConfigDict(extra="forbid", frozen=True)

Step = Annotated[StepSpec, RegisteredStep(STEPS)]
"""A step of any registered kind (:mod:`transforms.steps.registry`), told apart by its ``kind``."""


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
if tuple(c.name for c in LASTMILE) != LASTMILE_NAMES:  # (the names' one owner is transforms/names.py)
    raise ImportError("transforms.spec: the LastMile conditions differ from transforms.names.LASTMILE_NAMES")


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
