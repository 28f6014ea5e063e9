"""The allocator while a computation runs (gateway/monitor/heap.py): freed arrays are reused without being paged
in again, and what is free goes back to the kernel once the computation ends."""

from __future__ import annotations

import resource

import numpy as np
import pytest

from gateway.monitor import heap

ARRAY = 16 * 1024 * 1024  # bytes: the size of a computation's largest arrays at a million videos
LIVE = 6  # arrays alive at once (96 MB: over what glibc keeps freed at the top of its heap by default)
ROUNDS = 4

pytestmark = pytest.mark.skipif(not heap.available(), reason="the allocator settings are glibc's (not this C library)")


def _faults_of_arrays() -> int:
    """Minor page faults of ROUNDS rounds of LIVE arrays, each written whole, then all freed, as a computation's
    temporaries are, one series after another."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for i in range(ROUNDS):
        arrays = [np.empty(ARRAY // 8) for _ in range(LIVE)]
        for a in arrays:
            a.fill(i)
        del arrays, a
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def test_freed_arrays_are_reused_while_computing_and_given_back_after():
    outside = _faults_of_arrays()  # glibc returns freed arrays: every round pages them in again
    with heap.kept_while_computing(1024) as applied:
        assert applied
        inside = _faults_of_arrays()
        keep = np.empty(ARRAY // 8)  # allocated, then freed, inside: held by the allocator until the block ends
        keep.fill(1)
        held = _resident_bytes()
        del keep
        assert _resident_bytes() >= held - ARRAY // 4  # freed, but kept
    assert inside * 2 <= outside  # the first round pages the arrays in, the later ones reuse them
    assert _resident_bytes() <= held - ARRAY // 2  # given back once the computation ended
    assert _faults_of_arrays() * 2 >= outside  # and arrays are mapped afresh again after it


def test_nothing_changes_with_keep_freed_mb_zero():
    outside = _faults_of_arrays()
    with heap.kept_while_computing(0) as applied:
        assert not applied
        assert _faults_of_arrays() * 2 >= outside
