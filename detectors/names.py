"""A detector's name and version as one text, ``NAME`` or ``NAME@VERSION``: split here alone, for the repository's
lookups and the report's and monitor's contenders (light: it imports no card, no model)."""

from __future__ import annotations

from detectors.errors import CardError


def split_key(text: str) -> tuple[str, str | None]:
    """``NAME`` or ``NAME@VERSION`` as its two parts (surrounding spaces dropped). :class:`CardError` for an empty
    name, or an ``@`` with no version after it."""
    name, at, version = text.strip().partition("@")
    if not name or (at and not version):
        raise CardError(f"a detector is NAME or NAME@VERSION, got {text!r}")
    return name, version or None
