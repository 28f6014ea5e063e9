"""The same conditions through the ffmpeg command line (ffmpeg-python + imageio-ffmpeg's static ffmpeg).

One command per condition: a VP9 storage encode piped into one ffmpeg whose filter graph holds the rest
of the chain. It is the cross-check of the in-memory engine and the baseline of ``lastmile bench``; it
needs temporary files (an MP4 cannot be read from or written to a pipe), which is part of its cost.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import av
import ffmpeg
import imageio_ffmpeg
from PIL import Image

from transforms import badge, codecs, nodes
from transforms.errors import InvalidVideo, SpecError
from transforms.spec import BadgeStep, Condition, FpsStep, H264Step, Profile, ScaleStep, Step, Vp9Step

CLI_KINDS = frozenset({"vp9", "scale", "fps", "badge", "h264"})


def ffmpeg_exe() -> str:
    """The ffmpeg binary that imageio-ffmpeg ships (libx264 and libvpx-vp9 included)."""
    return imageio_ffmpeg.get_ffmpeg_exe()


@dataclass(frozen=True)
class _Size:
    width: int
    height: int


def run_condition(data: bytes, condition: Condition, profile: Profile) -> bytes:
    """Produce ``condition`` from ``data`` with the ffmpeg CLI; return the MP4 bytes."""
    if not condition.steps:
        return data
    with tempfile.TemporaryDirectory(prefix="lastmile-ffmpeg-") as tmp:
        work = Path(tmp)
        src = work / "input"
        src.write_bytes(data)
        return _run(src, condition, profile, work)


def commands(src: Path, condition: Condition, profile: Profile, work: Path) -> list[list[str]]:
    """The argument lists of the processes for ``condition`` (piped into each other in order)."""
    kinds = [s.kind for s in condition.steps]
    if set(kinds) - CLI_KINDS or "h264" in kinds[:-1]:
        raise SpecError(
            f"condition {condition.name!r}: the ffmpeg CLI cross-check covers {sorted(CLI_KINDS)} with H.264 last "
            "(the LastMile conditions and their sweeps); temporal edits and repost chains run in the engine only"
        )
    size, rotation = _source_geometry(src)
    steps = list(condition.steps)
    cmds, stream, first = [], _normalized_input(str(src), size, rotation), True
    while steps:
        step = steps.pop(0)
        if isinstance(step, Vp9Step):
            cmds.append(_vp9_cmd(stream, step, profile, autorotate=first))
            stream, first = ffmpeg.input("pipe:", format="webm", noautorotate=None), False
        elif isinstance(step, H264Step):
            cmds.append(_h264_cmd(stream, step, profile, work / "out.mp4", autorotate=first))
        else:
            stream, size = _filter(stream, step, size, work)
    return cmds


def _run(src: Path, condition: Condition, profile: Profile, work: Path) -> bytes:
    cmds = commands(src, condition, profile, work)
    procs: list[subprocess.Popen[bytes]] = []
    for i, cmd in enumerate(cmds):
        stdin = procs[-1].stdout if procs else subprocess.DEVNULL
        stdout = subprocess.PIPE if i < len(cmds) - 1 else subprocess.DEVNULL
        procs.append(subprocess.Popen(cmd, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE))
        if i:
            procs[-2].stdout.close()  # the next process owns the pipe now
    errors = [(p.wait(), p.stderr.read().decode(errors="replace")[-2000:]) for p in reversed(procs)]
    for code, err in errors:
        if code != 0:
            raise InvalidVideo(f"ffmpeg failed ({code}): {err.strip()}")
    return (work / "out.mp4").read_bytes()


def _source_geometry(src: Path) -> tuple[_Size, int]:
    with av.open(str(src)) as container:
        frame = next(container.decode(video=0))
        w, h = (frame.height, frame.width) if frame.rotation % 180 == 90 else (frame.width, frame.height)
        return _Size(w // 2 * 2, h // 2 * 2), frame.rotation


def _normalized_input(path: str, size: _Size, rotation: int) -> ffmpeg.nodes.FilterableStream:
    # ffmpeg's own autorotation is switched off and the display matrix cleared, so both backends rotate
    # alike (by nodes.rotation_filters) and no output carries a stale rotation.
    stream = ffmpeg.input(path, noautorotate=None, display_rotation=0)["v"]
    for name, args in nodes.rotation_filters(rotation):
        stream = stream.filter(name, args) if args else stream.filter(name)
    return stream.filter("crop", size.width, size.height, 0, 0).filter("format", "yuv420p")


def _filter(stream, step: Step, size: _Size, work: Path):
    if isinstance(step, ScaleStep):
        w, h = step.output_size(size.width, size.height)
        return stream.filter("scale", w, h, flags=step.flags), _Size(w, h)
    if isinstance(step, FpsStep):
        return stream.filter("fps", fps=nodes.fps_text(step.fps)), size
    if isinstance(step, BadgeStep):
        patch = badge.badge_patch(step, size.width, size.height)
        png = work / f"badge_{size.width}x{size.height}.png"
        Image.fromarray(patch.rgb).save(png)
        return ffmpeg.overlay(stream, ffmpeg.input(str(png)), x=patch.x, y=patch.y), size
    raise AssertionError(f"unexpected step {step.kind}")  # pragma: no cover


def _common(profile: Profile) -> dict[str, object]:
    return {"an": None, "fps_mode": "passthrough", "fflags": "+bitexact", "map_metadata": -1}


def _vp9_cmd(stream, step: Vp9Step, profile: Profile, autorotate: bool) -> list[str]:
    opts = {
        "vcodec": "libvpx-vp9",
        "b:v": step.bitrate,
        "format": "webm",
        **codecs.vp9_options(step, profile),
    }
    out = stream.output("pipe:", **opts, **_common(profile))
    return out.compile(cmd=[ffmpeg_exe(), "-nostdin", "-v", "error"], overwrite_output=True)


def _h264_cmd(stream, step: H264Step, profile: Profile, dst: Path, autorotate: bool) -> list[str]:
    encoder = codecs.h264_encoder_name(profile)
    opts = {
        "vcodec": encoder,
        "pix_fmt": "yuv420p",
        "format": "mp4",
        **codecs.h264_options(step, profile, encoder),
    }
    opts["profile:v"] = opts.pop("profile")
    out = stream.output(str(dst), **opts, **_common(profile))
    return out.compile(cmd=[ffmpeg_exe(), "-nostdin", "-v", "error"], overwrite_output=True)
