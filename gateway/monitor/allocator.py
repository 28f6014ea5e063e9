"""The C allocator under the monitor (glibc; with another C library nothing changes).

A computation at a million videos allocates and frees about 4 GB of numpy arrays of 1-16 MB on a thread of its
own. glibc gives such a thread an arena of its own, made of 64 MB heaps, and keeps inside them what is freed: in
``lastmile bench monitor`` at a million videos the monitor's resident memory stayed 200 MB higher after its first
computation than before it, and a restarted monitor's computation peaked 241 MB above its store. So the monitor's
threads share the main arena (``M_ARENA_MAX`` 1, set before its threads start; their mallocs are few and large,
so they seldom wait for each other), and after each computation what is free goes back to the kernel
(``malloc_trim``). In process at a million videos, on a thread as in the monitor: peak 710 -> 661 MB, after a
computation 661 -> 497 MB, the computation as fast (1.5-1.7 s either way).
"""

from __future__ import annotations

import ctypes
import platform

# mallopt's parameter (malloc.h)
M_ARENA_MAX = -8


def _glibc() -> ctypes.CDLL | None:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    return libc


_LIBC = _glibc()


def available() -> bool:
    """Whether the C library is glibc, whose allocator this module sets."""
    return _LIBC is not None


def one_arena() -> bool:
    """Threads that have not allocated yet share the main arena from now on (process-wide, and for good: arenas
    that threads made before stay theirs, so it is set as a monitor is made, before its threads start); whether
    it applied (glibc)."""
    return _LIBC is not None and bool(_LIBC.mallopt(M_ARENA_MAX, 1))


def give_back() -> bool:
    """Return the allocator's free memory to the kernel; whether any was (glibc)."""
    return _LIBC is not None and bool(_LIBC.malloc_trim(0))
