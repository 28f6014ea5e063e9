"""How counts read in the lines a user sees: ``1 row``, ``2 rows``; never ``1 rows``."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, in the plural (``plural``, else ``noun + "s"``) unless ``n`` is 1."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
