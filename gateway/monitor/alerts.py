"""The project's alerts as a Prometheus server has them (``GET /api/v1/alerts``), for the live page.

Only the configured server is asked (``MonitorConfig.alerts_from``), within a short timeout and a bounded read,
and at most once every ``ttl_s`` however many pages refresh; only alerts of the project's rules (named
``Lastmile...``, :file:`dashboards/prometheus/lastmile-rules.yaml`) are kept. A server that does not answer
is said on the page, never raised: the page still shows the metrics."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

PREFIX = "Lastmile"  # every alert of the shipped rules
STATES = ("firing", "pending")


@dataclass(frozen=True)
class Alert:
    name: str
    state: str  # firing or pending (its ``for:`` not yet over)
    labels: dict[str, str]
    summary: str = ""

    @property
    def where(self) -> str:
        """The labels that say what fires (detector, condition, pair...), without the name and the severity."""
        return ", ".join(f"{k}={v}" for k, v in sorted(self.labels.items()) if k not in ("alertname", "severity"))


@dataclass(frozen=True)
class Alerts:
    source: str | None  # the Prometheus asked; None: none configured
    alerts: tuple[Alert, ...] = ()
    error: str | None = None  # why the last question got no answer
    at: float | None = None

    @property
    def firing(self) -> tuple[Alert, ...]:
        return tuple(a for a in self.alerts if a.state == "firing")

    @property
    def pending(self) -> tuple[Alert, ...]:
        return tuple(a for a in self.alerts if a.state == "pending")


def parse(body: bytes) -> tuple[Alert, ...]:
    """The project's alerts in an ``/api/v1/alerts`` answer, firing first, then by name; ValueError when the
    answer is not one."""
    doc = json.loads(body)
    if not isinstance(doc, dict) or doc.get("status") != "success":
        raise ValueError("not a successful /api/v1/alerts answer")
    out = []
    for item in doc.get("data", {}).get("alerts", []):
        labels = {str(k): str(v) for k, v in (item.get("labels") or {}).items()}
        name, state = labels.get("alertname", ""), str(item.get("state", ""))
        if name.startswith(PREFIX) and state in STATES:
            summary = str((item.get("annotations") or {}).get("summary", ""))
            out.append(Alert(name, state, labels, summary))
    return tuple(sorted(out, key=lambda a: (STATES.index(a.state), a.name, a.where)))


@dataclass
class AlertSource:
    """Asks ``url`` (a Prometheus server's base URL, or None) for its alerts, keeping an answer ``ttl_s``."""

    url: str | None
    timeout_s: float = 1.0
    max_bytes: int = 1 << 20
    ttl_s: float = 2.0
    clock: Callable[[], float] = time.monotonic
    _last: Alerts | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def current(self) -> Alerts:
        if self.url is None:
            return Alerts(None)
        with self._lock:  # pages served on several threads ask once
            now = self.clock()
            if self._last is None or self._last.at is None or now - self._last.at >= self.ttl_s:
                self._last = self._ask(now)
            return self._last

    def _ask(self, now: float) -> Alerts:
        endpoint = self.url.rstrip("/") + "/api/v1/alerts"
        try:
            with urllib.request.urlopen(endpoint, timeout=self.timeout_s) as reply:
                body = reply.read(self.max_bytes + 1)
            if len(body) > self.max_bytes:
                raise ValueError(f"answer over {self.max_bytes} bytes")
            return Alerts(self.url, parse(body), at=now)
        except (OSError, ValueError, urllib.error.URLError) as exc:
            return Alerts(self.url, error=f"{type(exc).__name__}: {exc}", at=now)
