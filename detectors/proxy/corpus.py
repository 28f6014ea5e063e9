"""A paired proxy corpus: camera-like real anchors and, for each, counterparts from pseudo-generators.

**This is a proxy for AI-generated video, not AI-generated video.** Each pseudo-generator starts from its
anchor's first frame (I2V-style: same world, same first frame content), invents its own motion, and renders
through a pipeline that leaves a known artifact profile, at a known scale:

- ``latent8`` (coarse): content decoded from a x8-downsampled latent, so detail below 8 px is missing and there
  are no Bayer correlations; expected to survive ``spatial``.
- ``checker`` (finest): x2 transposed-conv up-sampling leaves a low-amplitude 2x2 checkerboard and no sensor-noise
  structure; expected to be washed out by ``transcode`` and ``spatial``.
- ``flicker`` (fine, temporal): fine texture re-synthesised every frame (texture boiling); partly survives.
- ``smoothmo`` (coarse, temporal): constant velocities, no hand-held shake, sensor noise frozen in time;
  expected to survive ``spatial``.
- ``nearclean`` (fine): the camera pipeline with less sensor noise and a slight oversharpening; hard from the start.

Every file is deterministic given the seed (sha256 recorded in the manifest).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy.ndimage import gaussian_filter

from detectors.manifest import ManifestRow
from detectors.proxy import scenes
from detectors.proxy.scenes import Motion, Pipeline, SceneSpec, World

PROXY_NOTICE = (
    "PROXY CORPUS: synthetic camera-like scenes and pseudo-generators made by lastmile-gateway; "
    "a proxy for AI-generated video, not AI-generated video."
)
USER_ANCHORS_NOTICE = (
    "PROXY CORPUS: real anchors from the user's own videos, each with pseudo-generated counterparts that "
    "lastmile-gateway renders from its first frame; a proxy for AI-generated video, not AI-generated video."
)
PROXY_MARK = "lastmile-proxy"  # every manifest row of the corpus carries it as ``corpus``: the rows say so themselves
USER_ANCHORS = "user videos (--real-dir)"  # corpus.json's real_anchors
SYNTHETIC_ANCHORS = "synthetic camera-like scenes (detectors/scenes.py)"


@dataclass(frozen=True)
class PseudoGenerator:
    name: str
    cue: str
    scale: str
    smooth_motion: bool
    pipeline: Callable[[np.random.Generator, SceneSpec], Pipeline]


def _latent8(rng: np.random.Generator, spec: SceneSpec) -> Pipeline:
    detail = 0.3  # share of the true sub-8-px detail the "decoder" recovers

    def run(lin: np.ndarray, _i: int) -> np.ndarray:
        h, w = lin.shape[:2]
        small = lin[: h // 8 * 8, : w // 8 * 8].reshape(h // 8, 8, w // 8, 8, 3).mean(axis=(1, 3))
        up = scenes.resize(small, h, w, "bicubic")
        out = up + detail * (gaussian_filter(lin, (0.8, 0.8, 0)) - up)
        return scenes.to_display(out, rng, 1.2)

    return run


def _checker(rng: np.random.Generator, spec: SceneSpec) -> Pipeline:
    amp = 0.022  # relative amplitude of the 2x2 pattern
    pattern = np.array([[1.0, -0.6], [-0.6, 0.2]], np.float32)

    def run(lin: np.ndarray, _i: int) -> np.ndarray:
        h, w = lin.shape[:2]
        half = gaussian_filter(lin, (1.0, 1.0, 0))[::2, ::2]
        up = scenes.resize(half, h, w)
        tile = np.tile(pattern, (h // 2 + 1, w // 2 + 1))[:h, :w, None]
        return scenes.to_display(up * (1 + amp * tile), rng, 1.5)

    return run


def _flicker(rng: np.random.Generator, spec: SceneSpec) -> Pipeline:
    camera = scenes.camera_pipeline(rng, spec.noise)

    def run(lin: np.ndarray, i: int) -> np.ndarray:
        base = gaussian_filter(lin, (1.6, 1.6, 0))
        fine = scenes.texture(rng, *lin.shape[:2], octaves=2) - 0.5
        boiled = base + 0.6 * (lin - base) + 0.05 * gaussian_filter(fine, (0.7, 0.7, 0))
        return camera(np.clip(boiled, 0, 1), i)

    return run


def _smoothmo(rng: np.random.Generator, spec: SceneSpec) -> Pipeline:
    seed = int(rng.integers(1 << 31))

    def run(lin: np.ndarray, i: int) -> np.ndarray:
        frozen = np.random.default_rng(seed)  # the same sensor-noise field in every frame
        return scenes.camera_pipeline(frozen, spec.noise)(lin, i)

    return run


def _nearclean(rng: np.random.Generator, spec: SceneSpec) -> Pipeline:
    camera = scenes.camera_pipeline(rng, spec.noise * 0.45, shot=0.00015, blur=0.5)
    sharpen = 0.35  # unsharp-mask amount: the slight oversharpening of a generator's decoder

    def run(lin: np.ndarray, i: int) -> np.ndarray:
        return camera(np.clip(lin + sharpen * (lin - gaussian_filter(lin, (1.0, 1.0, 0))), 0, 1), i)

    return run


GENERATORS: dict[str, PseudoGenerator] = {
    g.name: g
    for g in (
        PseudoGenerator("latent8", "x8 latent decode, no Bayer structure", "coarse", False, _latent8),
        PseudoGenerator(
            "checker", "x2 transposed-conv checkerboard, no sensor noise structure", "finest", False, _checker
        ),
        PseudoGenerator("flicker", "fine texture re-synthesised each frame", "fine-temporal", False, _flicker),
        PseudoGenerator(
            "smoothmo", "constant-velocity motion, no shake, frozen sensor noise", "coarse-temporal", True, _smoothmo
        ),
        PseudoGenerator("nearclean", "less sensor noise, slight oversharpening", "fine", False, _nearclean),
    )
}


class CorpusConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    anchors: int = Field(12, ge=1, le=10_000)
    seed: int = 0
    width: int = Field(192, ge=32, le=3840)
    height: int = Field(144, ge=32, le=2160)
    fps: int = Field(24, ge=4, le=120)
    min_seconds: float = Field(2.0, ge=2.0, le=8.0)
    max_seconds: float = Field(3.0, ge=2.0, le=8.0)
    generators: tuple[str, ...] = tuple(GENERATORS)


def _rng(cfg: CorpusConfig, anchor: int, role: str) -> np.random.Generator:
    key = int.from_bytes(hashlib.sha256(f"{cfg.seed}/{anchor}/{role}".encode()).digest()[:8], "little")
    return np.random.default_rng(key)


def _anchor_spec(cfg: CorpusConfig, i: int) -> SceneSpec:
    rng = _rng(cfg, i, "spec")
    return SceneSpec(
        width=cfg.width,
        height=cfg.height,
        fps=cfg.fps,
        seconds=float(np.round(rng.uniform(cfg.min_seconds, cfg.max_seconds), 2)),
        objects=int(rng.integers(2, 6)),
        noise=float(rng.uniform(1.5, 3.0)),
        pan_px_per_s=float(rng.uniform(10, 40)),
        shake_px=float(rng.uniform(0.8, 2.0)),
        crf=int(rng.integers(18, 24)),
        seed=int(rng.integers(1 << 31)),
    )


def synthesize(
    cfg: CorpusConfig, out: Path, real_videos: list[Path] | None = None, progress: Callable[[int], None] | None = None
) -> Path:
    """Write the corpus under ``out`` (``videos/*.mp4``, ``manifest.jsonl``, ``corpus.json``); return the manifest."""
    (out / "videos").mkdir(parents=True, exist_ok=True)
    rows: list[ManifestRow] = []
    n_anchors = len(real_videos) if real_videos else cfg.anchors
    for i in range(n_anchors):
        spec = _anchor_spec(cfg, i)
        anchor_id = f"a{cfg.seed}_{i:04d}"
        if real_videos:
            first, real_frames = _user_video(real_videos[i], spec)
            world = World.from_image(first, spec)
            category = "user"
        else:
            world = World.random(spec, _rng(cfg, i, "world"))
            real_frames = scenes.render(
                spec,
                world,
                Motion.random(_rng(cfg, i, "motion"), spec.objects),
                scenes.camera_pipeline(_rng(cfg, i, "camera"), spec.noise),
            )
            category = "pan-fast" if spec.pan_px_per_s > 25 else "pan-slow"
        rows.append(
            _write(out, anchor_id, "real", anchor_id, category, scenes.encode_h264(real_frames, spec.fps, spec.crf))
        )
        for name in cfg.generators:
            gen = GENERATORS[name]
            motion = Motion.random(_rng(cfg, i, f"motion/{name}"), len(world.objects), smooth=gen.smooth_motion)
            pipeline = gen.pipeline(_rng(cfg, i, f"pipe/{name}"), spec)
            frames = _i2v(spec, world, motion, pipeline, real_first=None)
            data = scenes.encode_h264(frames, spec.fps, crf=18)
            rows.append(_write(out, f"{anchor_id}_{name}", "generated", anchor_id, category, data, source=name))
        if progress:
            progress(1)
    manifest = out / "manifest.jsonl"
    manifest.write_text("".join(r.model_dump_json(exclude_none=True) + "\n" for r in rows))
    files = {f"a{cfg.seed}_{i:04d}": p.name for i, p in enumerate(real_videos)} if real_videos else None
    (out / "corpus.json").write_text(json.dumps(describe(cfg, len(rows), files), indent=2))
    return manifest


def _i2v(spec: SceneSpec, world: World, motion: Motion, pipeline: Pipeline, real_first: None) -> Iterator[np.ndarray]:
    """A pseudo-generated continuation: the anchor's world from its first-frame camera position onwards."""
    return scenes.render(spec, world, motion, pipeline)


def _write(
    out: Path, video_id: str, label: str, anchor: str, category: str, data: bytes, source: str = "real"
) -> ManifestRow:
    path = out / "videos" / f"{video_id}.mp4"
    path.write_bytes(data)
    return ManifestRow(
        video_id=video_id,
        uri=f"videos/{video_id}.mp4",
        label=label,
        source=source,
        anchor_id=anchor,
        category=category,
        sha256=hashlib.sha256(data).hexdigest(),
        corpus=PROXY_MARK,
    )


def _user_video(path: Path, spec: SceneSpec) -> tuple[np.ndarray, Iterator[np.ndarray]]:
    """A user's real video, scaled and centre-cropped to the corpus size, sampled at the corpus's frame rate in real
    time (a frame repeated or dropped where the rates differ) and trimmed to the anchor's duration."""
    from transforms.sampling import SamplingPolicy, sample_frames

    policy = SamplingPolicy(
        mode="fps_window",
        fps=spec.fps,
        frames=spec.frames,
        height=spec.height,
        width=spec.width,
        resize="short_side_center_crop",
    )
    frames = sample_frames(path.read_bytes(), policy)
    return frames[0], iter(frames)


def marked_description(rows: list[ManifestRow], where: str) -> dict | None:
    """What a manifest's rows marked as this corpus's (``corpus`` is :data:`PROXY_MARK`) say of it where no
    corpus.json does (``where``: why not): its notice and whether its real anchors are the user's videos (category
    ``user``); None without a marked row. A manifest mixing the proxy's videos with others is a proxy too."""
    marked = [r for r in rows if getattr(r, "corpus", None) == PROXY_MARK]
    if not marked:
        return None
    user = any(r.label == "real" and r.category == "user" for r in marked)
    return {
        "notice": USER_ANCHORS_NOTICE if user else PROXY_NOTICE,
        "real_anchors": USER_ANCHORS if user else SYNTHETIC_ANCHORS,
        "described": where,
    }


def describe(cfg: CorpusConfig, videos: int, user_reals: dict[str, str] | None) -> dict:
    """corpus.json: its notice, configuration and generators; ``user_reals``: anchor id -> the user's file."""
    return {
        "notice": USER_ANCHORS_NOTICE if user_reals else PROXY_NOTICE,
        "config": cfg.model_dump(),
        "videos": videos,
        "real_anchors": USER_ANCHORS if user_reals else SYNTHETIC_ANCHORS,
        **({"anchor_files": user_reals} if user_reals else {}),
        "generators": {
            g.name: {"cue": g.cue, "scale": g.scale} for g in GENERATORS.values() if g.name in cfg.generators
        },
    }
