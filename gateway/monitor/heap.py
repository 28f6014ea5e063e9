"""The C allocator while a computation runs: what the computation frees is kept for its next arrays, and given
back to the kernel once it ends.

A computation at a million videos allocates about 4 GB of numpy arrays of 8-16 MB, one series after another.
glibc maps each afresh (``mmap``) and returns it on free, so every one of them is paged in again: 15-20% of the
computation went to page faults (a million minor faults). For the computation's length the allocator takes
arrays up to ``MMAP_CEILING`` from its heap and keeps up to ``keep_freed_mb`` freed at the top of it
(``mallopt``), then returns what is free (``malloc_trim``) and maps large arrays again, so the monitor's
resident memory after a computation is what it was, and the store's arrays (allocated by the reader, also while
a computation runs) never pin a fragmented heap. Elsewhere than glibc (musl, macOS) nothing changes.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import platform
from collections.abc import Iterator

log = logging.getLogger("lastmile.monitor")
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (malloc.h)
MMAP_CEILING = 32 * 1024 * 1024  # the largest mmap threshold glibc takes on a 64-bit machine
DEFAULT_MMAP_THRESHOLD = 128 * 1024  # glibc's own (malloc.h: M_MMAP_THRESHOLD), and twice it for trimming
MB = 1024 * 1024


def _glibc() -> ctypes.CDLL | None:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None


_LIBC = _glibc()


def available() -> bool:
    """Whether the C library is glibc, whose allocator this module sets."""
    return _LIBC is not None


@contextlib.contextmanager
def kept_while_computing(keep_freed_mb: int) -> Iterator[bool]:
    """Within the block, freed arrays up to ``MMAP_CEILING`` stay in the allocator's heap (up to
    ``keep_freed_mb`` at its top); after it, what is free goes back to the kernel. Yields whether it applied
    (glibc, and ``keep_freed_mb`` > 0)."""
    if _LIBC is None or keep_freed_mb <= 0:
        yield False
        return
    applied = bool(_LIBC.mallopt(M_MMAP_THRESHOLD, MMAP_CEILING)) and bool(
        _LIBC.mallopt(M_TRIM_THRESHOLD, keep_freed_mb * MB)
    )
    try:
        yield applied
    finally:
        _LIBC.mallopt(M_MMAP_THRESHOLD, DEFAULT_MMAP_THRESHOLD)
        _LIBC.mallopt(M_TRIM_THRESHOLD, 2 * DEFAULT_MMAP_THRESHOLD)
        _LIBC.malloc_trim(0)
