"""How a champion-vs-challenger pair is written, ``CHAMPION:CHALLENGER`` with each side ``DETECTOR`` or
``DETECTOR@VERSION``: one reading for the report's ``--compare`` and the monitor's."""

from __future__ import annotations

from collections.abc import Iterable


class PairError(ValueError):
    """A pair that is not ``CHAMPION:CHALLENGER``, compares a detector with itself, or is given twice."""


def split_pair(text: str) -> tuple[str, str]:
    """``CHAMPION:CHALLENGER`` as its two sides (surrounding spaces dropped); each side non-empty and distinct."""
    champion, sep, challenger = (part.strip() for part in text.partition(":"))
    if not (sep and champion and challenger) or ":" in challenger:
        raise PairError(f"a comparison is CHAMPION:CHALLENGER, got {text!r}")
    for side in (champion, challenger):
        name, at, version = side.partition("@")
        if not name or (at and not version):
            raise PairError(f"a contender is DETECTOR or DETECTOR@VERSION, got {side!r} in {text!r}")
    if champion == challenger:
        raise PairError(f"a comparison needs two contenders, got {champion!r} on both sides")
    return champion, challenger


def distinct_pairs(pairs: Iterable[tuple[str, str]]) -> None:
    """Raise :class:`PairError` where a (champion, challenger) pair comes twice (its series would clash)."""
    seen: set[tuple[str, str]] = set()
    for pair in pairs:
        if pair in seen:
            raise PairError(f"the comparison {pair[0]}:{pair[1]} is given twice")
        seen.add(pair)
