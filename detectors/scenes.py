"""Camera-like synthetic footage: a textured world seen through a panning camera, moving objects,
lens blur, a Bayer sensor with demosaicing and noise, encoded to H.264 as a phone would.

It serves as the real anchors of the proxy corpus and as the benchmark's generated clips. It is not
camera footage; it imitates the image-formation steps whose fine-scale statistics detectors key on.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass

import av
import numpy as np
from scipy.ndimage import gaussian_filter, zoom


@dataclass(frozen=True)
class SceneSpec:
    width: int = 192
    height: int = 144
    fps: int = 24
    seconds: float = 3.0
    objects: int = 4
    noise: float = 2.0  # sensor read noise, in 8-bit code values
    pan_px_per_s: float = 30.0
    crf: int = 20  # the phone's encode
    seed: int = 0

    @property
    def frames(self) -> int:
        return max(1, round(self.seconds * self.fps))


def _texture(rng: np.random.Generator, h: int, w: int, octaves: int = 5) -> np.ndarray:
    """Multi-scale colour noise in [0, 1], ``[h, w, 3]``: a cheap stand-in for natural texture."""
    out = np.zeros((h, w, 3), np.float32)
    for o in range(octaves):
        step = 2 ** (octaves - o + 1)
        small = rng.random((h // step + 2, w // step + 2, 3), dtype=np.float32)
        up = zoom(small, (step, step, 1), order=1)[:h, :w]
        out += up / (o + 1.5)
    out -= out.min()
    out /= max(float(out.max()), 1e-6)
    tint = rng.uniform(0.5, 1.0, 3).astype(np.float32)
    return out * tint


def render_frames(spec: SceneSpec) -> Iterator[np.ndarray]:
    """Yield ``spec.frames`` RGB uint8 frames of the scene (the sensor's output, before the phone's encode)."""
    rng = np.random.default_rng(spec.seed)
    h, w = spec.height, spec.width
    margin = int(spec.pan_px_per_s * spec.seconds) + 8
    world = _texture(rng, h + 2 * margin, w + 2 * margin)
    direction = rng.normal(size=2)
    direction /= np.linalg.norm(direction)
    objs = [
        {
            "pos": rng.uniform([0, 0], [h, w]),
            "vel": rng.normal(0, 40, 2),
            "r": rng.uniform(0.08, 0.2) * min(h, w),
            "tex": _texture(rng, h, w, 3),
        }
        for _ in range(spec.objects)
    ]
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    for i in range(spec.frames):
        t = i / spec.fps
        oy, ox = (margin + direction * spec.pan_px_per_s * t + np.sin(t * 3.1) * 1.5).astype(int)
        frame = world[oy : oy + h, ox : ox + w].copy()
        for obj in objs:
            cy, cx = obj["pos"] + obj["vel"] * t
            cy, cx = cy % h, cx % w
            mask = ((yy - cy) ** 2 + (xx - cx) ** 2) < obj["r"] ** 2
            frame[mask] = obj["tex"][mask] * 0.9 + 0.1
        yield _sensor(frame, rng, spec.noise)


def _sensor(rgb: np.ndarray, rng: np.random.Generator, noise: float) -> np.ndarray:
    """Lens blur, an RGGB Bayer mosaic, bilinear demosaicing, shot and read noise, gamma."""
    lin = gaussian_filter(rgb, sigma=(0.7, 0.7, 0))
    h, w = lin.shape[:2]
    mosaic = np.zeros((h, w), np.float32)
    mosaic[0::2, 0::2] = lin[0::2, 0::2, 0]
    mosaic[0::2, 1::2] = lin[0::2, 1::2, 1]
    mosaic[1::2, 0::2] = lin[1::2, 0::2, 1]
    mosaic[1::2, 1::2] = lin[1::2, 1::2, 2]
    mosaic += rng.normal(0, 1, mosaic.shape).astype(np.float32) * np.sqrt(mosaic * 0.0004 + 1e-6)
    out = _demosaic(mosaic)
    out = np.clip(out, 0, 1) ** (1 / 1.8) * 255
    out += rng.normal(0, noise, out.shape).astype(np.float32)
    return np.clip(out, 0, 255).astype(np.uint8)


def _demosaic(m: np.ndarray) -> np.ndarray:
    """Bilinear demosaicing of an RGGB mosaic (the classic camera pipeline's interpolation)."""
    from scipy.ndimage import convolve

    h, w = m.shape
    masks = np.zeros((3, h, w), np.float32)
    masks[0, 0::2, 0::2] = 1
    masks[1, 0::2, 1::2] = 1
    masks[1, 1::2, 0::2] = 1
    masks[2, 1::2, 1::2] = 1
    k_rb = np.array([[0.25, 0.5, 0.25], [0.5, 1, 0.5], [0.25, 0.5, 0.25]], np.float32)
    k_g = np.array([[0, 0.25, 0], [0.25, 1, 0.25], [0, 0.25, 0]], np.float32)
    chans = [convolve(m * masks[c], k_g if c == 1 else k_rb, mode="mirror") for c in range(3)]
    return np.stack(chans, axis=-1)


def encode_h264(frames: Iterator[np.ndarray], fps: int, crf: int = 20, preset: str = "medium") -> bytes:
    """Encode RGB frames to H.264 in MP4, in memory (single-threaded, so bytes depend only on input)."""
    buf = io.BytesIO()
    with av.open(buf, mode="w", format="mp4", options={"fflags": "+bitexact"}) as container:
        stream = None
        for frame in frames:
            if stream is None:
                stream = container.add_stream("libx264", rate=fps)
                stream.width, stream.height, stream.pix_fmt = frame.shape[1], frame.shape[0], "yuv420p"
                stream.codec_context.thread_count = 1
                stream.codec_context.flags |= av.codec.context.Flags.bitexact
                stream.options = {"crf": str(crf), "preset": preset}
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode(None))
    return buf.getvalue()


def render_video(spec: SceneSpec) -> bytes:
    """The scene as a phone's H.264 MP4."""
    return encode_h264(render_frames(spec), spec.fps, spec.crf)
