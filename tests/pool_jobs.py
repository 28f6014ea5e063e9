"""Jobs for the worker-pool tests (importable by spawned workers)."""

from __future__ import annotations

import os
import signal
import time

_STATE: dict = {}


def init(tag: str, fail: bool = False) -> None:
    if fail:
        raise RuntimeError("this worker cannot start")
    _STATE["tag"] = tag


def job(payload: tuple) -> object:
    kind, arg = payload
    if kind == "double":
        return (_STATE["tag"], arg * 2, os.getpid())
    if kind == "sleep":
        time.sleep(arg)
        return "slept"
    if kind == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "alloc":  # touch `arg` MB and hold them
        block = bytearray(arg * 2**20)
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(3)
        return len(block)
    raise ValueError(f"bad job {payload!r}")


def _touch(mb: int) -> bytearray:
    block = bytearray(mb * 2**20)
    for i in range(0, len(block), 4096):
        block[i] = 1
    return block


def alloc_report(mb: int) -> dict:
    """A benchmark-style job that holds ``mb`` MB for a moment."""
    block = _touch(mb)
    time.sleep(0.3)
    return {"held_mb": len(block) // 2**20}


def child_alloc_report(mb: int) -> dict:
    """A job whose memory is in a child process, as the ffmpeg CLI's is."""
    import subprocess
    import sys

    code = f"from tests.pool_jobs import _touch\nimport time\nb = _touch({mb})\ntime.sleep(1)\n"
    subprocess.run([sys.executable, "-c", code], check=True)
    return {"held_mb": mb}
