"""The project's statistics, in one home at the lowest floor every user of them can import (the reference
detectors' training, the offline report, the live monitor): pure functions with validated inputs, each docstring
giving its formula and the paper it comes from, in the style of scikit-learn's ``metrics``. Nothing here imports
``gateway``, and nothing imports ``scipy.stats`` (about 70 MB of a monitor's memory).

Modules: :mod:`~detectors.stats.metrics` (AUC, ROC, recalls, thresholds, Spearman), :mod:`~detectors.stats.ranks`
(one sort shared by every subset's rank statistics; DeLong's structural components), :mod:`~detectors.stats.ties`
(runs of tied values, found in one place), :mod:`~detectors.stats.intervals` (Wilson, DeLong for one to four
correlated AUCs, Newcombe's paired difference, the KS distance), :mod:`~detectors.stats.bootstrap` (the clustered,
stratified bootstrap), :mod:`~detectors.stats.estimates` (estimates with their intervals, as the reports give them).
"""

from detectors.stats.errors import MetricError, UndefinedMetricWarning

__all__ = ["MetricError", "UndefinedMetricWarning"]
