"""What the encoding nodes share (the VP9 storage encode, :mod:`transforms.steps.vp9`, and the H.264 sinks,
:mod:`transforms.steps.h264`): decoding their packets back to frames, for the nodes below them. Encoders are freed
as soon as they are drained, so a later pass (transforms.memory) has their memory.
"""

from __future__ import annotations

from fractions import Fraction

import av

from transforms.nodes import NO_PICT_TYPE


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
