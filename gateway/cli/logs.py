"""How the services log: one format, our own lines at the level asked for, and the Kafka client's kept to what an
operator can act on (its warnings and errors, each kind at most once a minute, with a count of those held back)."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
CLIENT_LOGGERS = ("kafka", "librdkafka")  # kafka-python's and librdkafka's (gateway.bus.librdkafka.config.LOGGER):
# one line per connection attempt, several a second while a broker is down
CLIENT_REPEAT_S = 60.0
MAX_KINDS = 1000  # kinds of line remembered; past it the memory starts afresh
FIGURES = re.compile(r"\d+(?:\.\d+)?")


class ClientLines(logging.Filter):
    """A handler's filter for ``prefix``'s loggers: a line below ``level`` is dropped, and each kind of line (its
    logger, level and template, figures aside, and what its arguments are) passes once per ``every_s``, the next
    one passed saying how many were held back. Lines of other loggers all pass."""

    def __init__(self, prefix: str, level: int, every_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.prefix, self.level, self.every_s, self.clock = prefix, level, every_s, clock
        self._last: dict[tuple, tuple[float, int]] = {}  # kind -> (passed at, held since)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != self.prefix and not record.name.startswith(self.prefix + "."):
            return True
        if record.levelno < self.level:
            return False
        key, now = _kind(record), self.clock()
        passed_at, held = self._last.get(key, (float("-inf"), 0))
        if now - passed_at < self.every_s:
            self._last[key] = (passed_at, held + 1)
            return False
        if len(self._last) >= MAX_KINDS:
            self._last.clear()
        self._last[key] = (now, 0)
        if held:
            record.msg = f"{record.msg} [{held} more like this held back since it was last shown]"
        return True


def _kind(record: logging.LogRecord) -> tuple:
    """What makes two lines the same kind: a node or host named in the arguments counts, a backoff figure not."""
    args = record.args if isinstance(record.args, tuple) else ()
    if record.name == "librdkafka":  # confluent-kafka logs ("%s [%s] %s", facility, client, text): text's figures
        args = tuple(FIGURES.sub("#", a) if isinstance(a, str) else a for a in args)  # (ms, ports) vary per line
    shape = tuple(a if isinstance(a, int | str) and not isinstance(a, bool) else type(a).__name__ for a in args)
    return record.name, record.levelno, FIGURES.sub("#", str(record.msg)), shape


def configure_logging(level: str) -> None:
    """``level`` for our lines; the Kafka clients' at WARNING or above (and not below ``level``; all of them at
    DEBUG), repeats quieted."""
    logging.basicConfig(level=level, format=LOG_FORMAT)
    root = logging.getLogger().getEffectiveLevel()
    if root > logging.DEBUG:
        for client in CLIENT_LOGGERS:
            logging.getLogger(client).setLevel(logging.WARNING)
            for handler in logging.getLogger().handlers:
                handler.addFilter(ClientLines(client, max(logging.WARNING, root), CLIENT_REPEAT_S))
