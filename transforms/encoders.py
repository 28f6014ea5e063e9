"""The nodes that encode: the VP9 storage encode (decoded again for its children, and replayed for later
passes) and the H.264 sinks (an in-memory MP4; decoded again inside a repost chain). Encoders are freed as soon
as they are drained, so a later pass (transforms.memory) has their memory.
"""

from __future__ import annotations

import hashlib
import io
import time
from collections import Counter
from collections.abc import Iterator
from fractions import Fraction

import av

from transforms import codecs
from transforms.branches import Worker
from transforms.errors import InvalidVideo
from transforms.nodes import NO_PICT_TYPE, Node
from transforms.spec import H264Step, Profile, Vp9Step


class Redecoder:
    """Decodes an encoder's packets back to frames, with the source frames' time base and durations (the codec
    carries neither): what a viewer of the platform sees, fed on down the tree."""

    def __init__(self, codec: str) -> None:
        self.decoder = av.CodecContext.create(codec, "r")
        self.time_base: Fraction | None = None
        self.durations: dict[int, int] = {}  # pts -> the source frame's duration
        self.forget = True  # drop a duration once used; kept when the frames will be decoded again (replay)

    def remember(self, frame: av.VideoFrame) -> None:
        self.time_base = self.time_base or frame.time_base
        self.durations[frame.pts] = frame.duration

    def decode(self, packets: list[av.Packet | None]) -> list[av.VideoFrame]:
        out = []
        for packet in packets:
            for frame in self.decoder.decode(packet):
                frame.time_base = self.time_base
                # the fps filter ends the last frame with its duration
                frame.duration = (self.durations.pop if self.forget else self.durations.get)(frame.pts, 0)
                frame.pict_type = NO_PICT_TYPE
                out.append(frame)
        return out


class Vp9Node(Node):
    """Storage encode to VP9 and decode again, in memory; children see what a viewer of the platform sees.
    When its children run in several passes it keeps the VP9 packets (a few MB) and :meth:`replay` decodes
    them again for each later pass: the same frames, with the same time base and durations. With
    :meth:`decode_apart` the decode (and the filters below it) runs on a thread of its own, beside the encoder,
    as the ffmpeg CLI's decode and filter threads do; the children still see the same frames in the same order."""

    kind = "vp9"

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
            self.encoder = codecs.vp9_encoder(
                self.step, self.profile, frame.width, frame.height, frame.time_base, self.rate
            )
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


class H264Sink(Node):
    """An H.264 encode into an in-memory MP4 (``data`` after ``finish``): the output of the conditions that end
    here, and, inside a repost chain, decoded again for its children (one encode serves both)."""

    kind = "h264"

    def __init__(self, step: H264Step, profile: Profile, rate: Fraction, sessions: Counter[str]) -> None:
        super().__init__()
        self.step, self.profile, self.rate, self.sessions = step, profile, rate, sessions
        self.encoder_name = codecs.h264_encoder_name(profile)
        self.buffer = io.BytesIO()
        self.container: av.container.OutputContainer | None = None
        self.stream: av.video.stream.VideoStream | None = None
        self.data = b""
        self.conditions: list[str] = []
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

    def leaves(self) -> int:
        return (1 if self.conditions else 0) + sum(c.leaves() for c in self.children)

    def _open(self, frame: av.VideoFrame) -> None:
        self.container = av.open(self.buffer, mode="w", format="mp4", options={"fflags": "+bitexact"})
        stream = self.container.add_stream(self.encoder_name, rate=self.rate)
        stream.width, stream.height, stream.pix_fmt = frame.width, frame.height, "yuv420p"
        stream.codec_context.time_base = frame.time_base
        stream.codec_context.thread_count = self.profile.encoder_threads()
        stream.codec_context.flags |= av.codec.context.Flags.bitexact
        stream.options = codecs.h264_options(self.step, self.profile, self.encoder_name)
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

    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()
