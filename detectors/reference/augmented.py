"""``lastmile detectors build --augment``: reference detectors retrained against dissemination, each installed as a
version beside its default one.

The corpus, its split and the calibration are :func:`detectors.reference.build.build`'s; only the training frames
differ. Each training video is rendered under ``rounds`` conditions the augmentation draws for
``(seed, video, round)`` (:mod:`transforms.augment`). A detector trained by epochs sees, each epoch, the original
frames and one round, in turn; one fitted at once fits the original frames and every round together. Thresholds are
fixed as the default versions' are (RealR 95% on ``original`` of the calibration split), so the two versions differ in
training alone.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np

from detectors.proxy import corpus
from detectors.reference.build import corpus_split, finish_detector, load_split
from detectors.reference.registry import REFERENCE_DETECTORS
from detectors.reference.training import BuildConfig
from transforms.augment import AugmentConfig, Augmenter
from transforms.sampling import SamplingPolicy, sample_frames

AUGMENTED = ("npr", "spectral")


def augmented_version(seed: int) -> str:
    """The version an augmented build installs: the default's next minor version, marked."""
    return f"1.1.0-proxy{seed}-aug"


def build_augmented(
    cfg: BuildConfig,
    aug: AugmentConfig,
    out: Path,
    names: Sequence[str] = AUGMENTED,
    rounds: int = 4,
    workers: int = 2,
    log: Callable[[str], None] = print,
) -> dict:
    """Retrain ``names`` with the augmentation ``aug`` and install each beside its default version in ``out``."""
    import torch

    refs = [r for r in REFERENCE_DETECTORS if r.name in names]
    unknown = sorted(set(names) - {r.name for r in refs})
    if unknown or not refs or rounds < 1:
        raise ValueError(f"augmented build: unknown detector(s) {unknown} or rounds {rounds} < 1")
    torch.set_num_threads(cfg.threads)
    torch.use_deterministic_algorithms(True)
    policies = {r.name: r.sampling for r in refs}
    with tempfile.TemporaryDirectory(prefix="lastmile-build-") as tmp:
        root = Path(tmp)
        train_rows, cal_rows = corpus_split(cfg, root, log)
        train, cal = load_split(train_rows, root, policies), load_split(cal_rows, root, policies)
        log(f"rendering {rounds} augmented draws of {len(train_rows)} training videos on {workers} workers")
        paths = [str(root / r.uri) for r in train_rows]
        rendered, drawn = render_rounds(paths, aug, cfg.seed, rounds, policies, workers)
    version = augmented_version(cfg.seed)
    summary: dict = {"seed": cfg.seed, "version": version, "rounds": rounds, "drawn": dict(drawn), "detectors": {}}
    for ref in refs:
        frames = rendered[ref.name]
        if ref.by_epoch:
            # each epoch: the original frames and one rendering, so the clean cues stay in every epoch
            clean = train.frames[ref.name]
            x: np.ndarray | Callable[[int], np.ndarray] = partial(_with_clean, clean, frames)
            y = np.tile(train.labels, 2)
        else:
            x = np.concatenate([train.frames[ref.name], *frames])
            y = np.tile(train.labels, rounds + 1)
        graph, reference = ref.fit(x, y, cfg, log)
        update = {"version": version, "training_data": _training_text(cfg, aug, rounds, len(train_rows), ref.by_epoch)}
        summary["detectors"][ref.name] = finish_detector(ref, graph, reference, cal, cfg, out, update)
        log(f"{ref.name} {version}: " + ", ".join(f"{k} {v:.4g}" for k, v in summary["detectors"][ref.name].items()))
    build_file = Path(out) / "BUILD.json"
    recorded = json.loads(build_file.read_text()) if build_file.exists() else {}
    build_file.write_text(json.dumps({**recorded, "augmented": summary}, indent=2, default=float))
    return summary


def _with_clean(clean: np.ndarray, rounds: list[np.ndarray], epoch: int) -> np.ndarray:
    """An epoch's frames: the original ones, then the epoch's round of renderings."""
    return np.concatenate([clean, rounds[epoch % len(rounds)]])


def render_rounds(
    paths: Sequence[str],
    aug: AugmentConfig,
    seed: int,
    rounds: int,
    policies: dict[str, SamplingPolicy],
    workers: int,
) -> tuple[dict[str, list[np.ndarray]], Counter[str]]:
    """Per detector, per round, the ``[N, T, H, W, 3]`` frames of every clip's drawn variant (each variant made once
    and sampled by every policy), and how often each condition was drawn."""
    jobs = [(path, i, r) for r in range(rounds) for i, path in enumerate(paths)]
    with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
        results = list(pool.map(partial(_render, aug=aug, seed=seed, policies=policies), jobs))
    out: dict[str, list[np.ndarray]] = {name: [] for name in policies}
    for r in range(rounds):
        chunk = results[r * len(paths) : (r + 1) * len(paths)]
        for name in policies:
            out[name].append(np.stack([frames[name] for _, frames in chunk]))
    return out, Counter(condition for condition, _ in results)


def _render(
    job: tuple[str, int, int], aug: AugmentConfig, seed: int, policies: dict[str, SamplingPolicy]
) -> tuple[str, dict[str, np.ndarray]]:
    path, index, round_ = job
    variant, drawn = Augmenter(aug, seed).variant(path, index, round_)
    return drawn.condition.name, {name: sample_frames(variant.data, p) for name, p in policies.items()}


def _training_text(cfg: BuildConfig, aug: AugmentConfig, rounds: int, videos: int, by_epoch: bool) -> str:
    weights = ", ".join(f"{c.name} {p:.2f}" for c, p in aug.expanded())
    use = (
        "each epoch the original frames and one round, in turn"
        if by_epoch
        else "the original frames and every round, fitted together"
    )
    return (
        f"{corpus.PROXY_NOTICE} Trained on seed {cfg.seed}'s {videos} training videos (the default version's split) "
        f"under the dissemination augmentation (lastmile augment: {weights}; profile {aug.resolved_profile().name}; "
        f"{rounds} draws per video, seed {cfg.seed}; {use})."
    )
