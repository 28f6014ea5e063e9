"""``lastmile detectors build``: train the reference detectors on the proxy corpus and export them to ONNX.

Deterministic given the seed: the corpus is seeded, torch runs with deterministic algorithms on a fixed
thread count, and the ONNX graphs are written by hand from the trained weights. Needs the extra ``train``
(torch); inference never does. Anchors are split: detectors train on one part and their thresholds are
calibrated (RealR = 95 % on ``original``) on the other.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from detectors.card import InputSpec, ModelCard, OutputSpec, Threshold
from detectors.manifest import ManifestRow, read_manifest
from detectors.proxy import corpus
from detectors.reference.registry import REFERENCE_DETECTORS, ReferenceDetector
from detectors.reference.training import BuildConfig, Reference
from detectors.repository import install
from detectors.serving.config import write_repository
from detectors.stats.metrics import auc, calibrate_threshold
from transforms.sampling import SamplingPolicy, sample_frames

LICENSE = "Apache-2.0 (weights trained by lastmile-gateway on its proxy corpus)"


@dataclass
class Split:
    frames: dict[str, np.ndarray]  # detector -> [N, T, H, W, 3]
    labels: np.ndarray  # 1 = generated
    sources: list[str]


def load_split(rows: list[ManifestRow], root: Path, policies: dict[str, SamplingPolicy]) -> Split:
    frames: dict[str, list[np.ndarray]] = {k: [] for k in policies}
    for row in rows:
        data = (root / row.uri).read_bytes()
        for name, policy in policies.items():
            frames[name].append(sample_frames(data, policy))
    labels = np.array([r.label == "generated" for r in rows], dtype=np.float32)
    return Split({k: np.stack(v) for k, v in frames.items()}, labels, [r.source for r in rows])


def _auc(labels: np.ndarray, scores: np.ndarray) -> float:
    return auc(labels.astype(bool), scores)


def _threshold(labels: np.ndarray, scores: np.ndarray, target: float) -> float:
    return calibrate_threshold(scores[labels == 0], target)


def _card(ref: ReferenceDetector, threshold: float, cfg: BuildConfig, cal_auc: float) -> ModelCard:
    text = ref.card
    cal = (
        f"RealR = {cfg.target_real_recall:.0%} on `original` of a held-out calibration split of the proxy corpus "
        f"(seed {cfg.seed}, {cfg.anchors} anchors, {cfg.calibration_share:.0%} of them; calibration AUC {cal_auc:.3f})"
    )
    return ModelCard(
        name=ref.name,
        version=f"1.0.0-proxy{cfg.seed}",
        family=text.family,
        description=text.description,
        input=InputSpec(name="frames"),
        sampling=ref.sampling,
        output=OutputSpec(name="score", direction=text.direction, native_score=text.native),
        threshold=Threshold(value=float(threshold), calibration=cal, target_real_recall=cfg.target_real_recall),
        training_data=(
            f"{corpus.PROXY_NOTICE} Trained on `original` videos of seed {cfg.seed}, "
            f"{round(cfg.anchors * (1 - cfg.calibration_share))} anchors x (1 real + 5 pseudo-generated)."
            if text.trained
            else "none (training-free)"
        ),
        license=LICENSE,
        reference=text.reference,
        notes=text.notes,
    )


def build(cfg: BuildConfig, out: Path, log: Callable[[str], None] = print, workdir: Path | None = None) -> dict:
    """Build every reference detector into the model repository ``out``; return a summary."""
    import torch

    torch.set_num_threads(cfg.threads)
    torch.use_deterministic_algorithms(True)
    policies = {ref.name: ref.sampling for ref in REFERENCE_DETECTORS}
    with tempfile.TemporaryDirectory(prefix="lastmile-build-") as tmp:
        root = workdir or Path(tmp)
        train_rows, cal_rows = corpus_split(cfg, root, log)
        train = load_split(train_rows, root, policies)
        cal = load_split(cal_rows, root, policies)
    n_cal = len({r.anchor_id for r in cal_rows})
    summary: dict = {"seed": cfg.seed, "anchors": cfg.anchors, "calibration_anchors": n_cal, "detectors": {}}
    for ref in REFERENCE_DETECTORS:
        graph, reference = ref.fit(train.frames[ref.name], train.labels, cfg, log)
        summary["detectors"][ref.name] = finish_detector(ref, graph, reference, cal, cfg, out)
        log(f"{ref.name}: " + ", ".join(f"{k} {v:.4g}" for k, v in summary["detectors"][ref.name].items()))
    (Path(out) / "BUILD.json").write_text(json.dumps(summary, indent=2, default=float))
    write_repository(out)  # Triton configs beside each model
    return summary


def corpus_split(
    cfg: BuildConfig, root: Path, log: Callable[[str], None]
) -> tuple[list[ManifestRow], list[ManifestRow]]:
    """The proxy corpus of ``cfg`` synthesised in ``root``, split by anchor: (training rows, calibration rows)."""
    log(f"synthesising the training corpus (seed {cfg.seed}, {cfg.anchors} anchors) in {root}")
    rows = read_manifest(corpus.synthesize(corpus.CorpusConfig(anchors=cfg.anchors, seed=cfg.seed), root))
    anchors = sorted({r.anchor_id for r in rows})
    cal_ids = set(anchors[-max(2, round(len(anchors) * cfg.calibration_share)) :])
    log(f"sampling frames of {len(rows)} videos")
    return [r for r in rows if r.anchor_id not in cal_ids], [r for r in rows if r.anchor_id in cal_ids]


def finish_detector(
    ref: ReferenceDetector,
    graph: onnx.ModelProto,
    reference: Reference,
    cal: Split,
    cfg: BuildConfig,
    out: Path,
    card_update: dict | None = None,
) -> dict:
    """Check the graph against its reference on the calibration split, fix the threshold there, install it (with
    ``card_update``, e.g. another version and its training, as a version beside the default one)."""
    import onnxruntime as ort

    sess = ort.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
    x = cal.frames[ref.name]
    (native,) = sess.run(["score"], {"frames": x})
    expected = reference(x)
    gap = float(np.max(np.abs(native - expected)))
    if gap > 1e-4 * max(1.0, float(np.max(np.abs(expected)))):
        raise AssertionError(f"{ref.name}: ONNX and reference disagree by {gap}")
    scores = native if ref.card.direction == "higher_is_generated" else -native
    cal_auc = _auc(cal.labels, scores)
    thr = _threshold(cal.labels, scores, cfg.target_real_recall)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        onnx.save(graph, path)
        card = _card(ref, thr, cfg, cal_auc).model_copy(update=card_update or {})
        install(path, card, out, overwrite=True, beside=card_update is not None)
    return {"calibration_auc": round(cal_auc, 4), "threshold": thr, "onnx_vs_reference": gap}
