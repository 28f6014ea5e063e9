"""The C allocator under the monitor (gateway/monitor/allocator.py): what a computation frees goes back to the
kernel after it, and a computation gives it back. Each measure runs in a fresh process, as the monitor does: in a
test worker that has run other tests, their threads' allocations share the one arena and fragment the heap."""

from __future__ import annotations

import ctypes
import multiprocessing
import resource
from concurrent.futures import ProcessPoolExecutor

import pytest

from gateway.monitor import allocator

pytestmark = pytest.mark.skipif(not allocator.available(), reason="the allocator settings are glibc's")
CHUNK = 64 * 1024  # under glibc's mmap threshold: from the heap, as a computation's arrays come once it has run
CHUNKS = 1600  # 100 MB


def _resident() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def _fragment(libc: ctypes.CDLL) -> int:
    """Fill 100 MB of heap and free all of it but its last chunk, so the freed memory is no longer at the top of
    the heap (where glibc would trim it by itself); returns that last chunk."""
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    chunks = [libc.malloc(CHUNK) for _ in range(CHUNKS)]
    for c in chunks:
        ctypes.memset(c, 1, CHUNK)
    for c in chunks[:-1]:
        libc.free(c)
    return chunks[-1]


def _fresh(job):
    """``job()``'s result, computed in a freshly spawned process."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(job).result(timeout=120)


def _give_back() -> tuple[int, int, int, bool]:
    libc = allocator._LIBC
    before = _resident()
    last = _fragment(libc)
    held = _resident()
    gave = allocator.give_back()
    after = _resident()
    libc.free(last)
    return before, held, after, gave


def test_give_back_returns_freed_heap_memory_to_the_kernel():
    before, held, after, gave = _fresh(_give_back)
    assert held - before > CHUNK * CHUNKS // 2  # freed, but still resident
    assert gave
    assert after < held - CHUNK * CHUNKS // 2  # returned


def _computation() -> tuple[int, int]:
    from prometheus_client import CollectorRegistry

    from gateway.core import catalogue as mc
    from gateway.monitor.config import WindowSettings
    from gateway.monitor.store import Store
    from gateway.monitor.windows import Windows

    store = Store(WindowSettings(), lambda: 1_800_000_000.0)
    windows = Windows(store, store.settings, lambda: 1_800_000_000.0, mc.instrument(mc.MONITOR_COMPUTE_SECONDS,
                      CollectorRegistry()))  # fmt: skip
    last = _fragment(allocator._LIBC)  # as a computation's arrays would leave the heap
    held = _resident()
    windows.refresh()
    after = _resident()
    allocator._LIBC.free(last)
    return held, after


def test_a_computation_gives_back_what_it_freed():
    held, after = _fresh(_computation)
    assert after < held - CHUNK * CHUNKS // 2


def test_the_monitors_threads_share_one_arena():
    assert allocator.one_arena()  # glibc took the setting (M_ARENA_MAX 1)
