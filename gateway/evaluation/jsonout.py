"""The evaluation's JSON files (``report.json``, ``comparison.json``): strict JSON, which has no NaN or Infinity
(Python's ``json`` writes them as bare tokens that other parsers refuse), so an undefined value is ``null``; numpy
values are written as plain numbers."""

from __future__ import annotations

import json
import math

import numpy as np


def dumps(obj: object) -> str:
    """``obj`` as indented, strict JSON: a non-finite float anywhere in it is ``null``."""
    return json.dumps(_finite(obj), indent=2, allow_nan=False)


def _finite(obj: object) -> object:
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    if isinstance(obj, str | int | bool) or obj is None:
        return obj
    raise TypeError(f"not JSON: {type(obj).__name__}")
