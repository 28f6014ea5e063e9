"""Whether the service can take work: the broker and the scorer (the runtime behind the workers) are each up
or down, with the reason and a capped exponential backoff for retries while down.

An unavailable part is never a verdict on a video: while a part is down the gateway keeps its process alive,
stops admitting videos, answers ``/readyz`` with 503 (``/healthz`` stays 200 while its loop runs), exports
``lastmile_runtime_up{component}`` 0, and retries with the backoff until the part answers again.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from prometheus_client import Gauge

from transforms.support.backoff import Backoff

log = logging.getLogger("lastmile.gateway")

COMPONENTS = ("broker", "scorer", "store")
DEFAULT_BACKOFF = Backoff(1.0, 30.0)


@dataclass
class Health:
    gauge: Gauge
    backoff: Backoff = DEFAULT_BACKOFF
    down_since: dict[str, float] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)
    components: tuple[str, ...] = COMPONENTS

    def __post_init__(self) -> None:
        for c in self.components:
            self.gauge.labels(c).set(1)

    def down(self, component: str, reason: str) -> float:
        """Record a failure of ``component``; return how long to wait before the next try."""
        if component not in self.down_since:
            log.warning("%s unavailable: %s", component, reason)
            self.down_since[component] = time.monotonic()
        self.reasons[component] = reason
        self.failures[component] = self.failures.get(component, 0) + 1
        self.gauge.labels(component).set(0)
        return self.backoff.delay(self.failures[component])

    def up(self, component: str) -> None:
        if component in self.down_since:
            log.info("%s available again after %.1f s", component, time.monotonic() - self.down_since[component])
        self.down_since.pop(component, None)
        self.reasons.pop(component, None)
        self.failures.pop(component, None)
        self.gauge.labels(component).set(1)

    @property
    def ok(self) -> bool:
        return not self.down_since
