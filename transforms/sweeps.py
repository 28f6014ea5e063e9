"""Conditions declared as data beyond the six: severity sweeps and repost chains, expanded to ordinary named
conditions with their own spec hashes (the engine's prefix tree still shares every common prefix).

- a sweep varies one parameter of one step kind of a base condition over listed values, mildest first:
  ``{base: spatial, step: scale, param: factor, values: [0.75, 0.5, 0.33, 0.25]}`` gives
  ``spatial@scale.factor=0.75`` ... ``spatial@scale.factor=0.25``;
- a repost chain repeats a base condition's steps (a video downloaded and re-uploaded):
  ``{base: full, hops: 3}`` gives ``full^2`` and ``full^3``.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from transforms.errors import SpecError

_STRICT = ConfigDict(extra="forbid", frozen=True)
SWEEP_NAME = re.compile(r"^(?P<base>[^@]+)@(?P<step>[a-z0-9]+)\.(?P<param>[a-z_]+)=(?P<value>[^=]+)$")


class Sweep(BaseModel):
    model_config = _STRICT
    base: str = Field(min_length=1, description="the condition whose step varies")
    step: str = Field(min_length=1, description="the kind of step: scale, fps, vp9, h264, badge, ...")
    param: str = Field(min_length=1, description="the step's field, e.g. factor, fps, crf, height_frac")
    values: list[float] = Field(min_length=1, description="mildest first")


class Repost(BaseModel):
    model_config = _STRICT
    base: str = Field(min_length=1)
    hops: int = Field(ge=2, le=10, description="conditions base^2 .. base^hops")


def value_text(v: float) -> str:
    """A parameter value as it appears in a condition name: ``0.5``, ``23``."""
    return f"{v:g}"


def expand_sweep(sweep: Sweep, pool: dict) -> list:
    """The sweep's conditions, in the listed order of its values."""
    from transforms.spec import STEP_ADAPTER, Condition

    base = pool.get(sweep.base)
    if base is None:
        raise SpecError(f"sweep: unknown base condition {sweep.base!r}; known: {sorted(pool)}")
    if not any(s.kind == sweep.step for s in base.steps):
        raise SpecError(f"sweep: {sweep.base!r} has no {sweep.step!r} step (its steps: {[s.kind for s in base.steps]})")
    out = []
    for v in sweep.values:
        try:
            steps = tuple(
                STEP_ADAPTER.validate_python({**s.model_dump(), sweep.param: v}) if s.kind == sweep.step else s
                for s in base.steps
            )
        except ValidationError as exc:
            raise SpecError(f"sweep {sweep.base}@{sweep.step}.{sweep.param}={v}: {exc.errors()[0]['msg']}") from exc
        name = f"{sweep.base}@{sweep.step}.{sweep.param}={value_text(v)}"
        desc = f"{base.name} with {sweep.step}.{sweep.param} = {value_text(v)}"
        out.append(Condition(name=name, steps=steps, description=desc))
    return out


def expand_repost(repost: Repost, pool: dict) -> list:
    from transforms.spec import Condition

    base = pool.get(repost.base)
    if base is None:
        raise SpecError(f"repost: unknown base condition {repost.base!r}; known: {sorted(pool)}")
    if not base.steps:
        raise SpecError(f"repost: {repost.base!r} has no steps to repeat")
    return [
        Condition(name=f"{base.name}^{h}", steps=base.steps * h, description=f"{base.name}, {h} times over")
        for h in range(2, repost.hops + 1)
    ]


def parse_sweep_name(name: str) -> tuple[str, float] | None:
    """``spatial@scale.factor=0.5`` -> (``spatial@scale.factor``, 0.5); None for any other name."""
    m = SWEEP_NAME.match(name)
    if not m:
        return None
    try:
        return f"{m['base']}@{m['step']}.{m['param']}", float(m["value"])
    except ValueError:
        return None
