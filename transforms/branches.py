"""Branches of the prefix tree on their own threads, so one video uses every core: PyAV releases the GIL inside
its codec calls, so an H.264 tail encodes while the VP9 storage encode (and the other tails) run. Measured,
not assumed: ``lastmile bench transforms`` reports ``fanout_core_utilisation``.

Work crosses into a thread through a bounded queue (memory stays bounded) and is only read there. Each
encoder sees the same frames in the same order as without threads, so deterministic output stays
byte-identical. An error on a thread is raised on the calling thread, as the same typed error.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import av

from transforms.nodes import Node

_END = object()


class Worker:
    """Calls ``handle`` on each item put, in order, on a thread of its own behind a bounded queue, then ``done``
    after the last; an error there is raised again on the caller's thread (at its next ``put``, or ``join``)."""

    def __init__(self, name: str, handle: Callable[[Any], None], done: Callable[[], None], depth: int = 4) -> None:
        self.handle, self.done = handle, done
        self.queue: queue.Queue = queue.Queue(maxsize=depth)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"lastmile-{name}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (item := self.queue.get()) is not _END:
            if self.error is None:
                try:
                    self.handle(item)
                except BaseException as exc:  # raised again on the caller's thread
                    self.error = exc
        if self.error is None:
            try:
                self.done()
            except BaseException as exc:
                self.error = exc

    def put(self, item: Any) -> None:
        if self.error is not None:
            self.join()
        self.queue.put(item)

    def join(self) -> None:
        """Wait for every item put (and ``done``); raise the thread's error, if any."""
        self.queue.put(_END)
        self.thread.join()
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        """Stop the thread without waiting for its work (the run failed elsewhere)."""
        if self.thread.is_alive():
            self.error = self.error or RuntimeError("stopped")
            self.queue.put(_END)
            self.thread.join()


class Branch(Node):
    """Runs ``inner`` (and everything below it) on a thread of its own; a drop-in child of any node."""

    def __init__(self, inner: Node, depth: int = 4) -> None:
        super().__init__()
        self.inner, self.kind = inner, inner.kind
        self.worker = Worker(inner.kind, inner.feed, inner.finish, depth)

    def feed(self, frame: av.VideoFrame) -> None:
        self.worker.put(frame)

    def finish(self) -> None:
        self.worker.join()

    def leaves(self) -> int:
        return self.inner.leaves()
