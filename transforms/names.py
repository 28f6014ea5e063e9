"""The six LastMile conditions' names, in the order a video is disseminated (RA-Bench): light, for readers that
load no codec (the monitor's page orders its conditions by it); :mod:`transforms.spec` defines the conditions
themselves and holds them to these names, in this order."""

from __future__ import annotations

LASTMILE_NAMES = ("original", "transcode", "spatial", "temporal", "presentation", "full")


def dissemination_order(names: object) -> list[str]:
    """``names`` (any iterable of condition names), the six first in the order of dissemination, then any other
    (a sweep's values, a user's conditions) by name."""
    seen = set(names)  # type: ignore[arg-type]
    return [n for n in LASTMILE_NAMES if n in seen] + sorted(seen - set(LASTMILE_NAMES))
