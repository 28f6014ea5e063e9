"""The platform's storage encode: VP9 at constant quality, then decoded again, in memory; everything after it sees
what a viewer of the platform sees. Shared by every perturbed LastMile condition, so the engine runs it once per
input, keeps its packets when its children run in several passes, and the floor encodes it once."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from fractions import Fraction
from typing import Literal

import av
import ffmpeg
from pydantic import Field

from transforms import codecs
from transforms.branches import Worker
from transforms.encoders import Redecoder
from transforms.ffmpeg_graph import COMMON_OUTPUT_OPTIONS, compile_command
from transforms.memory import encoder_memory
from transforms.nodes import Node
from transforms.profile import Profile
from transforms.steps.kind import (
    CliChain,
    CliEquivalent,
    FloorCost,
    FloorInput,
    FloorStep,
    NodeContext,
    Scheduling,
    StepKind,
    StepSpec,
)

FLOOR_FILE = "vp9.webm"  # the floor's storage encode, in its work folder


class Vp9Step(StepSpec):
    """Platform storage encode to VP9 at constant quality, then decode (YouTube-style storage)."""

    kind: Literal["vp9"] = "vp9"
    crf: int = Field(32, ge=0, le=63)
    bitrate: int = Field(0, ge=0, description="b:v; 0 with crf means constant quality")


def vp9_encoder(
    step: Vp9Step, profile: Profile, width: int, height: int, time_base: Fraction, rate: Fraction
) -> av.video.codeccontext.VideoCodecContext:
    """A libvpx-vp9 encoder at constant quality (``crf`` with ``b:v 0``), configured by ``profile``."""
    enc = av.CodecContext.create("libvpx-vp9", "w")
    enc.width, enc.height, enc.pix_fmt = width, height, "yuv420p"
    enc.time_base, enc.framerate = time_base, rate
    enc.bit_rate = step.bitrate
    enc.thread_count = profile.encoder_threads()
    enc.options = vp9_options(step, profile)
    return enc


def vp9_options(step: Vp9Step, profile: Profile) -> dict[str, str]:
    """libvpx-vp9 private options for ``step`` under ``profile`` (shared with the ffmpeg CLI equivalent)."""
    return {
        "crf": str(step.crf),
        "deadline": profile.vp9_deadline,
        "cpu-used": str(profile.vp9_cpu_used),
        "row-mt": "0" if profile.deterministic else "1",
        **codecs.threads_option(profile),
    }


class Vp9Node(Node):
    """Storage encode to VP9 and decode again, in memory; children see what a viewer of the platform sees.
    When its children run in several passes it keeps the VP9 packets (a few MB) and :meth:`replay` decodes
    them again for each later pass: the same frames, with the same time base and durations. With
    :meth:`decode_apart` the decode (and the filters below it) runs on a thread of its own, beside the encoder,
    as the ffmpeg CLI's decode and filter threads do; the children still see the same frames in the same order."""

    kind = "vp9"
    codec = "libvpx-vp9"

    def __init__(self, step: Vp9Step, profile: Profile, rate: Fraction, sessions: Counter[str]) -> None:
        super().__init__()
        self.step, self.profile, self.rate, self.sessions = step, profile, rate, sessions
        self.encoder: av.video.codeccontext.VideoCodecContext | None = None
        self.redecoder = Redecoder("vp9")
        self.bytes = 0
        self.kept: list[av.Packet] | None = None  # the packets, when a later pass will replay them
        self.decoder_thread: Worker | None = None
        self.decode_seconds = 0.0  # on the decoder thread; added to ``seconds`` when it ends

    def keep_packets(self) -> None:
        self.kept = []
        self.redecoder.forget = False  # the replay needs each frame's duration again

    def process(self, frame: av.VideoFrame) -> list[av.VideoFrame]:
        self.redecoder.remember(frame)
        if self.encoder is None:
            self.encoder = vp9_encoder(self.step, self.profile, frame.width, frame.height, frame.time_base, self.rate)
            self.sessions["libvpx-vp9"] += 1
        return self._decode(self.encoder.encode(frame))

    def decode_apart(self) -> Worker:
        """Decode on a thread of its own from now on (until drained); the caller closes it after a failure."""
        self.decoder_thread = Worker("vp9-decode", self._decode_and_emit, lambda: None)
        return self.decoder_thread

    def drain(self) -> list[av.VideoFrame]:
        if self.encoder is None:
            return []
        last, self.encoder = self.encoder.encode(None), None  # freed now: the tails and the next pass need the room
        out = self._decode(last) + self._decode([None])
        if self.decoder_thread is not None:
            self.decoder_thread.join()  # every frame has reached the children before they finish
            self.decoder_thread, self.seconds = None, self.seconds + self.decode_seconds
        self.redecoder.decoder = None
        return out

    def _decode(self, packets: list[av.Packet | None]) -> list[av.VideoFrame]:
        self.bytes += sum(p.size for p in packets if p is not None)
        if self.kept is not None:
            self.kept.extend(p for p in packets if p is not None)
        if self.decoder_thread is not None:
            self.decoder_thread.put(packets)
            return []
        return self.redecoder.decode(packets)

    def _decode_and_emit(self, packets: list[av.Packet | None]) -> None:
        t0 = time.perf_counter()
        frames = self.redecoder.decode(packets)
        self.decode_seconds += time.perf_counter() - t0
        self._emit(frames)

    def replay(self) -> Iterator[av.VideoFrame]:
        """The decoded frames once more, from the kept packets (their decode time counts as this node's)."""
        redecoder = Redecoder("vp9")
        redecoder.time_base, redecoder.durations = self.redecoder.time_base, dict(self.redecoder.durations)
        for packet in [*(self.kept or []), None]:
            t0 = time.perf_counter()
            frames = redecoder.decode([packet])
            self.seconds += time.perf_counter() - t0
            yield from frames


def vp9_command(stream: ffmpeg.nodes.FilterableStream, step: Vp9Step, profile: Profile) -> list[str]:
    """The ffmpeg process of the storage encode: ``stream`` encoded to WebM on stdout."""
    opts = {"vcodec": "libvpx-vp9", "b:v": step.bitrate, "format": "webm", **vp9_options(step, profile)}
    return compile_command(stream.output("pipe:", **opts, **COMMON_OUTPUT_OPTIONS))


def _cli(step: Vp9Step, chain: CliChain) -> CliChain:
    """A process of its own; the next one decodes its WebM from the pipe."""
    next_stream = ffmpeg.input("pipe:", format="webm", noautorotate=None)
    return chain.then(vp9_command(chain.stream, step, chain.profile), next_stream)


def _floor(step: Vp9Step, given: FloorInput) -> list[FloorStep]:
    """The encode, written to a file (the steps after it read it), and one decode of that file."""
    stored = str(given.chain.work / FLOOR_FILE)
    consumer = vp9_command(given.chain.stream, step, given.chain.profile)
    last = len(consumer) - 1 - consumer[::-1].index("pipe:")  # the output (the input is a pipe: too)
    encode = FloorStep("vp9 encode", [*consumer[:last], stored, *consumer[last + 1 :]], given.producer)
    return [encode, FloorStep("vp9 decode", compile_command(ffmpeg.input(stored).output("-", format="null")))]


def _encoder_bytes(node: Node, profile: Profile) -> int:
    return encoder_memory().encoder_bytes("vp9", profile, node.pixels)


def _node(step: Vp9Step, ctx: NodeContext) -> Vp9Node:
    return Vp9Node(step, ctx.profile, ctx.rate, ctx.sessions)


KIND = StepKind(
    model=Vp9Step,
    node=_node,
    cli=CliEquivalent(_cli),
    floor=FloorCost(_floor, storage_file=FLOOR_FILE),
    scheduling=Scheduling(encoder_bytes=_encoder_bytes, replayable=True),
)
