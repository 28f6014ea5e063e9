"""Branches of the prefix tree on their own threads, so one video uses every core: PyAV releases the GIL inside
its codec calls, so an H.264 tail encodes while the VP9 storage encode (and the other tails) run. Measured,
not assumed: ``lastmile bench transforms`` reports ``fanout_core_utilisation``.

Frames cross into a branch through a bounded queue (memory stays bounded) and are only read there. Each
encoder sees the same frames in the same order as without threads, so deterministic output stays
byte-identical. An error in a branch is raised on the calling thread, as the same typed error.
"""

from __future__ import annotations

import queue
import threading

import av

from transforms.nodes import Node

_END = object()


class Branch(Node):
    """Runs ``inner`` (and everything below it) on a thread of its own; a drop-in child of any node."""

    def __init__(self, inner: Node, depth: int = 4) -> None:
        super().__init__()
        self.inner, self.kind = inner, inner.kind
        self.queue: queue.Queue = queue.Queue(maxsize=depth)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"lastmile-{inner.kind}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (frame := self.queue.get()) is not _END:
            if self.error is None:
                try:
                    self.inner.feed(frame)
                except BaseException as exc:  # raised again on the caller's thread
                    self.error = exc
        if self.error is None:
            try:
                self.inner.finish()
            except BaseException as exc:
                self.error = exc

    def feed(self, frame: av.VideoFrame) -> None:
        if self.error is not None:
            self._stop_and_raise()
        self.queue.put(frame)

    def finish(self) -> None:
        self.queue.put(_END)
        self.thread.join()
        if self.error is not None:
            raise self.error

    def _stop_and_raise(self) -> None:
        self.queue.put(_END)
        self.thread.join()
        raise self.error

    def close(self) -> None:
        """Stop the thread without waiting for its work (the run failed elsewhere)."""
        if self.thread.is_alive():
            self.error = self.error or RuntimeError("stopped")
            self.queue.put(_END)
            self.thread.join()

    def leaves(self) -> int:
        return self.inner.leaves()
