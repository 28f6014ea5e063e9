"""Score events decoded for the store without building a pydantic model per event (the monitor's hot path).

:func:`score_fields` gives a score event's fields as a dict, or raises ``ValueError`` for an event that
:class:`~gateway.core.messages.ScoreEvent` refuses. The fast path parses with orjson (when installed) and takes
only what the model would take with the very same values: a JSON object whose keys are all the model's fields
(an unknown key, which the model ignores, could hold a value its parser refuses, e.g. nested too deeply), the
required ones among them, each value of exactly a type its field holds as is (a str for a str field, a float for
a float one: nothing the model would coerce) and a literal field one of its values. The shapes of event seen
(their keys and their values' types) are remembered, so an event costs a parse and two tuples. Anything else
(not JSON to orjson, another shape, an int for a float) is validated by the model, whose outcome it then is.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from gateway.core.messages import ScoreEvent

try:
    import orjson
except ImportError:
    # not a dependency: without it every event is validated by the model
    orjson = None

# the one constraint of a field that the fast path keeps as is (orjson does)
FINITE = {"allow_inf_nan": False}
# event shapes remembered at most (beyond that a new shape is checked each time it comes)
MAX_SHAPES = 4096
# a score event's fields by name, as the model's instance holds them
Fields = dict[str, Any]


def _accepted(annotation: object) -> tuple[frozenset[type], frozenset[object] | None] | None:
    """The value types a field of ``annotation`` holds as parsed (and, a literal, its values); None if unknown."""
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    args = typing.get_args(annotation) if union else (annotation,)
    kinds, values = set(), None
    for arg in args:
        if arg in (str, float, int, bool, type(None)):
            kinds.add(arg)
        elif typing.get_origin(arg) is typing.Literal and all(type(v) is str for v in typing.get_args(arg)):
            kinds.add(str)
            values = frozenset(typing.get_args(arg)) | ({None} if type(None) in args else set())
        else:
            return None
    return frozenset(kinds), values


def _fields_of(model: type[ScoreEvent]) -> dict[str, tuple[frozenset[type], frozenset[object] | None]]:
    """Each field's accepted types; empty (no fast path) if the model validates beyond its fields' types (a
    float refusing NaN and the infinities excepted: orjson parses neither)."""
    decorators = model.__pydantic_decorators__
    if decorators.field_validators or decorators.model_validators or decorators.validators:
        return {}
    if any(f.default_factory is not None for f in model.model_fields.values()):
        return {}
    if any(getattr(m, "__dict__", None) != FINITE for f in model.model_fields.values() for m in f.metadata):
        return {}
    out = {name: _accepted(f.annotation) for name, f in model.model_fields.items()}
    return {} if None in out.values() else out


FIELDS = _fields_of(ScoreEvent)
REQUIRED = frozenset(name for name, f in ScoreEvent.model_fields.items() if f.is_required())
DEFAULTS = {name: f.default for name, f in ScoreEvent.model_fields.items() if not f.is_required()}
N_FIELDS = len(FIELDS)
# an event's keys and its values' types, in its order
Shape = tuple[tuple[str, ...], tuple[type, ...]]
# -> the literal fields to check, or None: not taken
_shapes: dict[Shape, tuple[str, ...] | None] = {}
# the latest shape seen (one tuple: swapped whole)
_last: tuple[Shape | None, tuple[str, ...] | None] = (None, None)


def _shape(keys: tuple[str, ...], kinds: tuple[type, ...]) -> tuple[str, ...] | None:
    """The literal fields whose values an event of this shape still needs checked; None if the shape is not
    taken as is."""
    if not FIELDS or not REQUIRED.issubset(keys) or not FIELDS.keys() >= set(keys):
        return None
    for key, kind in zip(keys, kinds, strict=True):
        if kind not in FIELDS[key][0]:
            return None
    return tuple(k for k in keys if FIELDS[k][1] is not None)


def fast_fields(value: bytes | None) -> Fields | None:
    """The event's fields (defaults filled in) if the fast path takes it; None if the model must decide."""
    global _last
    if orjson is None:
        return None
    try:
        fields = orjson.loads(value)
    except orjson.JSONDecodeError:
        # None and b"" too
        return None
    if type(fields) is not dict:
        return None
    shape = (tuple(fields), tuple(map(type, fields.values())))
    last = _last
    if shape == last[0]:
        # as the event before (the usual case): no hash of the shape
        literals = last[1]
    else:
        literals = _shapes[shape] if shape in _shapes else _shape(*shape)
        if len(_shapes) < MAX_SHAPES:
            _shapes[shape] = literals
        _last = (shape, literals)
    if literals is None:
        return None
    for key in literals:
        if fields[key] not in FIELDS[key][1]:
            return None
    return fields if len(fields) == N_FIELDS else DEFAULTS | fields


def by_model(value: bytes | None) -> Fields:
    """The event's fields as the model validates them; ``ValueError`` (pydantic's) if it refuses them."""
    return vars(ScoreEvent.model_validate_json(value or b""))


def score_fields(value: bytes | None) -> Fields:
    """A score event's fields, by the fast path or else the model; ``ValueError`` if the model refuses it."""
    fields = fast_fields(value)
    return by_model(value) if fields is None else fields
