"""Real encoded inputs made with the ffmpeg CLI, and how tests compare decoded frames. PyAV is imported only by
the helper that decodes."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import numpy as np

from transforms.ffmpeg_cli import ffmpeg_exe


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
    import av

    with av.open(io.BytesIO(data)) as c:
        return np.stack([f.to_ndarray(format="gray").astype(np.float64) for f in c.decode(video=0)])


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 10 * np.log10(255.0**2 / max(mse, 1e-12))


def ramp_clip(frames: int = 48, w: int = 320, h: int = 180) -> bytes:
    """An H.264 clip made in this process (PyAV: no subprocess, for the unit layer) whose brightness rises frame by
    frame, so that the order of frames sampled from it can be read back."""
    import av

    buf = io.BytesIO()
    with av.open(buf, "w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=24)
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        for i in range(frames):
            image = np.full((h, w, 3), 20 + 4 * i, np.uint8)
            out.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        out.mux(stream.encode())
    return buf.getvalue()
