"""The streaming stages of the engine. Each node takes frames, emits frames to its children, and flushes.

A node's ``seconds`` is its own work only (children are timed separately), so per-step timings add up. Here are
the kinds of node every step kind builds on (a filter graph, a sink that writes a variant) and the normaliser at
the root; each step kind's own node lives with its kind (:mod:`transforms.steps`).
"""

from __future__ import annotations

import hashlib
import time
from fractions import Fraction

import av
import av.filter

NO_PICT_TYPE = av.video.frame.PictureType.NONE


class Node:
    """A stage in the prefix tree of steps."""

    kind = "node"
    codec: str | None = None  # the encoder the node runs, for the variant's codec chain; None: it encodes nothing

    def __init__(self) -> None:
        self.children: list[Node] = []
        self.seconds = 0.0
        self.frames_in = 0
        self.pixels = 0  # of the frames this node takes (planned from the header; for the memory estimate)
        self.passes: list[list[int]] = []  # indices into ``children``, one list per pass (transforms.memory)

    def feed(self, frame: av.VideoFrame) -> None:
        t0 = time.perf_counter()
        self.frames_in += 1
        out = self.process(frame)
        self.seconds += time.perf_counter() - t0
        self._emit(out)

    def finish(self) -> None:
        t0 = time.perf_counter()
        out = self.drain()
        self.seconds += time.perf_counter() - t0
        self._emit(out)
        for child in self.children:
            child.finish()

    def _emit(self, frames: list[av.VideoFrame]) -> None:
        for frame in frames:
            for child in self.children:
                child.feed(frame)

    def process(self, frame: av.VideoFrame) -> list[av.VideoFrame]:
        return [frame]

    def drain(self) -> list[av.VideoFrame]:
        return []

    def leaves(self) -> int:
        return 1 if not self.children else sum(c.leaves() for c in self.children)


class FilterNode(Node):
    """Frames through a libavfilter graph (built on the first frame, when the input size is known)."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.graph: av.filter.Graph | None = None

    def filters(self, frame: av.VideoFrame) -> list[tuple[str, str]]:
        raise NotImplementedError

    def _build(self, frame: av.VideoFrame) -> av.filter.Graph:
        graph = av.filter.Graph()
        node = graph.add_buffer(
            width=frame.width, height=frame.height, format=frame.format.name, time_base=frame.time_base
        )
        for name, args in self.filters(frame):
            nxt = graph.add(name, args)
            node.link_to(nxt)
            node = nxt
        node.link_to(graph.add("buffersink"))
        graph.configure()
        return graph

    def process(self, frame: av.VideoFrame) -> list[av.VideoFrame]:
        if self.graph is None:
            self.graph = self._build(frame)
        self.graph.push(frame)
        return self._pull()

    def drain(self) -> list[av.VideoFrame]:
        if self.graph is None:
            return []
        self.graph.push(None)
        return self._pull()

    def _pull(self) -> list[av.VideoFrame]:
        out = []
        while True:
            try:
                out.append(self.graph.pull())
            except (av.error.BlockingIOError, av.error.EOFError):
                return out


class NormalizeNode(FilterNode):
    """Source frames to upright, even-sized, 8-bit yuv420p; a pass-through when they already are."""

    def __init__(self) -> None:
        super().__init__("normalize")
        self.passthrough: bool | None = None

    def filters(self, frame: av.VideoFrame) -> list[tuple[str, str]]:
        chain = list(rotation_filters(frame.rotation))
        if frame.width % 2 or frame.height % 2:
            chain.append(("crop", "trunc(iw/2)*2:trunc(ih/2)*2:0:0"))
        if frame.format.name != "yuv420p":
            chain.append(("format", "yuv420p"))
        return chain

    def process(self, frame: av.VideoFrame) -> list[av.VideoFrame]:
        if self.passthrough is None:
            self.passthrough = not self.filters(frame)
        frame.pict_type = NO_PICT_TYPE  # never let the source's I-frames force encoder keyframes
        return [frame] if self.passthrough else super().process(frame)

    def drain(self) -> list[av.VideoFrame]:
        return [] if self.passthrough else super().drain()


def rotation_filters(rotation: int) -> tuple[tuple[str, str], ...]:
    """Filters that make a frame with display rotation ``rotation`` (degrees, counter-clockwise) upright."""
    angle = rotation % 360
    if angle == 90:
        return (("transpose", "cclock"),)
    if angle == 270:
        return (("transpose", "clock"),)
    if angle == 180:
        return (("hflip", ""), ("vflip", ""))
    return ()


def fps_text(fps: float) -> str:
    """A frame rate as ffmpeg reads it, exact for integers and NTSC-style rates."""
    frac = Fraction(fps).limit_denominator(1001)
    return str(frac.numerator) if frac.denominator == 1 else f"{frac.numerator}/{frac.denominator}"


class Sink(Node):
    """A node that writes a variant: the conditions that end here (``conditions``) get its bytes (``data``, after
    ``finish``)."""

    def __init__(self) -> None:
        super().__init__()
        self.data = b""
        self.conditions: list[str] = []

    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def leaves(self) -> int:
        return (1 if self.conditions else 0) + sum(c.leaves() for c in self.children)


def copy_frame(frame: av.VideoFrame) -> av.VideoFrame:
    """A frame of our own to re-time: the tree hands the same frame object to every sibling branch."""
    out = av.VideoFrame.from_ndarray(frame.to_ndarray(), format=frame.format.name)
    out.pts, out.time_base, out.duration = frame.pts, frame.time_base, frame.duration
    return out
