"""How the services log: one format, our own lines at the level asked for, and the Kafka client's kept to what an
operator can act on (its warnings and errors, each kind at most once a minute, with a count of those held back)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
CLIENT_LOGGER = "kafka"  # kafka-python: one line per connection attempt, several a second while a broker is down
CLIENT_REPEAT_S = 60.0


class RepeatsQuieted(logging.Filter):
    """Passes a line of ``prefix``'s loggers once per ``every_s`` for each logger and message template (the same
    reconnect failure, whatever its backoff figure); the next one passed says how many it held back. Lines of
    other loggers all pass."""

    def __init__(self, prefix: str, every_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.prefix, self.every_s, self.clock = prefix, every_s, clock
        self._last: dict[tuple[str, str], tuple[float, int]] = {}  # (logger, template) -> (passed at, held since)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != self.prefix and not record.name.startswith(self.prefix + "."):
            return True
        key, now = (record.name, str(record.msg)), self.clock()
        passed_at, held = self._last.get(key, (float("-inf"), 0))
        if now - passed_at < self.every_s:
            self._last[key] = (passed_at, held + 1)
            return False
        self._last[key] = (now, 0)
        if held:
            record.msg = f"{record.msg} [{held} more like this in the last {self.every_s:g} s]"
        return True


def configure_logging(level: str) -> None:
    """``level`` for our lines; the Kafka client's at WARNING or above (all of them at DEBUG), repeats quieted."""
    logging.basicConfig(level=level, format=LOG_FORMAT)
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        logging.getLogger(CLIENT_LOGGER).setLevel(logging.WARNING)
        quiet = RepeatsQuieted(CLIENT_LOGGER, CLIENT_REPEAT_S)
        for handler in logging.getLogger().handlers:
            handler.addFilter(quiet)
