"""ffmpeg command building shared by the CLI cross-check (:mod:`transforms.ffmpeg_cli`), the floor
(:mod:`transforms.floor`) and the step kinds' CLI equivalents (:mod:`transforms.steps`): the binary, the input
normalised as the engine normalises it, and the options every output shares."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import av
import ffmpeg
import imageio_ffmpeg

from transforms import nodes

# every output: no audio, frames passed through as timed, no encoder or container metadata that varies
COMMON_OUTPUT_OPTIONS: dict[str, object] = {
    "an": None,
    "fps_mode": "passthrough",
    "fflags": "+bitexact",
    "map_metadata": -1,
}


def ffmpeg_exe() -> str:
    """The ffmpeg binary that imageio-ffmpeg ships (libx264 and libvpx-vp9 included)."""
    return imageio_ffmpeg.get_ffmpeg_exe()


@dataclass(frozen=True)
class FrameSize:
    width: int
    height: int


def compile_command(stream: ffmpeg.nodes.OutputStream) -> list[str]:
    """The argument list of one quiet, non-interactive ffmpeg process that writes ``stream``."""
    return stream.compile(cmd=[ffmpeg_exe(), "-nostdin", "-v", "error"], overwrite_output=True)


def source_geometry(src: Path) -> tuple[FrameSize, int]:
    """The upright, even-sized frame size of ``src`` and its display rotation (degrees)."""
    with av.open(str(src)) as container:
        frame = next(container.decode(video=0))
        w, h = (frame.height, frame.width) if frame.rotation % 180 == 90 else (frame.width, frame.height)
        return FrameSize(w // 2 * 2, h // 2 * 2), frame.rotation


def normalized_input(path: str, size: FrameSize, rotation: int) -> ffmpeg.nodes.FilterableStream:
    """``path``'s video as the engine's normaliser makes it: upright, even-sized, yuv420p."""
    # ffmpeg's own autorotation is switched off and the display matrix cleared, so both backends rotate
    # alike (by nodes.rotation_filters) and no output carries a stale rotation.
    stream = ffmpeg.input(path, noautorotate=None, display_rotation=0)["v"]
    for name, args in nodes.rotation_filters(rotation):
        stream = stream.filter(name, args) if args else stream.filter(name)
    return stream.filter("crop", size.width, size.height, 0, 0).filter("format", "yuv420p")
