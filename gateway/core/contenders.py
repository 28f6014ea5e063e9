"""A contender, ``DETECTOR`` or ``DETECTOR@VERSION`` (:class:`Contender`, split by the repository's
:func:`~detectors.names.split_key`, the one place it is split), and how a
champion-vs-challenger pair is written, ``CHAMPION:CHALLENGER``: one reading for the report's ``--compare``, the
monitor's comparisons, the flips, and ``lastmile up``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from detectors.errors import CardError
from detectors.names import split_key


class PairError(ValueError):
    """A pair that is not ``CHAMPION:CHALLENGER``, compares a detector with itself, or is given twice; or a contender
    that is not ``DETECTOR`` or ``DETECTOR@VERSION``."""


class Scored(Protocol):
    detector: str
    detector_version: str


@dataclass(frozen=True)
class Contender:
    """A detector, optionally pinned to one version: ``npr`` or ``npr@1.1.0``."""

    detector: str
    version: str | None = None

    @classmethod
    def parse(cls, text: str) -> Contender:
        """``DETECTOR`` or ``DETECTOR@VERSION`` (surrounding spaces dropped); :class:`PairError` for an empty name or
        an ``@`` with no version after it."""
        try:
            name, version = split_key(text)
        except CardError:
            raise PairError(f"a contender is DETECTOR or DETECTOR@VERSION, got {text!r}") from None
        return cls(name, version)

    def matches(self, row: Scored) -> bool:
        """Whether ``row`` is this contender's: its detector, and its version where one is pinned."""
        return row.detector == self.detector and (self.version is None or row.detector_version == self.version)

    def __str__(self) -> str:
        return self.detector + (f"@{self.version}" if self.version else "")


def split_pair(text: str) -> tuple[str, str]:
    """``CHAMPION:CHALLENGER`` as its two sides (surrounding spaces dropped); each side non-empty and distinct."""
    champion, sep, challenger = (part.strip() for part in text.partition(":"))
    if not (sep and champion and challenger) or ":" in challenger:
        raise PairError(f"a comparison is CHAMPION:CHALLENGER, got {text!r}")
    for side in (champion, challenger):
        try:
            Contender.parse(side)
        except PairError as exc:
            raise PairError(f"{exc} in {text!r}") from exc
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
