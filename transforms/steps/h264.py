"""The repost platform's delivery encode: H.264 in MP4, same size and frame rate as its input. It ends every
perturbed condition (its bytes are the variant); inside a repost chain it is decoded again for the steps after it."""

from __future__ import annotations

import io
from collections import Counter
from fractions import Fraction
from pathlib import Path
from typing import Literal

import av
import ffmpeg
from pydantic import Field

from transforms import codecs
from transforms.encoders import Redecoder
from transforms.errors import InvalidVideo
from transforms.ffmpeg_graph import COMMON_OUTPUT_OPTIONS, compile_command
from transforms.memory import encoder_memory
from transforms.nodes import Node, Sink
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


class H264Step(StepSpec):
    """The repost platform's final encode: H.264 in MP4, same size and fps as its input."""

    kind: Literal["h264"] = "h264"
    crf: int = Field(23, ge=0, le=51)
    profile: Literal["baseline", "main", "high"] = "high"


def h264_options(step: H264Step, profile: Profile, encoder: str) -> dict[str, str]:
    """Encoder options for the final H.264 encode (libx264 CRF, or NVENC constant-QP-like CQ)."""
    if encoder == "h264_nvenc":
        return {"rc": "vbr", "cq": str(step.crf), "preset": "p4", "profile": step.profile}
    opts = {
        "crf": str(step.crf),
        "preset": profile.x264_preset,
        "profile": step.profile,
        **codecs.threads_option(profile),
    }
    if profile.deterministic:
        opts.update(codecs.x264_reproducible_options())
    return opts


class H264Sink(Sink):
    """An H.264 encode into an in-memory MP4 (``data`` after ``finish``): the output of the conditions that end
    here, and, inside a repost chain, decoded again for its children (one encode serves both)."""

    kind = "h264"

    def __init__(self, step: H264Step, profile: Profile, rate: Fraction, sessions: Counter[str]) -> None:
        super().__init__()
        self.step, self.profile, self.rate, self.sessions = step, profile, rate, sessions
        self.encoder_name = self.codec = codecs.h264_encoder_name(profile)
        self.buffer = io.BytesIO()
        self.container: av.container.OutputContainer | None = None
        self.stream: av.video.stream.VideoStream | None = None
        self.redecoder = Redecoder("h264")

    def process(self, frame: av.VideoFrame) -> list[av.VideoFrame]:
        if self.stream is None:
            self._open(frame)
        if self.children:
            self.redecoder.remember(frame)
        packets = self.stream.encode(frame)
        out = self._redecode(packets) if self.children else []
        self.container.mux(packets)
        return out

    def _redecode(self, packets: list[av.Packet | None]) -> list[av.VideoFrame]:
        decoder = self.redecoder.decoder
        if decoder.extradata is None and self.stream.codec_context.extradata:  # MP4 packets: avcC, not Annex B
            decoder.extradata = self.stream.codec_context.extradata
        return self.redecoder.decode(packets)

    def _open(self, frame: av.VideoFrame) -> None:
        self.container = av.open(self.buffer, mode="w", format="mp4", options={"fflags": "+bitexact"})
        stream = self.container.add_stream(self.encoder_name, rate=self.rate)
        stream.width, stream.height, stream.pix_fmt = frame.width, frame.height, "yuv420p"
        stream.codec_context.time_base = frame.time_base
        stream.codec_context.thread_count = self.profile.encoder_threads()
        stream.codec_context.flags |= av.codec.context.Flags.bitexact
        stream.options = h264_options(self.step, self.profile, self.encoder_name)
        self.stream = stream
        self.sessions[self.encoder_name] += 1

    def drain(self) -> list[av.VideoFrame]:
        if self.stream is None:
            raise InvalidVideo("no frame reached the H.264 encoder")
        packets = self.stream.encode(None)
        out = self._redecode(packets) + self._redecode([None]) if self.children else []
        self.container.mux(packets)
        self.container.close()
        self.data = self.buffer.getvalue()
        self.stream = self.container = None  # the encoder's buffers freed now (the next pass needs the room)
        self.redecoder.decoder = None
        return out


def h264_command(stream: ffmpeg.nodes.FilterableStream, step: H264Step, profile: Profile, dst: Path) -> list[str]:
    """The ffmpeg process of the delivery encode: ``stream`` encoded to an MP4 at ``dst``."""
    encoder = codecs.h264_encoder_name(profile)
    opts = {"vcodec": encoder, "pix_fmt": "yuv420p", "format": "mp4", **h264_options(step, profile, encoder)}
    opts["profile:v"] = opts.pop("profile")
    return compile_command(stream.output(str(dst), **opts, **COMMON_OUTPUT_OPTIONS))


def _cli(step: H264Step, chain: CliChain) -> CliChain:
    return chain.then(h264_command(chain.stream, step, chain.profile, chain.output))


def _floor(step: H264Step, given: FloorInput) -> list[FloorStep]:
    """A tail at its own size and frame rate, into a file of its own."""
    dst = given.chain.work / f"t{given.index}.mp4"
    return [
        FloorStep(
            f"h264 tail ({given.label})",
            h264_command(given.chain.stream, step, given.chain.profile, dst),
            given.producer,
        )
    ]


def _encoder_bytes(node: Node, profile: Profile) -> int:
    return encoder_memory().encoder_bytes(node.codec, profile, node.pixels)


def _node(step: H264Step, ctx: NodeContext) -> H264Sink:
    return H264Sink(step, ctx.profile, ctx.rate, ctx.sessions)


KIND = StepKind(
    model=H264Step,
    node=_node,
    cli=CliEquivalent(_cli, final=True),
    floor=FloorCost(_floor),
    scheduling=Scheduling(encoder_bytes=_encoder_bytes),
)
