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
