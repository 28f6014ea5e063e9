"""What librdkafka says of itself, for one client: from its statistics (``stats_cb``) the group's join state and
each partition's next fetch offset and end; from its error callback a reply over the receive limit, a fatal error."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field

log = logging.getLogger("lastmile.bus")
# librdkafka's _BAD_MSG for a reply over receive.message.max.bytes
OVERSIZE_REPLY = "Invalid response size"


@dataclass(frozen=True)
class PartitionState:
    # the next offset it fetches (-1001: not known yet)
    next_offset: int
    # its last stable offset (a read-committed consumer's end) as last fetched (-1001: never answered)
    end: int


@dataclass
class ClientHealth:
    # the group's join state is steady, no rebalance under way (None: not reported)
    steady: bool | None = None
    # statistics reports taken so far
    reports: int = 0
    partitions: dict[tuple[str, int], PartitionState] = field(default_factory=dict)
    # time.monotonic() of the latest reply refused as over the receive limit
    last_oversize: float = float("-inf")
    # a fatal error: the client can do nothing more (the producer makes a new one)
    fatal: str | None = None

    def on_stats(self, text: str) -> None:
        try:
            stats = json.loads(text)
        except ValueError:
            return
        self.reports += 1
        if (group := stats.get("cgrp")) is not None:
            self.steady = group.get("state") == "up" and group.get("join_state") == "steady"
        self.partitions = {
            (topic, int(p)): PartitionState(d.get("next_offset", -1001), d.get("ls_offset", -1001))
            for topic, t in (stats.get("topics") or {}).items()
            for p, d in (t.get("partitions") or {}).items()
            if p != "-1" and d.get("desired")
        }

    def on_error(self, error: object) -> None:
        """An error librdkafka reports apart from any call: noted where it matters, logged at DEBUG."""
        name, text = error.name(), error.str()
        if OVERSIZE_REPLY in text:
            self.last_oversize = time.monotonic()
        if error.fatal() or name in ("PRODUCER_FENCED", "_FENCED"):
            self.fatal = f"{name}: {text}"
        log.debug("librdkafka: %s: %s", name, text)
