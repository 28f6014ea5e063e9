"""The reference detectors as data: one entry each (name, frame sampling, model-card text, how to fit it), so
that the build runs one loop over them instead of a hand-written block per detector."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx

from detectors.reference import d3, npr, restrav, spectral
from detectors.reference.training import BuildConfig, Reference, fit_npr, fit_restrav, fit_spectral
from transforms.sampling import SamplingPolicy

Fit = Callable[[np.ndarray, np.ndarray, BuildConfig, Callable[[str], None]], tuple[onnx.ModelProto, Reference]]


@dataclass(frozen=True)
class CardText:
    """What a reference detector's model card says about it."""

    family: str
    description: str
    direction: str  # "higher_is_generated" | "higher_is_real"
    native: str
    reference: str
    notes: str
    trained: bool = True


@dataclass(frozen=True)
class ReferenceDetector:
    name: str
    sampling: SamplingPolicy
    card: CardText
    # (frames, labels, config, log) -> (ONNX graph, reference implementation)
    fit: Fit
    # trained by epochs, each of which can take its own frames (an augmentation's); else fitted at once
    by_epoch: bool = False


def _training_free(graph: Callable[[], onnx.ModelProto], reference: Reference) -> Fit:
    return lambda x, y, cfg, log: (graph(), reference)


REFERENCE_DETECTORS: tuple[ReferenceDetector, ...] = (
    ReferenceDetector(
        "npr",
        npr.SAMPLING,
        CardText(
            family="frame-level CNN on neighbouring-pixel residuals",
            description="NPR (Tan et al., CVPR'24), video form",
            direction="higher_is_generated",
            native="logit",
            reference="arXiv 2312.10461; DeMamba models/NPR.py",
            notes=f"width {npr.WIDTH}/{4 * npr.WIDTH} planes (a quarter of the paper's 64/128) for CPU; "
            "128x128 native-pixel crops",
        ),
        fit_npr,
        by_epoch=True,
    ),
    ReferenceDetector(
        "spectral",
        spectral.SAMPLING,
        CardText(
            family="frequency-domain",
            description="Durall et al. azimuthal log-spectrum + logistic regression",
            direction="higher_is_generated",
            native="logit",
            reference="Durall, Keuper, Keuper, CVPR'20",
            notes="300-bin profile of 128x128 native-pixel crops, averaged over 8 frames",
        ),
        fit_spectral,
    ),
    ReferenceDetector(
        "restrav_px",
        restrav.SAMPLING,
        CardText(
            family="trajectory",
            description="ReStraV 21-D trajectory features on pixel embeddings + MLP 21-64-32-1",
            direction="higher_is_generated",
            native="logit",
            reference="ReStraV, NeurIPS'25",
            notes="pixel embeddings (4x4-pooled 64x64 frames), not the paper's DINOv2: a pixel-embedding variant",
        ),
        fit_restrav,
    ),
    ReferenceDetector(
        "d3_px",
        d3.SAMPLING,
        CardText(
            family="trajectory (training-free)",
            description="D3 second-order temporal statistic on pixel embeddings",
            direction="higher_is_real",
            native="std of d2 (high = real); the runtime negates it",
            reference="D3, ICCV'25",
            notes="fixed pixel embeddings, not the paper's pretrained encoders: a pixel variant",
            trained=False,
        ),
        _training_free(d3.build_onnx, d3.native_score),
    ),
)
