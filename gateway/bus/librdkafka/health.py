"""What librdkafka says of itself, kept for health and the stall watch: its statistics (``stats_cb``: the group's
join state, each broker's state, each partition's fetch state and offsets) and its errors (``error_cb``: every
broker down, a reply over the receive limit, refused credentials). Both callbacks are served by the client's own
poll, on the caller's thread; nothing here reads a log line."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field

log = logging.getLogger("lastmile.bus")
OVERSIZE_REPLY = "Invalid response size"  # librdkafka's _BAD_MSG for a reply over receive.message.max.bytes


@dataclass(frozen=True)
class PartitionState:
    fetch_state: str  # "active", "offset-query", "stopped", ...
    next_offset: int  # the next offset it fetches (-1001: not known yet)
    # the partition's last stable offset (its end for a read-committed consumer) as last fetched; -1001: never
    end: int
    lag: int  # consumer lag as librdkafka counts it (-1: unknown)


@dataclass
class ClientHealth:
    """The latest of librdkafka's statistics and errors for one client."""

    steady: bool | None = None  # the group's join state is steady, no rebalance under way (None: not reported)
    reports: int = 0  # statistics reports taken so far
    brokers_up: int | None = None  # brokers in state UP at the last statistics (None: none reported yet)
    partitions: dict[tuple[str, int], PartitionState] = field(default_factory=dict)
    last_oversize: float = float("-inf")  # time.monotonic() of the latest reply refused as over the limit
    all_down_since: float | None = None  # every broker down since then (librdkafka's _ALL_BROKERS_DOWN)
    last_error: str | None = None  # the latest error librdkafka reported, for readiness's reasons
    fatal: str | None = None  # a fatal error: the client can do nothing more (the producer makes a new one)

    def on_stats(self, text: str) -> None:
        try:
            stats = json.loads(text)
        except ValueError:
            return
        self.reports += 1
        group = stats.get("cgrp")
        if group is not None:
            self.steady = group.get("state") == "up" and group.get("join_state") == "steady"
        brokers = [b for b in (stats.get("brokers") or {}).values() if b.get("nodeid", -1) >= 0]
        self.brokers_up = sum(b.get("state") == "UP" for b in brokers)
        if self.brokers_up:
            self.all_down_since = None
        parts: dict[tuple[str, int], PartitionState] = {}
        for topic, t in (stats.get("topics") or {}).items():
            for p, d in (t.get("partitions") or {}).items():
                if p == "-1" or not d.get("desired"):
                    continue
                parts[topic, int(p)] = PartitionState(
                    d.get("fetch_state", ""),
                    d.get("next_offset", -1001),
                    d.get("ls_offset", -1001),
                    d.get("consumer_lag", -1),
                )
        self.partitions = parts

    def on_error(self, error: object) -> None:
        """An error librdkafka reports apart from any call (``error_cb``): noted, and logged once per kind."""
        name, text = error.name(), error.str()
        if OVERSIZE_REPLY in text:
            self.last_oversize = time.monotonic()
        if name == "_ALL_BROKERS_DOWN":
            self.all_down_since = self.all_down_since or time.monotonic()
        self.last_error = f"{name}: {text}"
        if error.fatal() or name in ("PRODUCER_FENCED", "_FENCED"):
            self.fatal = self.last_error
        log.debug("librdkafka: %s", self.last_error)
