"""The LastMile engine: one input's bytes in, one variant per condition out, all in memory.

The input is decoded once. Conditions are planned as a prefix tree of steps, so a step shared by several
conditions (the VP9 storage encode, for all five perturbed LastMile conditions) runs once per input.
Frames stream through the tree: nothing holds the whole decoded video.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import av
from pydantic import BaseModel, ConfigDict

from transforms.errors import InvalidVideo
from transforms.limits import Limits
from transforms.nodes import Node, NormalizeNode, Sink
from transforms.passes import PassRunner, count_passes, schedule
from transforms.probe import ProbeInfo, ffmpeg_says, open_input, probe
from transforms.spec import PROFILES, Condition, Profile, canonical_json, spec_hash
from transforms.steps.kind import NodeContext
from transforms.steps.registry import STEPS

_NO_LIMITS = Limits(max_bytes=1 << 62, max_pixels=1 << 62, max_duration_s=1e12, max_frames=1 << 62)


class StepTiming(BaseModel):
    model_config = ConfigDict(frozen=True)
    kind: str
    seconds: float
    shared_by: int  # how many variants this (shared) step's time served


class VariantMeta(BaseModel):
    """What one output is, and where it came from."""

    model_config = ConfigDict(frozen=True)
    condition: str
    spec_hash: str
    profile: str
    input_sha256: str
    codec_chain: list[str]
    width: int
    height: int
    fps: float
    frames: int
    duration_s: float
    bytes: int
    sha256: str
    steps: list[StepTiming]


@dataclass(frozen=True)
class Variant:
    condition: str
    data: bytes
    meta: VariantMeta


@dataclass
class EngineResult:
    """All variants of one input, the source's header, and how many encoder sessions were opened."""

    source: ProbeInfo
    input_sha256: str
    variants: dict[str, Variant]
    encoder_sessions: Counter[str] = field(default_factory=Counter)
    decode_seconds: float = 0.0
    passes: int = 1  # decodes that fed the tree: the input's, plus VP9 replays (transforms.memory)
    planned_encoder_mb: float = 0.0  # the estimated peak of encoders open at once, as planned


class Engine:
    """Produces condition variants of videos under one profile and one set of limits."""

    def __init__(self, profile: Profile | None = None, limits: Limits | None = None, concurrent: bool = True) -> None:
        self.profile = profile or PROFILES["fidelity"]
        self.limits = limits or Limits()
        self.concurrent = concurrent  # each encoder's branch on its own thread (transforms.branches)

    def run(self, data: bytes, conditions: Sequence[Condition]) -> EngineResult:
        """Decode ``data`` once and produce every condition in ``conditions``.

        Raises a :class:`transforms.errors.VideoError` subclass for bad input, before heavy work where
        the header already tells (bytes, pixels, duration, frames), else while decoding.
        """
        info = probe(data, self.limits)
        digest = hashlib.sha256(data).hexdigest()
        sessions: Counter[str] = Counter()
        root, sinks = self._plan(conditions, info, sessions)
        planned = schedule(root, self.profile, self.limits.max_encoder_mb * 2**20)
        runner = PassRunner(self.concurrent)
        decode_s = runner.run(root, lambda head: self._stream(data, info, head)) if sinks else 0.0
        variants = {c.name: self._original(c, data, info, digest) for c in conditions if not c.steps}
        for path, sink in sinks:
            for name in sink.conditions:
                condition = next(c for c in conditions if c.name == name)
                variants[name] = self._variant(condition, sink, path, info, digest)
        ordered = {c.name: variants[c.name] for c in conditions}
        return EngineResult(info, digest, ordered, sessions, decode_s, count_passes(root), round(planned / 2**20, 1))

    # -- planning -------------------------------------------------------------------------------------
    def _plan(
        self, conditions: Sequence[Condition], info: ProbeInfo, sessions: Counter[str]
    ) -> tuple[Node, list[tuple[list[Node], Sink]]]:
        """Build the prefix tree of steps, each node made by its step's kind (transforms.steps); return its root
        and, per leaf, the path of nodes to it. Each node learns the pixels of the frames it will take (from the
        header), for the memory estimate."""
        root = NormalizeNode()
        root.pixels = info.width * info.height
        index: dict[tuple[int, str], Node] = {}
        sinks: dict[int, tuple[list[Node], Sink]] = {}
        for condition in conditions:
            node, rate, path = root, info.fps or Fraction(25), [root]
            size = (info.width, info.height)
            for step in condition.steps:
                kind = STEPS.get(step.kind)
                key = (id(node), canonical_json(step))
                if key not in index:
                    index[key] = kind.node(step, NodeContext(self.profile, rate, sessions))
                    index[key].pixels = size[0] * size[1]
                    node.children.append(index[key])
                node = index[key]
                path.append(node)
                rate, size = kind.rate_after(step, rate), kind.size_after(step, size)
            if isinstance(node, Sink):
                node.conditions.append(condition.name)
                sinks[id(node)] = (path, node)
        return root, list(sinks.values())

    # -- decoding -------------------------------------------------------------------------------------
    def _stream(self, data: bytes, info: ProbeInfo, root: Node) -> float:
        """Decode the input into the tree, enforcing the limits frame by frame; return decode seconds."""
        decode_s, count = 0.0, 0
        frames = self._decode(data)
        while True:
            t0 = time.perf_counter()
            frame = next(frames, None)
            decode_s += time.perf_counter() - t0
            if frame is None:
                break
            count += 1
            self.limits.check_frame(frame, count)
            root.feed(frame)
        if count == 0:
            raise InvalidVideo("the video stream decoded to no frames")
        if info.frames and count < 0.9 * info.frames and info.frames - count >= 2:
            raise InvalidVideo(f"truncated: the header promises {info.frames} frames, {count} decoded")
        root.finish()
        return decode_s

    def _decode(self, data: bytes) -> Iterator[av.VideoFrame]:
        with open_input(data) as container:
            stream = container.streams.video[0]
            try:
                for packet in container.demux(stream):
                    yield from packet.decode()
            except av.error.FFmpegError as exc:
                raise InvalidVideo(f"decoding failed: {ffmpeg_says(exc)}") from exc

    # -- outputs --------------------------------------------------------------------------------------
    def _original(self, condition: Condition, data: bytes, info: ProbeInfo, digest: str) -> Variant:
        meta = VariantMeta(
            condition=condition.name,
            spec_hash=spec_hash(condition, self.profile),
            profile=self.profile.name,
            input_sha256=digest,
            codec_chain=[info.codec],
            width=info.width,
            height=info.height,
            fps=float(info.fps),
            frames=info.frames,
            duration_s=info.duration_s,
            bytes=len(data),
            sha256=digest,
            steps=[],
        )
        return Variant(condition.name, data, meta)

    def _variant(self, condition: Condition, sink: Sink, path: list[Node], info: ProbeInfo, digest: str) -> Variant:
        out = probe(sink.data, _NO_LIMITS)
        chain = [info.codec] + [n.codec for n in path[1:] if n.codec is not None]
        meta = VariantMeta(
            condition=condition.name,
            spec_hash=spec_hash(condition, self.profile),
            profile=self.profile.name,
            input_sha256=digest,
            codec_chain=chain,
            width=out.width,
            height=out.height,
            fps=float(out.fps),
            frames=out.frames,
            duration_s=out.duration_s,
            bytes=len(sink.data),
            sha256=sink.sha256(),
            steps=[StepTiming(kind=n.kind, seconds=n.seconds, shared_by=n.leaves()) for n in path],
        )
        return Variant(condition.name, sink.data, meta)
