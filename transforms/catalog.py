"""The conditions a run uses: the six LastMile conditions, plus a conditions file's own conditions, severity
sweeps and repost chains (:mod:`transforms.sweeps`), resolved by one function every command and service calls.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from transforms.errors import SpecError
from transforms.spec import LASTMILE, Condition, Profile
from transforms.support.config_errors import describe, one_line
from transforms.sweeps import Repost, Sweep, expand_repost, expand_sweep

M = TypeVar("M", bound=BaseModel)


class ConditionFile(BaseModel):
    """The schema of a ``--conditions-file``: conditions, severity sweeps, repost chains, and optionally a
    profile (:mod:`transforms.sweeps`)."""

    model_config = ConfigDict(extra="forbid")
    conditions: list[Condition] = []
    sweeps: list[Sweep] = []
    reposts: list[Repost] = []
    profile: Profile | None = None

    def expanded(self) -> list[Condition]:
        """The file's conditions, then every sweep's and repost chain's, as named conditions."""
        pool = {c.name: c for c in LASTMILE} | {c.name: c for c in self.conditions}
        out = list(self.conditions)
        for sweep in self.sweeps:
            out += expand_sweep(sweep, pool)
        for repost in self.reposts:
            out += expand_repost(repost, pool)
        return out


def load_spec_file(
    path: str | Path, model: type[M], what: str, shape: Callable[[object], object] = lambda raw: raw
) -> M:
    """``model`` read from a YAML or JSON file (``shape`` applied to what it holds first); :class:`SpecError`
    naming the file, and the key and line where it does not validate."""
    path = Path(path)
    try:
        text = path.read_text()
        raw = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise SpecError(f"cannot read {what} {path}: {one_line(exc)}") from exc
    try:
        return model.model_validate(shape(raw))
    except ValidationError as exc:
        raise SpecError(f"invalid {what}: " + describe(exc, str(path), model, text)) from exc


def load_conditions_file(path: str | Path) -> ConditionFile:
    """Read conditions (and optionally a profile) from YAML or JSON; raise :class:`SpecError` if malformed."""
    # a bare list is the conditions alone
    parsed = load_spec_file(
        path, ConditionFile, "conditions file", lambda raw: {"conditions": raw} if isinstance(raw, list) else raw
    )
    _check_unique([c.name for c in parsed.expanded()])
    return parsed


def select_conditions(names: str | list[str], extra: list[Condition] | None = None) -> tuple[Condition, ...]:
    """Resolve ``"all"`` or a comma-separated list of names against LASTMILE plus ``extra``.

    ``all`` is the six LastMile conditions, then ``extra``'s new ones in their order; a condition of ``extra``
    with a LastMile name replaces it in place; a named list keeps its order.
    """
    pool = {c.name: c for c in LASTMILE}
    pool.update({c.name: c for c in extra or []})
    wanted = names.split(",") if isinstance(names, str) else list(names)
    wanted = [n.strip() for n in wanted if n.strip()]
    if not wanted:  # `--conditions ''` would decode every video for no result
        raise SpecError(f"no condition named; name some (known: {sorted(pool)}) or `all`")
    if wanted == ["all"]:
        return tuple(pool.values())
    unknown = [n for n in wanted if n not in pool]
    if unknown:
        raise SpecError(f"unknown condition(s) {unknown}; known: {sorted(pool)}")
    _check_unique(wanted)
    return tuple(pool[n] for n in wanted)


def resolve_conditions(
    names: str | list[str] = "all", conditions_file: str | Path | None = None
) -> tuple[tuple[Condition, ...], Profile | None]:
    """The one condition resolver of every command and service: ``(conditions, the file's profile or None)``.

    Reads ``conditions_file`` if given and resolves ``names`` against LASTMILE plus its conditions as
    :func:`select_conditions` defines.
    """
    if conditions_file is None:
        return select_conditions(names), None
    parsed = load_conditions_file(conditions_file)
    return select_conditions(names, parsed.expanded()), parsed.profile


def _check_unique(names: list[str]) -> None:
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise SpecError(f"duplicate condition name(s): {dupes}")
