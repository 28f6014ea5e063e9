"""Measuring one benchmark job in isolation: wall and CPU seconds, and the peak resident memory of that job's
own process tree.

``ru_maxrss`` cannot give the last: Linux carries a parent's resident size into a child's across fork and exec,
so every job spawned from a fat parent reported the parent's peak (993 MB for every row of one run). Here the
job runs in a freshly spawned process; every 20 ms the parent reads the resident memory of that process and
all its descendants (the ffmpeg CLI's children included; the tree is found again every 200 ms, since that
reads all of /proc) and keeps the largest sum, and the job adds its own ``VmHWM``, the high-water mark of its
post-exec address space, which the sampling cannot miss.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import platform
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PAGE = os.sysconf("SC_PAGE_SIZE")
SAMPLE_S = 0.02  # how often the tree's resident memory is read
RESCAN_S = 0.2  # how often the tree itself is found again (new children: an ffmpeg CLI run lasts seconds)


def cores() -> int:
    """The cores this process may run on (its affinity), which is what a utilisation is measured against."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else mp.cpu_count()


def host() -> dict[str, Any]:
    """The machine a benchmark ran on, as every benchmark's JSON records it: the cores this process may use and the
    Python version."""
    return {"cpus": cores(), "python": platform.python_version()}


def measure(fn: Callable[[], Any]) -> dict[str, float]:
    """Wall and CPU seconds (this process and the children it waited for) of ``fn()``."""
    self0, kids0 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    self1, kids1 = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(
        getattr(b, f) - getattr(a, f) for a, b in ((self0, self1), (kids0, kids1)) for f in ("ru_utime", "ru_stime")
    )
    return {"wall_s": round(wall, 4), "cpu_s": round(cpu, 4)}


def isolated(job: Callable[..., dict[str, float]], *args: Any) -> dict[str, float]:
    """Run ``job(*args)`` in a freshly spawned process; its result plus ``peak_rss_mb`` of its process tree."""
    ctx = mp.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_run, args=(send, job, args))
    process.start()
    send.close()
    peak, tree, rescan_at = 0.0, {process.pid}, 0.0
    while not receive.poll(SAMPLE_S):
        if time.monotonic() >= rescan_at:  # finding the tree reads all of /proc: not on every sample
            tree, rescan_at = descendants(process.pid), time.monotonic() + RESCAN_S
        peak = max(peak, rss_mb(tree))
    result = receive.recv()
    process.join()
    if isinstance(result, BaseException):
        raise result
    result["peak_rss_mb"] = round(max(peak, result.pop("own_peak_mb")), 1)
    return result


def _run(send, job: Callable[..., dict[str, float]], args: tuple) -> None:
    try:
        result = job(*args)
        result["own_peak_mb"] = own_peak_mb()
    except BaseException as exc:  # sent back and raised in the parent
        result = exc
    send.send(result)
    send.close()


def own_peak_mb() -> float:
    """This process's resident high-water mark since its exec (``VmHWM``), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # not Linux: the best there is


def descendants(root: int) -> set[int]:
    """``root`` and every process below it now (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    tree, frontier = {root}, [root]
    while frontier:
        kids = [k for k in children.get(frontier.pop(), []) if k not in tree]
        tree.update(kids)
        frontier += kids
    return tree


def rss_mb(pids: set[int]) -> float:
    """Resident memory of these processes now, in MB (those that have gone count 0)."""
    total = 0
    for pid in pids:
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total * PAGE / 2**20
