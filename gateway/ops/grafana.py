"""Grafana dashboards as code: ``lastmile dashboards generate`` writes ``dashboards/grafana/*.json``.

Two dashboards: robustness (the monitor's AUC, FakeR, RealR per condition with their 95% intervals, drift vs
original, label-free flips and score shift, and the A/B view) and pipeline health (the gateways' throughput,
stage latency, lag, DLQ, Triton). Variables: detector, version, condition, population. Every expression uses
only metrics a gateway or the monitor exports, Triton ``nv_*`` metrics, or recording rules from
``dashboards/prometheus/lastmile-rules.yaml`` (checked by the tests).
"""

from __future__ import annotations

import json
from pathlib import Path

from gateway.ops.panels import dashboard, panel, variable

SEL = 'detector=~"$detector", version=~"$version", condition=~"$condition"'
MON = SEL + ', population=~"$population", window="time"'  # the monitor's series, time window
SERIES = "{{detector}} {{version}} {{condition}} {{population}}"


def _banded(metric: str) -> list[tuple[str, str]]:
    """A windowed estimate with its 95% interval's bounds, as three targets."""
    return [
        (f"{metric}{{{MON}}}", SERIES),
        (f"{metric}_lower{{{MON}}}", SERIES + " lower"),
        (f"{metric}_upper{{{MON}}}", SERIES + " upper"),
    ]


def robustness() -> dict:
    """The monitor's series: one computation over every gateway replica's score events."""
    free = SEL + ', window="time", population="traffic"'
    panels = [
        panel(1, "AUC per condition, DeLong 95% interval (time window)", _banded("lastmile_auc"), 0, 0),
        panel(
            2,
            "AUC drift vs original, same videos (paired DeLong)",
            _banded("lastmile_auc_drift"),
            12,
            0,
            minmax=(-1, 1),
        ),
        panel(3, "FakeR per condition, Wilson 95% interval", _banded("lastmile_fake_recall"), 0, 8),
        panel(4, "RealR per condition, Wilson 95% interval", _banded("lastmile_real_recall"), 12, 8),
        panel(5, "FakeR drift vs original, same videos", _banded("lastmile_fake_recall_drift"), 0, 16, minmax=(-1, 1)),
        panel(
            6,
            "Label-free: decision flips vs original (traffic)",
            [(f"lastmile_flip_rate{{{free}}}", "{{detector}} {{version}} {{condition}} {{direction}}")],
            12,
            16,
        ),
        panel(
            7,
            "Label-free: KS distance to original's scores (traffic)",
            [(f"lastmile_score_ks_statistic{{{free}}}", "{{detector}} {{version}} {{condition}}")],
            0,
            24,
        ),
        panel(
            8,
            "Label-free: mean score shift vs original (traffic)",
            [(f"lastmile_score_shift_mean{{{free}}}", "{{detector}} {{version}} {{condition}}")],
            12,
            24,
            unit="short",
            minmax=None,
        ),
        panel(
            9,
            "A/B: AUC spread between versions of a detector",
            [
                (
                    "detector_condition_population:lastmile_auc:version_spread"
                    '{detector=~"$detector", condition=~"$condition", population=~"$population"}',
                    "{{detector}} {{condition}} {{population}}",
                )
            ],
            0,
            32,
            minmax=(0, 1),
        ),
        panel(
            10,
            "A/B: AUC by version",
            [(f"detector_version_condition_population:lastmile_auc:time{{{SEL}}}", SERIES)],
            12,
            32,
        ),
        panel(
            11,
            "Labelled samples in the window, by true label",
            [(f"lastmile_window_samples{{{MON}}}", SERIES + " {{label}}")],
            0,
            40,
            unit="short",
            minmax=None,
        ),
        panel(
            12,
            "Age of each series' latest sample",
            [
                (
                    f'time() - lastmile_window_last_sample_timestamp_seconds{{{SEL}, population=~"$population"}}',
                    SERIES,
                )
            ],
            12,
            40,
            unit="s",
            minmax=None,
        ),
        panel(
            13,
            "Score distribution (p50), all traffic",
            [
                (
                    f"histogram_quantile(0.5, sum by (detector, version, condition, le) "
                    f"(rate(lastmile_score_bucket{{{SEL}}}[15m])))",
                    "{{detector}} {{version}} {{condition}}",
                )
            ],
            0,
            48,
            unit="short",
            minmax=None,
        ),
    ]
    variables = [
        variable("detector", "label_values(lastmile_window_videos, detector)"),
        variable("version", 'label_values(lastmile_window_videos{detector=~"$detector"}, version)'),
        variable("condition", "label_values(lastmile_window_videos, condition)"),
        variable("population", "label_values(lastmile_window_last_sample_timestamp_seconds, population)"),
    ]
    return dashboard("lastmile-robustness", "LastMile robustness", panels, variables, ["lastmile", "robustness"])


def pipeline() -> dict:
    panels = [
        panel(
            1,
            "Videos per second by outcome",
            [("outcome:lastmile_videos:rate5m", "{{outcome}}")],
            0,
            0,
            unit="ops",
            minmax=None,
        ),
        panel(2, "Dead-letter ratio", [(":lastmile_videos_dead_lettered:ratio_rate5m", "dead-lettered")], 12, 0),
        panel(
            3, "Stage latency p95", [("stage:lastmile_stage_seconds:p95_5m", "{{stage}}")], 0, 8, unit="s", minmax=None
        ),
        panel(
            4,
            "Condition encode time p95",
            [
                (
                    "histogram_quantile(0.95, sum by (condition, le) "
                    '(rate(lastmile_condition_seconds_bucket{condition=~"$condition"}[5m])))',
                    "{{condition}}",
                )
            ],
            12,
            8,
            unit="s",
            minmax=None,
        ),
        panel(5, "Consumer lag", [(":lastmile_consumer_lag_messages:sum", "lag")], 0, 16, unit="short", minmax=None),
        panel(
            6,
            "Dead letters by error class",
            [("sum by (outcome) (rate(lastmile_dead_letters_total[5m]))", "{{outcome}}")],
            12,
            16,
            unit="ops",
            minmax=None,
        ),
        panel(
            7,
            "In flight and retries",
            [("sum(lastmile_in_flight_videos)", "in flight"), ("sum(rate(lastmile_retries_total[5m]))", "retries/s")],
            0,
            24,
            unit="short",
            minmax=None,
        ),
        panel(
            8,
            "Row errors by kind",
            [("sum by (outcome) (rate(lastmile_errors_total[5m]))", "{{outcome}}")],
            12,
            24,
            unit="ops",
            minmax=None,
        ),
        panel(
            9,
            "Triton: inferences per second",
            [("sum by (model) (rate(nv_inference_request_success[5m]))", "{{model}}")],
            0,
            32,
            unit="ops",
            minmax=None,
        ),
        panel(
            10,
            "Triton: mean queue time",
            [("model:nv_inference_queue_seconds:mean_rate5m", "{{model}}")],
            12,
            32,
            unit="s",
            minmax=None,
        ),
        panel(
            11,
            "Triton: mean compute time",
            [
                (
                    "sum by (model) (rate(nv_inference_compute_infer_duration_us[5m])) / 1e6 "
                    "/ sum by (model) (rate(nv_inference_request_success[5m]))",
                    "{{model}}",
                )
            ],
            0,
            40,
            unit="s",
            minmax=None,
        ),
        panel(
            12,
            "Triton: failed requests",
            [("sum by (model) (rate(nv_inference_request_failure[5m]))", "{{model}}")],
            12,
            40,
            unit="ops",
            minmax=None,
        ),
    ]
    variables = [variable("condition", "label_values(lastmile_condition_seconds_bucket, condition)")]
    return dashboard("lastmile-pipeline", "LastMile pipeline health", panels, variables, ["lastmile", "pipeline"])


DASHBOARDS = {"lastmile-robustness.json": robustness, "lastmile-pipeline.json": pipeline}


def render() -> dict[str, str]:
    return {name: json.dumps(fn(), indent=2, sort_keys=True) + "\n" for name, fn in DASHBOARDS.items()}


RULES = Path(__file__).resolve().parent / "data" / "lastmile-rules.yaml"  # the one rules source, shipped in the wheel


def write(folder: Path, chart: Path | None = None) -> list[Path]:
    """Write ``folder/grafana/*.json`` and ``folder/prometheus/lastmile-rules.yaml``, and nothing elsewhere; with
    ``chart`` (a Helm chart's folder), also copy both into ``chart/files`` (Helm reads only files inside a chart)."""
    # (where the dashboards go, where the rules go): the user's layout, then the chart's
    targets = [(folder / "grafana", folder / "prometheus")]
    targets += [(chart / "files" / "grafana", chart / "files")] if chart else []
    boards, rules = render(), RULES.read_text()
    out = []
    for grafana_dir, rules_dir in targets:
        for path, text in [*((grafana_dir / n, t) for n, t in boards.items()), (rules_dir / RULES.name, rules)]:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            out.append(path)
    return out


def expressions(dashboard: dict) -> list[str]:
    """Every PromQL expression of a dashboard (panel targets and variable queries' inner selectors)."""
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for v in dashboard["templating"]["list"]:
        q = v.get("query")
        if isinstance(q, dict) and q["query"].startswith("label_values("):
            inner = q["query"][len("label_values(") : -1].rsplit(",", 1)[0]
            exprs.append(inner)
    return exprs
