"""Configuration errors told in one line: the file, the line (or row) the bad key stands on, the key path,
what is wrong and what is allowed there: for the conditions files (``transforms``), the manifests and cards
(``detectors``) and the gateway's and monitor's settings (``gateway``)."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ValidationError


class ConfigError(ValueError):
    """A configuration file, conditions file or manifest that cannot be used as written (the user's to fix)."""


def one_line(text: object, limit: int = 300) -> str:
    """``text`` (an exception's or a tool's message) on one line, white space folded, cut to ``limit`` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def describe(exc: ValidationError, where: str, model: type[BaseModel] | None = None, text: str | None = None) -> str:
    """The first error of ``exc`` as one line: ``where[:line]: key.path: message (allowed: ...)``.

    ``text``, the YAML or JSON the model was read from, gives the line of the key; ``model`` gives, for an
    unknown key, the keys allowed beside it."""
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return describe_error(exc.errors()[0], where, model, text) + more


def describe_error(err: dict, where: str, model: type[BaseModel] | None = None, text: str | None = None) -> str:
    """One error of a :class:`ValidationError` (an item of ``exc.errors()``) as :func:`describe` tells it."""
    loc = tuple(err["loc"])
    line = yaml_line(text, loc) if text else None
    path = ".".join(str(p) for p in loc) or "(top level)"
    allowed = _allowed(err, model, loc)
    head = f"{where}:{line}" if line else where
    return f"{head}: {path}: {err['msg']}{f' ({allowed})' if allowed else ''}"


def yaml_line(text: str, loc: tuple) -> int | None:
    """The 1-based line of the deepest key of ``loc`` that ``text`` (YAML, so JSON too) holds, if any."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            hit = next(((k, v) for k, v in node.value if k.value == str(part)), None)
            if hit is None:
                break
            line, node = hit[0].start_mark.line + 1, hit[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        # anything else (a union's tag in the location): stay on this node
    return line


def _allowed(err: dict, model: type[BaseModel] | None, loc: tuple) -> str:
    ctx = err.get("ctx") or {}
    if "expected" in ctx:
        # pydantic's message already names them for a literal or an enum
        return "" if err["type"] in ("literal_error", "enum") else f"allowed: {ctx['expected']}"
    if "pattern" in ctx:
        # pydantic's message already names the pattern: the value is what a reader needs
        return f"got {str(err.get('input'))[:80]!r}"
    owner = _model_at(model, loc[:-1]) if model is not None else None
    if owner is None:
        return ""
    if err["type"] == "extra_forbidden":
        return "allowed: " + ", ".join(owner.model_fields)
    if err["type"] == "missing":
        return "required: " + ", ".join(n for n, f in owner.model_fields.items() if f.is_required())
    return ""


def _model_at(model: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The model class that holds the keys at ``loc`` (list indices and a union's tag are stepped through)."""
    candidates: list[type[BaseModel]] = [model]
    for part in loc:
        if isinstance(part, int):
            continue
        tagged = [m for m in candidates if _tag_of(m) == part]
        if tagged:
            # a discriminated union: the location names the member by its tag
            candidates = tagged
            continue
        field = next((m.model_fields[part] for m in candidates if part in m.model_fields), None)
        if field is None:
            return None
        candidates = _models_in(field.annotation)
        if not candidates:
            return None
    return candidates[0] if len(candidates) == 1 else None


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is None or origin is Literal:
        return []
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        named = [meta.member_models() for meta in args[1:] if hasattr(meta, "member_models")]
        # a union whose members are registered at run time names them
        args = named[0] if named else args[:1]
    elif origin not in (typing.Union, types.UnionType, list, tuple, set, frozenset, dict):
        return []
    return [m for a in args for m in _models_in(a)]


def _tag_of(model: type[BaseModel]) -> str | None:
    field = model.model_fields.get("kind")
    if field is not None and typing.get_origin(field.annotation) is Literal:
        return str(typing.get_args(field.annotation)[0])
    return None
