"""The one retry wait of the project: a capped exponential backoff.

A remote runtime between its tries, the gateway while its broker or scorer is down, and the worker pool while its
workers fail to start all wait the same way: ``base_s`` after the first failure in a row, twice as long after each
further one, never more than ``max_s``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    base_s: float
    max_s: float

    def delay(self, failures: int) -> float:
        """The wait before the next try after ``failures`` failures in a row (1 for the first)."""
        return min(self.base_s * 2 ** max(failures - 1, 0), self.max_s)
