"""The statistics package's errors and warnings (the names and the behaviour follow scikit-learn's)."""

from __future__ import annotations


class MetricError(ValueError):
    """Inputs a metric cannot be computed on (shape mismatch, NaN scores, labels that are not binary)."""


class UndefinedMetricWarning(UserWarning):
    """A metric is undefined on these inputs (a class is absent): it is returned as nan, and said so."""
