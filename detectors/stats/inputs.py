"""Checking what a statistic is given, once for every function of the package: labels, scores, a confidence level,
and the nan (with a warning) that an undefined quantity returns."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
from scipy.special import ndtri  # norm.ppf itself, without scipy.stats (70 MB of a monitor's memory)

from detectors.stats.errors import MetricError, UndefinedMetricWarning


def undefined(what: str, stacklevel: int = 3) -> float:
    """nan, with an :class:`UndefinedMetricWarning` naming ``what`` (at the caller's caller by default)."""
    warnings.warn(f"{what} is undefined here; returning nan", UndefinedMetricWarning, stacklevel=stacklevel)
    return float("nan")


def labels(y_true: Sequence | np.ndarray) -> np.ndarray:
    """``y_true`` as a 1-D boolean array (1 or True: generated); :class:`MetricError` for anything but 0/1."""
    y = np.asarray(y_true)
    if y.ndim != 1:
        raise MetricError(f"y_true must be 1-D, got shape {y.shape}")
    if y.dtype != bool:
        if not np.isin(y, (0, 1)).all():
            raise MetricError("y_true must hold only 0/1 or booleans")
        y = y.astype(bool)
    return y


def labels_and_scores(y_true: Sequence | np.ndarray, scores: Sequence | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The labels (:func:`labels`) and the scores as float64 of the same shape, without NaN."""
    y = labels(y_true)
    s = np.asarray(scores, dtype=np.float64)
    if s.shape != y.shape:
        raise MetricError(f"scores shape {s.shape} != y_true shape {y.shape}")
    if np.isnan(s).any():
        raise MetricError(f"{int(np.isnan(s).sum())} NaN score(s): drop failed rows explicitly or score them")
    return y, s


def z_quantile(confidence: float) -> float:
    """The standard normal quantile of a two-sided ``confidence`` level: Φ⁻¹(1/2 + confidence/2)."""
    if not 0 < confidence < 1:
        raise MetricError(f"confidence must lie in (0, 1), got {confidence}")
    return float(ndtri(0.5 + confidence / 2))
