"""Read a container header and enforce the limits before any frame is decoded."""

from __future__ import annotations

import io
from dataclasses import dataclass
from fractions import Fraction

import av

from transforms.errors import InvalidVideo, LimitExceeded, UnsupportedVideo
from transforms.limits import MAX_ENCODED_SIDE, Limits

# Demuxers and codecs that carry still images: valid files, but not videos we transform.
_IMAGE_FORMATS = {"image2", "png_pipe", "jpeg_pipe", "bmp_pipe", "webp_pipe", "tiff_pipe", "gif_pipe", "webp"}
_IMAGE_CODECS = {"png", "bmp", "tiff", "webp", "gif", "jpegls"}
_ANIMATED_CODECS = {"gif", "webp", "apng"}  # image codecs that may carry an animation: a video when they do
_PROBE_OPTIONS = {"probesize": "5000000", "analyzeduration": "5000000"}


@dataclass(frozen=True)
class ProbeInfo:
    """What the header of one input says."""

    container: str
    codec: str
    width: int
    height: int
    fps: Fraction
    duration_s: float
    frames: int
    pix_fmt: str
    has_audio: bool
    bytes: int


def open_input(data: bytes) -> av.container.InputContainer:
    """Open in-memory bytes as a container, mapping every failure to a typed :class:`VideoError`."""
    if not data:
        raise InvalidVideo("empty input: 0 bytes")
    try:
        return av.open(io.BytesIO(data), mode="r", options=_PROBE_OPTIONS)
    except (av.error.InvalidDataError, av.error.EOFError) as exc:
        raise InvalidVideo(f"not a decodable container ({len(data)} bytes): {ffmpeg_says(exc)}") from exc
    except av.error.FFmpegError as exc:
        raise InvalidVideo(f"cannot open input ({len(data)} bytes): {ffmpeg_says(exc)}") from exc


def ffmpeg_says(exc: av.error.FFmpegError) -> str:
    """FFmpeg's words alone: PyAV's text adds its error code as an errno and the file name, here '<none>'."""
    return exc.strerror or str(exc)


def probe(data: bytes, limits: Limits) -> ProbeInfo:
    """Parse the header of ``data`` and check it against ``limits`` without decoding the video.

    Raises :class:`LimitExceeded` (too big), :class:`UnsupportedVideo` (no video stream, a still image, a side
    longer than the encoders take) or :class:`InvalidVideo` (not a container, no usable header).
    """
    if len(data) > limits.max_bytes:
        raise LimitExceeded(f"input is {len(data)} bytes; the limit is {limits.max_bytes}")
    with open_input(data) as container:
        return _inspect(container, limits, len(data))


def _inspect(container: av.container.InputContainer, limits: Limits, size: int) -> ProbeInfo:
    if not container.streams.video:
        kinds = sorted({s.type for s in container.streams}) or ["none"]
        raise UnsupportedVideo(f"no video stream (streams: {', '.join(kinds)})")
    stream = container.streams.video[0]
    fmt = container.format.name.split(",")[0]
    codec = stream.codec_context.name
    looks_still = fmt in _IMAGE_FORMATS or codec in _IMAGE_CODECS or (stream.frames == 1 and stream.duration is None)
    if looks_still and not (codec in _ANIMATED_CODECS and _at_least_two_frames(container, stream)):
        raise UnsupportedVideo(f"a still image ({fmt}/{codec}), not a video")
    width, height = stream.codec_context.width, stream.codec_context.height
    if width <= 0 or height <= 0:
        raise InvalidVideo(f"video stream has no frame size ({width}x{height})")
    if max(width, height) > MAX_ENCODED_SIDE:  # libx264 would refuse it only once the video is decoded
        raise UnsupportedVideo(f"{width}x{height}: a side over {MAX_ENCODED_SIDE} pixels, more than H.264 encodes")
    if width * height > limits.max_pixels:
        raise LimitExceeded(f"{width}x{height} = {width * height} pixels; the limit is {limits.max_pixels}")
    fps = Fraction(stream.average_rate or stream.guessed_rate or 0)
    duration = _duration_s(container, stream)
    if duration > limits.max_duration_s:
        raise LimitExceeded(f"duration {duration:.1f} s; the limit is {limits.max_duration_s:.1f} s")
    frames = stream.frames or (round(duration * fps) if fps else 0)
    if frames > limits.max_frames:
        raise LimitExceeded(f"{frames} frames; the limit is {limits.max_frames}")
    return ProbeInfo(
        container=fmt,
        codec=codec,
        width=width,
        height=height,
        fps=fps,
        duration_s=duration,
        frames=frames,
        pix_fmt=stream.codec_context.pix_fmt or "unknown",
        has_audio=bool(container.streams.audio),
        bytes=size,
    )


def _at_least_two_frames(container: av.container.InputContainer, stream: av.video.stream.VideoStream) -> bool:
    """Whether an image-codec stream holds an animation (decodes at most two frames to find out)."""
    if stream.frames > 1:
        return True
    try:
        for i, _ in enumerate(container.decode(stream)):
            if i >= 1:
                return True
    except av.error.FFmpegError:
        return False
    return False


def _duration_s(container: av.container.InputContainer, stream: av.video.stream.VideoStream) -> float:
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    if container.duration is not None:
        return container.duration / av.time_base
    return 0.0
