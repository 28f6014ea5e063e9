"""Grafana dashboards as code: ``lastmile dashboards generate`` writes ``dashboards/grafana/*.json``, built with
Grafana's own SDK (:mod:`gateway.ops.panels`).

Two dashboards: robustness (the monitor's AUC, FakeR, RealR per condition with their 95% intervals, drift vs
original, label-free flips and score shift, and the A/B view) and pipeline health (the gateways' throughput,
stage latency, lag, DLQ, Triton). Variables: detector, version, condition, population. Every expression uses
only metrics a gateway or the monitor exports, Triton ``nv_*`` metrics, or recording rules from
``dashboards/prometheus/lastmile-rules.yaml`` (checked by the tests).
"""

from __future__ import annotations

import json
from pathlib import Path

from gateway.core import catalogue as mc
from gateway.core.catalogue import Family
from gateway.ops import rules
from gateway.ops.ab_dashboard import comparisons
from gateway.ops.panels import dashboard, panel, variable

SEL = 'detector=~"$detector", version=~"$version", condition=~"$condition"'
MON = SEL + ', population=~"$population", window="time"'  # the monitor's series, time window
SERIES = "{{detector}} {{version}} {{condition}} {{population}}"


def _banded(family: Family) -> list[tuple[str, str]]:
    """A windowed estimate with its 95% interval's bounds, as three targets."""
    lower, upper = family.bounds()
    return [
        (f"{family.name}{{{MON}}}", SERIES),
        (f"{lower.name}{{{MON}}}", SERIES + " lower"),
        (f"{upper.name}{{{MON}}}", SERIES + " upper"),
    ]


def robustness() -> dict:
    """The monitor's series: one computation over every gateway replica's score events."""
    free = SEL + ', window="time", population="traffic"'
    panels = [
        panel(1, "AUC per condition, DeLong 95% interval (time window)", _banded(mc.AUC), 0, 0),
        panel(
            2,
            "AUC drift vs original, same videos (paired DeLong)",
            _banded(mc.AUC_DRIFT),
            12,
            0,
            minmax=(-1, 1),
        ),
        panel(3, "FakeR per condition, Wilson 95% interval", _banded(mc.FAKE_RECALL), 0, 8),
        panel(4, "RealR per condition, Wilson 95% interval", _banded(mc.REAL_RECALL), 12, 8),
        panel(5, "FakeR drift vs original, same videos", _banded(mc.FAKE_RECALL_DRIFT), 0, 16, minmax=(-1, 1)),
        panel(
            6,
            "Label-free: decision flips vs original (traffic)",
            [(f"{mc.FLIP_RATE.name}{{{free}}}", "{{detector}} {{version}} {{condition}} {{direction}}")],
            12,
            16,
        ),
        panel(
            7,
            "Label-free: KS distance to original's scores (traffic)",
            [(f"{mc.SCORE_KS.name}{{{free}}}", "{{detector}} {{version}} {{condition}}")],
            0,
            24,
        ),
        panel(
            8,
            "Label-free: mean score shift vs original (traffic)",
            [(f"{mc.SCORE_SHIFT_MEAN.name}{{{free}}}", "{{detector}} {{version}} {{condition}}")],
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
                    f"detector_condition_population:{mc.AUC.name}:version_spread"
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
            [(f"detector_version_condition_population:{mc.AUC.name}:time{{{SEL}}}", SERIES)],
            12,
            32,
        ),
        panel(
            11,
            "Labelled samples in the window, by true label",
            [(f"{mc.WINDOW_SAMPLES.name}{{{MON}}}", SERIES + " {{label}}")],
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
                    f'time() - {mc.LAST_SAMPLE_TIME.name}{{{SEL}, population=~"$population"}}',
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
                    f"(rate({mc.SCORE.name}_bucket{{{SEL}}}[15m])))",
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
        variable("detector", f"label_values({mc.WINDOW_VIDEOS.name}, detector)"),
        variable("version", f'label_values({mc.WINDOW_VIDEOS.name}{{detector=~"$detector"}}, version)'),
        variable("condition", f"label_values({mc.WINDOW_VIDEOS.name}, condition)"),
        variable("population", f"label_values({mc.LAST_SAMPLE_TIME.name}, population)"),
    ]
    return dashboard("lastmile-robustness", "LastMile robustness", panels, variables, ["lastmile", "robustness"])


def pipeline() -> dict:
    panels = [
        panel(
            1,
            "Videos per second by outcome",
            [(f"outcome:{mc.VIDEOS.name}:rate5m", "{{outcome}}")],
            0,
            0,
            unit="ops",
            minmax=None,
        ),
        panel(2, "Dead-letter ratio", [(f":{mc.VIDEOS.name}_dead_lettered:ratio_rate5m", "dead-lettered")], 12, 0),
        panel(
            3,
            "Stage latency p95",
            [(f"stage:{mc.STAGE_SECONDS.name}:p95_5m", "{{stage}}")],
            0,
            8,
            unit="s",
            minmax=None,
        ),
        panel(
            4,
            "Condition encode time p95",
            [
                (
                    "histogram_quantile(0.95, sum by (condition, le) "
                    f'(rate({mc.CONDITION_SECONDS.name}_bucket{{condition=~"$condition"}}[5m])))',
                    "{{condition}}",
                )
            ],
            12,
            8,
            unit="s",
            minmax=None,
        ),
        panel(5, "Consumer lag", [(f":{mc.CONSUMER_LAG.name}:sum", "lag")], 0, 16, unit="short", minmax=None),
        panel(
            6,
            "Dead letters by error class",
            [(f"sum by (outcome) (rate({mc.DEAD_LETTERS.name}_total[5m]))", "{{outcome}}")],
            12,
            16,
            unit="ops",
            minmax=None,
        ),
        panel(
            7,
            "In flight and retries",
            [(f"sum({mc.IN_FLIGHT.name})", "in flight"), (f"sum(rate({mc.RETRIES.name}_total[5m]))", "retries/s")],
            0,
            24,
            unit="short",
            minmax=None,
        ),
        panel(
            8,
            "Row errors by kind",
            [(f"sum by (outcome) (rate({mc.ERRORS.name}_total[5m]))", "{{outcome}}")],
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
    variables = [variable("condition", f"label_values({mc.CONDITION_SECONDS.name}_bucket, condition)")]
    return dashboard("lastmile-pipeline", "LastMile pipeline health", panels, variables, ["lastmile", "pipeline"])


DASHBOARDS = {
    "lastmile-robustness.json": robustness,
    "lastmile-pipeline.json": pipeline,
    "lastmile-comparisons.json": comparisons,
}


def render() -> dict[str, str]:
    return {name: json.dumps(fn(), indent=2, sort_keys=True) + "\n" for name, fn in DASHBOARDS.items()}


RULES = rules.RULES  # the rendered rules shipped in the wheel (``lastmile up`` copies them)


def write(folder: Path, chart: Path | None = None) -> list[Path]:
    """Write ``folder/grafana/*.json`` and ``folder/prometheus/lastmile-rules.yaml``, and nothing elsewhere; with
    ``chart`` (a Helm chart's folder), also copy both into ``chart/files`` (Helm reads only files inside a chart)."""
    # (where the dashboards go, where the rules go): the user's layout, then the chart's
    targets = [(folder / "grafana", folder / "prometheus")]
    targets += [(chart / "files" / "grafana", chart / "files")] if chart else []
    boards, rules_text = render(), rules.render()
    out = []
    for grafana_dir, rules_dir in targets:
        for path, text in [*((grafana_dir / n, t) for n, t in boards.items()), (rules_dir / RULES.name, rules_text)]:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            out.append(path)
    return out


def expressions(dashboard: dict) -> list[str]:
    """Every PromQL expression of a dashboard (panel targets and variable queries' inner selectors)."""
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for v in dashboard["templating"]["list"]:
        q = v.get("query")
        q = q.get("query", "") if isinstance(q, dict) else q  # (Grafana stores it as a string or an object)
        if v.get("type") == "query" and isinstance(q, str) and q.startswith("label_values("):
            exprs.append(q[len("label_values(") : -1].rsplit(",", 1)[0])
    return exprs
