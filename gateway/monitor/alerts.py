"""The project's alerts as a Prometheus server has them (``GET /api/v1/alerts``), for the live page.

Only the configured server is asked (``MonitorConfig.alerts_from``), with a deadline for the whole answer and a
bounded read, at most once every ``ttl_s`` however many pages refresh, and never while a page waits: a page gets
the latest answer at once while a thread of its own asks again. Only alerts of the project's rules (named
``Lastmile...``, :file:`dashboards/prometheus/lastmile-rules.yaml`) are kept. Whatever the server answers, or
fails to, is said on the page, never raised: the page still shows the metrics."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

# every alert of the shipped rules
PREFIX = "Lastmile"
STATES = ("firing", "pending")
CHUNK = 64 * 1024


@dataclass(frozen=True)
class Alert:
    name: str
    # firing or pending (its ``for:`` not yet over)
    state: str
    labels: dict[str, str]
    summary: str = ""

    @property
    def where(self) -> str:
        """The labels that say what fires (detector, condition, pair...), without the name and the severity."""
        return ", ".join(f"{k}={v}" for k, v in sorted(self.labels.items()) if k not in ("alertname", "severity"))


@dataclass(frozen=True)
class Alerts:
    # the Prometheus asked; None: none configured
    source: str | None
    alerts: tuple[Alert, ...] = ()
    # why the last question got no answer
    error: str | None = None
    # when it was asked; None: not yet
    at: float | None = None

    @property
    def firing(self) -> tuple[Alert, ...]:
        return tuple(a for a in self.alerts if a.state == "firing")

    @property
    def pending(self) -> tuple[Alert, ...]:
        return tuple(a for a in self.alerts if a.state == "pending")


def parse(body: bytes) -> tuple[Alert, ...]:
    """The project's alerts in an ``/api/v1/alerts`` answer, firing first, then by name; ValueError when the
    answer is not one (whatever its shape)."""
    try:
        doc = json.loads(body)
        items = doc["data"]["alerts"] if doc.get("status") == "success" else None
        if not isinstance(items, list):
            raise ValueError("not a successful /api/v1/alerts answer")
        out = []
        for item in items:
            labels = {str(k): str(v) for k, v in dict(item.get("labels") or {}).items()}
            name, state = labels.get("alertname", ""), str(item.get("state", ""))
            if name.startswith(PREFIX) and state in STATES:
                summary = str(dict(item.get("annotations") or {}).get("summary", ""))
                out.append(Alert(name, state, labels, summary))
    except (AttributeError, KeyError, TypeError, RecursionError) as exc:
        raise ValueError(f"not an /api/v1/alerts answer: {type(exc).__name__}") from None
    return tuple(sorted(out, key=lambda a: (STATES.index(a.state), a.name, a.where)))


def read_bounded(url: str, deadline_s: float, max_bytes: int, clock: Callable[[], float] = time.monotonic) -> bytes:
    """The body at ``url``, all of it within ``deadline_s`` (not per socket read) and at most ``max_bytes``."""
    end = clock() + deadline_s
    parts, size = [], 0
    with urllib.request.urlopen(url, timeout=deadline_s) as reply:
        while chunk := reply.read(CHUNK):
            size += len(chunk)
            if size > max_bytes:
                raise ValueError(f"answer over {max_bytes} bytes")
            if clock() > end:
                raise TimeoutError(f"no whole answer within {deadline_s:g} s")
            parts.append(chunk)
    return b"".join(parts)


@dataclass
class AlertSource:
    """Asks ``url`` (a Prometheus server's base URL, or None) for its alerts, keeping an answer ``ttl_s``."""

    url: str | None
    deadline_s: float = 1.0
    max_bytes: int = 1 << 20
    ttl_s: float = 2.0
    clock: Callable[[], float] = time.monotonic
    _last: Alerts | None = field(default=None, init=False)
    _asking: bool = field(default=False, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def current(self, wait: bool = False) -> Alerts:
        """The latest answer; one older than ``ttl_s`` is asked again on a thread of its own (``wait``: here,
        and returned), so a page never waits on Prometheus but for the first answer's deadline."""
        if self.url is None:
            return Alerts(None)
        with self._lock:
            last, now = self._last, self.clock()
            stale = last is None or last.at is None or now - last.at >= self.ttl_s
            ask = stale and not self._asking
            self._asking = self._asking or ask
        if ask and (wait or last is None):
            # the first answer (or a caller that asks to wait): within the deadline
            self._refresh()
            return self._last
        if ask:
            threading.Thread(target=self._refresh, daemon=True, name="lastmile-alerts").start()
        return last if last is not None else Alerts(self.url, error="asking", at=None)

    def _refresh(self) -> None:
        answer = self.ask()
        with self._lock:
            self._last, self._asking = answer, False

    def ask(self) -> Alerts:
        """One question to the server, every failure an answer that says why."""
        now = self.clock()
        endpoint = self.url.rstrip("/") + "/api/v1/alerts"
        try:
            return Alerts(self.url, parse(read_bounded(endpoint, self.deadline_s, self.max_bytes)), at=now)
        except Exception as exc:
            return Alerts(self.url, error=f"{type(exc).__name__}: {exc}", at=now)
