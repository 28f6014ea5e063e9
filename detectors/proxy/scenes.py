"""Camera-like synthetic footage: a textured world seen through a moving camera, moving objects,
lens blur, a Bayer sensor with demosaicing and noise, encoded to H.264 as a phone would.

A video is *world* (what is there) x *motion* (how camera and objects move) x *pipeline* (how light becomes
pixels). Real anchors use the camera pipeline; the proxy corpus's pseudo-generators swap the motion and the
pipeline and keep the world and the first frame (I2V-style). It is not camera footage, and not AI video.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import av
import numpy as np
from scipy.ndimage import convolve, gaussian_filter


@dataclass(frozen=True)
class SceneSpec:
    width: int = 192
    height: int = 144
    fps: int = 24
    seconds: float = 3.0
    objects: int = 4
    noise: float = 2.0  # sensor read noise, in 8-bit code values
    pan_px_per_s: float = 30.0
    shake_px: float = 1.5  # hand-held camera shake amplitude
    crf: int = 20  # the phone's encode
    seed: int = 0

    @property
    def frames(self) -> int:
        return max(1, round(self.seconds * self.fps))


def resize(img: np.ndarray, height: int, width: int, method: str = "bilinear") -> np.ndarray:
    """Resize a float ``[h, w, c]`` image per channel with Pillow (much faster than scipy's zoom)."""
    from PIL import Image

    resample = {"bilinear": Image.Resampling.BILINEAR, "bicubic": Image.Resampling.BICUBIC}[method]
    chans = [np.asarray(Image.fromarray(img[..., c]).resize((width, height), resample)) for c in range(img.shape[2])]
    return np.stack(chans, axis=-1).astype(np.float32)


def texture(rng: np.random.Generator, h: int, w: int, octaves: int = 5) -> np.ndarray:
    """Multi-scale colour noise in [0, 1], ``[h, w, 3]``: a cheap stand-in for natural texture."""
    out = np.zeros((h, w, 3), np.float32)
    for o in range(octaves):
        step = 2 ** (octaves - o + 1)
        small = rng.random((h // step + 2, w // step + 2, 3), dtype=np.float32)
        out += resize(small, small.shape[0] * step, small.shape[1] * step)[:h, :w] / (o + 1.5)
    out -= out.min()
    out /= max(float(out.max()), 1e-6)
    return out * rng.uniform(0.5, 1.0, 3).astype(np.float32)


@dataclass
class World:
    """What is in front of the camera: a large background and textured disc objects."""

    background: np.ndarray  # [H + 2m, W + 2m, 3] linear light in [0, 1]
    margin: int
    objects: list[dict] = field(default_factory=list)

    @classmethod
    def random(cls, spec: SceneSpec, rng: np.random.Generator) -> World:
        h, w = spec.height, spec.width
        margin = int(spec.pan_px_per_s * spec.seconds) + 8
        bg = texture(rng, h + 2 * margin, w + 2 * margin)
        objs = [
            {"pos": rng.uniform([0, 0], [h, w]), "r": rng.uniform(0.08, 0.2) * min(h, w), "tex": texture(rng, h, w, 3)}
            for _ in range(spec.objects)
        ]
        return cls(bg, margin, objs)

    @classmethod
    def from_image(cls, rgb: np.ndarray, spec: SceneSpec) -> World:
        """A world made of one picture (a user video's first frame), with room to pan over it."""
        margin = int(spec.pan_px_per_s * spec.seconds) + 8
        h, w = spec.height + 2 * margin, spec.width + 2 * margin
        img = rgb.astype(np.float32) / 255.0
        big = resize(img, h, w)
        return cls(np.clip(big, 0, 1) ** 1.8, margin, [])  # back to (approximately) linear light


@dataclass(frozen=True)
class Motion:
    """How camera and objects move. ``smooth`` = constant velocities, no shake (over-smooth motion)."""

    direction: tuple[float, float]
    velocities: tuple[tuple[float, float], ...]
    shake_phase: tuple[float, float]
    smooth: bool = False
    jitter_seed: int = 0
    jitter_px: float = 0.4  # hand-held micro-jitter per frame (camera and objects); none when smooth

    @classmethod
    def random(cls, rng: np.random.Generator, objects: int, smooth: bool = False) -> Motion:
        d = rng.normal(size=2)
        d /= np.linalg.norm(d)
        vel = tuple(tuple(v) for v in rng.normal(0, 25, (objects, 2)))
        return cls((float(d[0]), float(d[1])), vel, tuple(rng.uniform(0, 6.28, 2)), smooth, int(rng.integers(1 << 31)))


def clean_frames(spec: SceneSpec, world: World, motion: Motion) -> Iterator[np.ndarray]:
    """The light reaching the lens, ``[H, W, 3]`` float32 in [0, 1], frame by frame.

    Camera and objects move with sub-pixel precision (bilinear crop, anti-aliased object edges), so
    smooth motion really is smooth and irregularity comes only from the motion model.
    """
    h, w, m = spec.height, spec.width, world.margin
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    jitter = np.random.default_rng(motion.jitter_seed)
    amp = 0.0 if motion.smooth else motion.jitter_px
    for i in range(spec.frames):
        t = i / spec.fps
        shake = np.zeros(2) if motion.smooth else spec.shake_px * np.sin(t * np.array([3.1, 4.3]) + motion.shake_phase)
        shake = shake + jitter.normal(0, amp, 2)
        origin = np.clip(m + np.array(motion.direction) * spec.pan_px_per_s * t + shake, 0, 2 * m - 1)
        frame = _crop(world.background, origin, h, w)
        for obj, vel in zip(world.objects, motion.velocities, strict=False):
            accel = 0.0 if motion.smooth else 6.0 * np.sin(t * 2.3 + obj["r"])
            cy, cx = obj["pos"] + np.array(vel) * t + accel + jitter.normal(0, amp, 2)
            cover = np.clip(obj["r"] - np.sqrt((yy - cy) ** 2 + (xx - cx) ** 2) + 0.5, 0, 1)[..., None]
            frame = frame * (1 - cover) + (obj["tex"] * 0.9 + 0.1) * cover
        yield frame


def _crop(img: np.ndarray, origin: np.ndarray, h: int, w: int) -> np.ndarray:
    """A bilinear ``h`` x ``w`` crop of ``img`` at the fractional (y, x) ``origin``."""
    y0, x0 = (int(np.floor(v)) for v in origin)
    fy, fx = (float(v - np.floor(v)) for v in origin)
    a = img[y0 : y0 + h + 1, x0 : x0 + w + 1]
    top = a[:h, :w] * (1 - fx) + a[:h, 1 : w + 1] * fx
    bottom = a[1 : h + 1, :w] * (1 - fx) + a[1 : h + 1, 1 : w + 1] * fx
    return (top * (1 - fy) + bottom * fy).astype(np.float32)


Pipeline = Callable[[np.ndarray, int], np.ndarray]  # (linear frame, frame index) -> display uint8 RGB


def camera_pipeline(rng: np.random.Generator, noise: float, shot: float = 0.0004, blur: float = 0.7) -> Pipeline:
    """Lens blur, an RGGB Bayer mosaic, shot noise, bilinear demosaicing, gamma, read noise."""

    def run(lin: np.ndarray, _i: int) -> np.ndarray:
        lin = gaussian_filter(lin, sigma=(blur, blur, 0))
        mosaic = bayer(lin)
        mosaic += rng.standard_normal(mosaic.shape, dtype=np.float32) * np.sqrt(mosaic * shot + 1e-6)
        return to_display(demosaic(mosaic), rng, noise)

    return run


def to_display(lin: np.ndarray, rng: np.random.Generator | None, noise: float) -> np.ndarray:
    out = np.clip(lin, 0, 1) ** (1 / 1.8) * 255
    if rng is not None and noise > 0:
        out += rng.standard_normal(out.shape, dtype=np.float32) * noise
    return np.clip(out, 0, 255).astype(np.uint8)


def bayer(lin: np.ndarray) -> np.ndarray:
    h, w = lin.shape[:2]
    mosaic = np.empty((h, w), np.float32)
    mosaic[0::2, 0::2] = lin[0::2, 0::2, 0]
    mosaic[0::2, 1::2] = lin[0::2, 1::2, 1]
    mosaic[1::2, 0::2] = lin[1::2, 0::2, 1]
    mosaic[1::2, 1::2] = lin[1::2, 1::2, 2]
    return mosaic


_K_RB = np.array([[0.25, 0.5, 0.25], [0.5, 1, 0.5], [0.25, 0.5, 0.25]], np.float32)
_K_G = np.array([[0, 0.25, 0], [0.25, 1, 0.25], [0, 0.25, 0]], np.float32)


def demosaic(m: np.ndarray) -> np.ndarray:
    """Bilinear demosaicing of an RGGB mosaic (the classic camera pipeline's interpolation)."""
    h, w = m.shape
    masks = np.zeros((3, h, w), np.float32)
    masks[0, 0::2, 0::2] = 1
    masks[1, 0::2, 1::2] = 1
    masks[1, 1::2, 0::2] = 1
    masks[2, 1::2, 1::2] = 1
    return np.stack([convolve(m * masks[c], _K_G if c == 1 else _K_RB, mode="mirror") for c in range(3)], axis=-1)


def render(spec: SceneSpec, world: World, motion: Motion, pipeline: Pipeline) -> Iterator[np.ndarray]:
    for i, lin in enumerate(clean_frames(spec, world, motion)):
        yield pipeline(lin, i)


def render_frames(spec: SceneSpec) -> Iterator[np.ndarray]:
    """A real-anchor-like scene from one seed: random world, hand-held motion, camera pipeline."""
    rng = np.random.default_rng(spec.seed)
    world = World.random(spec, rng)
    motion = Motion.random(rng, spec.objects)
    return render(spec, world, motion, camera_pipeline(rng, spec.noise))


def encode_h264(frames: Iterable[np.ndarray], fps: int, crf: int = 20, preset: str = "medium") -> bytes:
    """Encode RGB frames to H.264 in MP4, in memory, byte-reproducibly (one thread, AVX2 cap; see codecs)."""
    from transforms.codecs import x264_reproducible_options

    buf = io.BytesIO()
    with av.open(buf, mode="w", format="mp4", options={"fflags": "+bitexact"}) as container:
        stream = None
        for frame in frames:
            if stream is None:
                stream = container.add_stream("libx264", rate=fps)
                stream.width, stream.height, stream.pix_fmt = frame.shape[1], frame.shape[0], "yuv420p"
                stream.codec_context.flags |= av.codec.context.Flags.bitexact
                stream.options = {"crf": str(crf), "preset": preset, **x264_reproducible_options()}
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode(None))
    return buf.getvalue()


def render_video(spec: SceneSpec) -> bytes:
    """The scene as a phone's H.264 MP4."""
    return encode_h264(render_frames(spec), spec.fps, spec.crf)
