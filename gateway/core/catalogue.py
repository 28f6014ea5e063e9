"""Every series a gateway or the monitor exports, named once: name, help, labels, kind, unit, and who exports it.

The collectors build their prometheus_client metrics from these families (:func:`instrument`,
:func:`snapshot_family`), the Grafana dashboards (:mod:`gateway.ops.grafana`) name them through the constants, and
the alert rules are rendered from a template that names them by constant (:mod:`gateway.ops.rules`), so renaming
a series here renames it in all three.

A family's ``name`` is the metric family's name as Prometheus clients and OpenMetrics spell it: a counter
``lastmile_videos`` is scraped as ``lastmile_videos_total`` (and ``_created``), a histogram as ``_bucket``,
``_sum`` and ``_count``; :attr:`Family.series` lists them. Names follow ``lastmile_<noun>[_<unit>]``; labels are
limited to detector, version, condition, decision, outcome, component, stage and the monitor's window labels.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from gateway.core import ab_quantities as ab


class Kind(StrEnum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"
    # a gauge of value 1 whose labels carry the information (``*_info``)
    INFO = "info"


class Exporter(StrEnum):
    """Who exports a family: a gateway, the monitor's own operational series, or the monitor's windows."""

    # gateway.stream.live.LiveMetrics
    GATEWAY = "gateway"
    # gateway.monitor.exporter.MonitorMetrics
    MONITOR = "monitor"
    # gateway.monitor.signals, computed from the store on the monitor's computing thread
    WINDOWS = "windows"
    # gateway.monitor.comparisons: the monitor's, where comparisons are configured
    COMPARISONS = "comparisons"


# the series a family of each kind is scraped as
SUFFIXES = {
    Kind.COUNTER: ("_total", "_created"),
    Kind.HISTOGRAM: ("_bucket", "_sum", "_count", "_created"),
    Kind.GAUGE: ("",),
    Kind.INFO: ("",),
}
SCORE_BUCKETS = (-20, -10, -5, -3, -2, -1, -0.5, -0.25, 0, 0.25, 0.5, 1, 2, 3, 5, 10, 20)
STAGE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
SERIES = ("detector", "version", "condition")
# every windowed family of the monitor
WINDOW = (*SERIES, "window", "population")


@dataclass(frozen=True)
class Family:
    name: str
    help: str
    kind: Kind
    labels: tuple[str, ...] = ()
    exporters: tuple[Exporter, ...] = (Exporter.GATEWAY,)
    # the base unit the name ends with, if any
    unit: str = ""
    # a histogram's; none: prometheus_client's defaults
    buckets: tuple[float, ...] = ()
    # also exported as ``<name>_lower`` and ``<name>_upper``, its 95% interval's bounds
    interval: bool = False

    @property
    def series(self) -> tuple[str, ...]:
        return tuple(self.name + suffix for suffix in SUFFIXES[self.kind])

    def bounds(self) -> tuple[Family, Family]:
        """The families of the lower and upper bounds of this family's interval."""
        text = f"the 95% interval: {self.help[0].lower()}{self.help[1:]}"
        return tuple(
            replace(self, name=f"{self.name}_{side}", help=f"{side.capitalize()} bound of {text}", interval=False)
            for side in ("lower", "upper")
        )

    def zero_width(self) -> Family:
        """The family that flags this family's intervals of zero width (:data:`ZERO_WIDTH`, or the comparisons'
        :data:`COMPARISON_ZERO_WIDTH`), labelled with this family's name as ``quantity``."""
        return COMPARISON_ZERO_WIDTH if Exporter.COMPARISONS in self.exporters else ZERO_WIDTH


def _gauge(name: str, text: str, labels: tuple[str, ...] = (), **kw) -> Family:
    return Family(name, text, Kind.GAUGE, labels, **kw)


def _counter(name: str, text: str, labels: tuple[str, ...] = (), **kw) -> Family:
    return Family(name, text, Kind.COUNTER, labels, **kw)


def _windowed(name: str, text: str, labels: tuple[str, ...] = WINDOW, **kw) -> Family:
    return Family(name, text, Kind.GAUGE, labels, (Exporter.WINDOWS,), **kw)


# -- a gateway ---------------------------------------------------------------------------------------------------
VIDEOS = _counter("lastmile_videos", "Videos finished, by outcome", ("outcome",))
VARIANTS = _counter("lastmile_variants", "Condition variants, by outcome", ("condition", "outcome"))
PREDICTIONS = _counter("lastmile_predictions", "Decisions at the fixed threshold", (*SERIES, "decision"))
SCORE = Family(
    "lastmile_score",
    "Generated-scores (higher = more likely generated)",
    Kind.HISTOGRAM,
    SERIES,
    buckets=SCORE_BUCKETS,
)
STAGE_SECONDS = Family(
    "lastmile_stage_seconds",
    "Time per pipeline stage",
    Kind.HISTOGRAM,
    ("stage",),
    unit="seconds",
    buckets=STAGE_BUCKETS,
)
CONDITION_SECONDS = Family(
    "lastmile_condition_seconds",
    "Encode time of each condition's own steps",
    Kind.HISTOGRAM,
    ("condition",),
    unit="seconds",
    buckets=STAGE_BUCKETS,
)
DEAD_LETTERS = _counter("lastmile_dead_letters", "Messages sent to the DLQ, by error class", ("outcome",))
RETRIES = _counter("lastmile_retries", "Videos run again: the scorer was unavailable or their worker failed")
ERRORS = _counter("lastmile_errors", "Failed (video, condition, detector) rows, by kind", ("outcome",))
WORKER_FAILURES = _counter(
    "lastmile_worker_failures", "Workers that died or overran on a video, by class", ("outcome",)
)
CONSUMER_LAG = _gauge("lastmile_consumer_lag_messages", "Messages behind the input topic's end", unit="messages")
IN_FLIGHT = _gauge("lastmile_in_flight_videos", "Videos in the worker pool")
STALLED = _gauge(
    "lastmile_stalled_partitions",
    "Input partitions with lag whose position has not moved for kafka.stall_after_s (the gateway is not ready)",
    unit="partitions",
)
CHAT_REPLIES = _counter(
    "lastmile_chat_replies",
    "Chat detectors' replies, by outcome: parsed, or unparsed (no verdict: never a verdict, never an infra error)",
    (*SERIES, "outcome"),
)
CHAT_PROMPT_TOKENS = _counter(
    "lastmile_chat_prompt_tokens", "Prompt tokens chat detectors' replies used (not those read from the cache)",
    ("detector", "version"), unit="tokens",
)  # fmt: skip
CHAT_COMPLETION_TOKENS = _counter(
    "lastmile_chat_completion_tokens", "Completion tokens of chat detectors' replies (not those read from the cache)",
    ("detector", "version"), unit="tokens",
)  # fmt: skip
DETECTOR_INFO = Family(
    "lastmile_detector_info",
    "1 per detector served: its version, runtime and where it scores (execution provider or server)",
    Kind.INFO,
    ("detector", "version", "runtime", "provider"),
)
# -- both --------------------------------------------------------------------------------------------------------
RUNTIME_UP = _gauge(
    "lastmile_runtime_up",
    "1 while the component answers, 0 while it is unavailable",
    ("component",),
    exporters=(Exporter.GATEWAY, Exporter.MONITOR),
)
# -- the monitor's own -------------------------------------------------------------------------------------------
_MON = {"exporters": (Exporter.MONITOR,)}
MONITOR_EVENTS = _counter("lastmile_monitor_events", "Score events read, by outcome", ("outcome",), **_MON)
MONITOR_LABELS = _counter("lastmile_monitor_labels", "Label events read, by outcome", ("outcome",), **_MON)
MONITOR_VIDEOS = _gauge("lastmile_monitor_videos", "Videos held in the time window", **_MON)
MONITOR_WAITING_LABELS = _gauge("lastmile_monitor_waiting_labels", "Labels waiting for their video's scores", **_MON)
MONITOR_LAG = _gauge(
    "lastmile_monitor_lag_messages", "Messages behind the end of a topic", ("topic",), unit="messages", **_MON
)
MONITOR_CAUGHT_UP = _gauge(
    "lastmile_monitor_caught_up", "1 once the windows are rebuilt from the topics since start", **_MON
)
MONITOR_INVALID = _counter("lastmile_monitor_invalid_messages", "Unreadable messages skipped", ("topic",), **_MON)
MONITOR_COMPUTE_SECONDS = Family(
    "lastmile_monitor_compute_seconds",
    "Time to compute every windowed family once (off the scrape path)",
    Kind.HISTOGRAM,
    unit="seconds",
    **_MON,
)
MONITOR_COMPUTED_TIME = _gauge(
    "lastmile_monitor_computed_timestamp_seconds",
    "When the windowed families served were computed (a scrape serves the latest computation)",
    unit="seconds",
    **_MON,
)
# -- the monitor's windows (gateway.monitor.signals) -------------------------------------------------------------
LAST_SAMPLE_TIME = _windowed(
    "lastmile_window_last_sample_timestamp_seconds",
    "Event time of the series' latest sample",
    (*SERIES, "population"),
    unit="seconds",
)
WINDOW_VIDEOS = _windowed("lastmile_window_videos", "Scored videos in the window")
GENERATED_RATE = _windowed(
    "lastmile_generated_rate",
    "Share of the window's scored videos called generated (label-free): near 1 or 0, the threshold does not fit",
    interval=True,
)
WINDOW_SAMPLES = _windowed(
    "lastmile_window_samples", "Labelled scores in the window, by true label", (*WINDOW, "label")
)
PAIRED_VIDEOS = _windowed(
    "lastmile_paired_videos", "Videos scored under both this condition and original, in the window"
)
PAIRED_SAMPLES = _windowed("lastmile_paired_samples", "Labelled videos scored under both this condition and original")
AUC = _windowed("lastmile_auc", "Windowed AUC of labelled scores", interval=True)
FAKE_RECALL = _windowed("lastmile_fake_recall", "Windowed FakeR (generated videos called generated)", interval=True)
REAL_RECALL = _windowed("lastmile_real_recall", "Windowed RealR (real videos called real)", interval=True)
BALANCED_ACCURACY = _windowed("lastmile_balanced_accuracy", "Windowed balanced accuracy, (FakeR + RealR) / 2")
AUC_DRIFT = _windowed("lastmile_auc_drift", "Windowed AUC minus original's on the same videos", interval=True)
FAKE_RECALL_DRIFT = _windowed(
    "lastmile_fake_recall_drift", "Windowed FakeR minus original's on the same videos", interval=True
)
REAL_RECALL_DRIFT = _windowed(
    "lastmile_real_recall_drift", "Windowed RealR minus original's on the same videos", interval=True
)
FLIP_RATE = _windowed(
    "lastmile_flip_rate",
    "Share of videos whose decision under this condition differs from original's, by original decision",
    (*WINDOW, "direction"),
    interval=True,
)
SCORE_SHIFT_MEAN = _windowed(
    "lastmile_score_shift_mean", "Mean of score under this condition minus score under original"
)
SCORE_KS = _windowed(
    "lastmile_score_ks_statistic", "Two-sample KS distance between this condition's and original's scores"
)
ZERO_WIDTH = _windowed(
    "lastmile_interval_zero_width",
    "1 where the DeLong interval of the family named by quantity (lastmile_auc, lastmile_auc_drift) has zero width "
    "(every structural component constant, e.g. a window whose classes do not overlap): its bounds then say nothing "
    "of the estimate's spread (the page and the report mark it with a dagger); else 0. The Wilson and Newcombe "
    "intervals of the other families never have zero width",
    (*WINDOW, "quantity"),
)

# -- the monitor's comparisons (gateway.monitor.comparisons): challenger minus champion on the same videos --------
CONTENDERS = ("champion", "challenger")
# a comparison: its pair, on traffic or on canaries
COMPARISON = (*CONTENDERS, "population")
COMPARED = (*COMPARISON, "condition", "window")


def _compared(name: str, text: str, labels: tuple[str, ...] = COMPARED, **kw) -> Family:
    return Family(name, text, Kind.GAUGE, labels, (Exporter.COMPARISONS,), **kw)


COMPARISON_VIDEOS = _compared(
    "lastmile_comparison_videos", "Videos scored by both under this condition (and under original), in the window"
)
COMPARISON_SAMPLES = _compared("lastmile_comparison_samples", "Labelled videos among the comparison's videos")
COMPARISON_AUC_DIFFERENCE = _compared(
    ab.AUC_DIFFERENCE.series, "Challenger's AUC minus champion's on the same videos", interval=True
)
COMPARISON_ROBUSTNESS_DIFFERENCE = _compared(
    ab.ROBUSTNESS_DIFFERENCE.series,
    "Challenger's AUC drift from original minus champion's, all four AUCs on the same videos",
    interval=True,
)
COMPARISON_FAKE_RECALL_DIFFERENCE = _compared(
    ab.FAKE_RECALL_DIFFERENCE.series, "Challenger's FakeR minus champion's", interval=True
)
COMPARISON_REAL_RECALL_DIFFERENCE = _compared(
    ab.REAL_RECALL_DIFFERENCE.series, "Challenger's RealR minus champion's", interval=True
)
COMPARISON_DISAGREEMENT = _compared(
    ab.DISAGREEMENT.series, "Share of the comparison's videos the two decide differently"
)
COMPARISON_FLIP_RATE_DIFFERENCE = _compared(
    ab.FLIP_RATE_DIFFERENCE.series,
    "Challenger's share of decisions flipped from original minus champion's (Newcombe's paired interval)",
    interval=True,
)
COMPARISON_ZERO_WIDTH = _compared(
    "lastmile_comparison_interval_zero_width",
    "1 where the comparison's DeLong interval of the family named by quantity (lastmile_comparison_auc_difference, "
    "lastmile_comparison_robustness_difference) has zero width (every structural component constant): its bounds "
    "then say nothing of the difference's spread; else 0",
    (*COMPARED, "quantity"),
)
COMPARISON_MARGIN = _compared(
    "lastmile_comparison_margin", "The configured margin of the robustness-difference alert", COMPARISON
)
COMPARISON_MIN_SAMPLES = _compared(
    "lastmile_comparison_min_samples", "The configured labelled videos the robustness alert needs", COMPARISON
)
COMPARISON_CONTENDER_SCORED = _compared(
    "lastmile_comparison_contender_scored",
    "1 where the window holds score events of this side (role) of the comparison, else 0 (a name no event carries)",
    (*COMPARISON, "role"),
)


def keyed() -> dict[str, Family]:
    """Every family by the name of its constant here (an interval's bounds as ``AUC_LOWER``, ``AUC_UPPER``): the
    names the rules template uses. Read at each call, so a family replaced here is seen by every user."""
    out = {}
    for key, family in globals().items():
        if isinstance(family, Family):
            out[key] = family
            if family.interval:
                out[f"{key}_LOWER"], out[f"{key}_UPPER"] = family.bounds()
    return out


def families(exporter: Exporter | None = None) -> list[Family]:
    """Every family, or those ``exporter`` exports, in the order defined here."""
    return [f for f in keyed().values() if exporter is None or exporter in f.exporters]


def family_of(series: str) -> Family | None:
    """The family a scraped series belongs to (``lastmile_videos_total`` -> ``VIDEOS``), or None."""
    return next((f for f in families() if series in f.series), None)


def instrument(family: Family, registry: CollectorRegistry) -> Counter | Gauge | Histogram:
    """The family's prometheus_client metric, registered in ``registry`` (an info family is a gauge set to 1)."""
    args = (family.name, family.help, family.labels)
    if family.kind is Kind.COUNTER:
        return Counter(*args, registry=registry)
    if family.kind is Kind.HISTOGRAM:
        return Histogram(*args, registry=registry, **({"buckets": family.buckets} if family.buckets else {}))
    return Gauge(*args, registry=registry)


def snapshot_family(family: Family) -> Metric:
    """An empty metric family for a custom collector to fill at a scrape (gauge or counter)."""
    cls = CounterMetricFamily if family.kind is Kind.COUNTER else GaugeMetricFamily
    return cls(family.name, family.help, labels=list(family.labels))
