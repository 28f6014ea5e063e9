"""Requests in flight to one chat server, bounded across every process of a host: ``n`` lock files, one a slot.

A gateway's worker processes (and the threads of each) share a detector's ``max_concurrency``: a request holds
one slot, an exclusive ``flock`` on its own open file (flock locks belong to the open file, so two threads of one
process exclude each other as two processes do), and gives it back when it ends; the kernel frees the slots of a
process that dies. The files live in a private folder of the user's (``$XDG_RUNTIME_DIR``, else the temporary
directory), named by a hash of the endpoint and the model.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import random
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from detectors.errors import RuntimeUnavailable

POLL_S = (0.005, 0.05)  # the shortest and longest pause between two looks for a free slot


def slots_root() -> Path:
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    return Path(base) / f"lastmile-chat-slots-{os.getuid()}"


class Slots:
    """At most ``n`` holders of ``key``'s slots at once on this host."""

    def __init__(self, key: str, n: int, root: Path | None = None) -> None:
        self.n = n
        root = root or slots_root()
        self.folder = root / hashlib.sha256(key.encode()).hexdigest()[:16]
        for folder in (root, self.folder):
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            _private(folder)

    @contextmanager
    def hold(self, timeout_s: float) -> Iterator[int]:
        """Hold a free slot (its index) while inside; :class:`RuntimeUnavailable` if none frees in ``timeout_s``."""
        deadline, pause = time.monotonic() + timeout_s, POLL_S[0]
        while True:
            fd, slot = self._take()
            if fd is not None:
                break
            if time.monotonic() > deadline:
                raise RuntimeUnavailable(f"no request slot of {self.n} came free in {timeout_s:g} s")
            time.sleep(pause)
            pause = min(pause * 2, POLL_S[1])
        try:
            yield slot
        finally:
            os.close(fd)  # closing the file frees its lock

    def _take(self) -> tuple[int | None, int]:
        # (O_NOFOLLOW: a slot planted as a link to another file is refused, not locked)
        for slot in random.sample(range(self.n), self.n):
            fd = os.open(self.folder / f"{slot}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return fd, slot
        return None, -1


def _private(folder: Path) -> None:
    """Refuse a slots folder another user could hold slots in: a link, or not this user's; one of this user's
    that others may enter is closed to them."""
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise RuntimeUnavailable(f"{folder}: not a folder of this user's (slots of requests in flight)")
    if st.st_mode & 0o077:
        os.chmod(folder, 0o700)
