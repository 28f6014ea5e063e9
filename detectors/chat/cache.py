"""Chat replies kept on disk, so that a resumed or repeated run does not pay for the same request twice.

A reply is kept under the sha256 of the frames sent (which follow from the variant's sha256 and the sampling)
and of the request's own hash (:func:`detectors.chat.prompts.request_sha256`: the model, the prompt template,
the sampling and every setting that changes a reply), one JSON file a reply, written whole or not at all
(several processes share a cache). Only completions are kept, never a failure. The folder: :func:`cache_root`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from pathlib import Path

from detectors.http import REPLY_BYTES


def cache_root() -> Path:
    """``$LASTMILE_CHAT_CACHE``; else ``chat`` in the project's cache folder (``$LASTMILE_CACHE``, as the chart sets
    it to its pod's /tmp), else in the user's (``$XDG_CACHE_HOME/lastmile``, ``~/.cache/lastmile``)."""
    if os.environ.get("LASTMILE_CHAT_CACHE"):
        return Path(os.environ["LASTMILE_CHAT_CACHE"])
    if os.environ.get("LASTMILE_CACHE"):
        return Path(os.environ["LASTMILE_CACHE"]) / "chat"
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "lastmile" / "chat"


def cache_key(request_sha256: str, frames: bytes) -> str:
    return hashlib.sha256(request_sha256.encode() + b"\0" + hashlib.sha256(frames).digest()).hexdigest()


class ReplyCache:
    def __init__(self, root: Path | None = None) -> None:
        self.root = root or cache_root()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        """The reply kept under ``key``; None when there is none, or it cannot be read (then it is asked again)."""
        try:
            with self._path(key).open("rb") as f:
                data = f.read(REPLY_BYTES + 1)
            reply = json.loads(data) if len(data) <= REPLY_BYTES else None
        except (OSError, ValueError):
            return None
        return reply if isinstance(reply, dict) else None

    def put(self, key: str, reply: dict) -> None:
        """Keep ``reply`` (a cache that cannot be written costs a request next time, never a run)."""
        path = self._path(key)
        tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            tmp.write_text(json.dumps(reply))
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
