"""Prometheus rules, Grafana dashboards and the Helm chart (issue: dashboards, alert rules and the chart)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.request

import pytest
import yaml

from gateway.core.config import GatewayConfig
from gateway.core.messages import ScoreRow
from gateway.ops import grafana
from tests.support.deploy import CHART, NAME, ROOT, _helm
from tests.support.tools import require_tool

RULES = ROOT / "dashboards" / "prometheus" / "lastmile-rules.yaml"


def _rule_exprs() -> list[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [r["expr"] for g in groups for r in g["rules"]]


def _recorded() -> set[str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {r["record"] for g in groups for r in g["rules"] if "record" in r}


def _dashboard_exprs() -> list[str]:
    exprs = []
    for text in grafana.render().values():
        exprs += grafana.expressions(json.loads(text))
    return exprs


def test_promtool_checks_and_unit_tests_the_rules():
    promtool = require_tool("promtool")
    subprocess.run([promtool, "check", "rules", str(RULES)], check=True, capture_output=True)
    res = subprocess.run(
        [promtool, "test", "rules", "lastmile-rules.test.yaml"],
        cwd=RULES.parent / "tests",
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


def test_every_dashboard_expression_parses(tmp_path):
    promtool = require_tool("promtool")
    exprs = [re.sub(r"\$\{?\w+\}?", ".*", e) for e in _dashboard_exprs()]  # Grafana variables -> regexes
    rules = {
        "groups": [
            {
                "name": "dashboards",
                "rules": [{"record": f"dashboard:expr:n{i}", "expr": e} for i, e in enumerate(exprs)],
            }
        ]
    }
    path = tmp_path / "dashboard-exprs.yaml"
    path.write_text(yaml.safe_dump(rules))
    res = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"{len(exprs)} rules found" in res.stdout


@pytest.fixture(scope="module")
def scraped_names() -> set[str]:
    """Metric names on a real /metrics page of a gateway that has published labelled scores."""
    from gateway.stream.service import Gateway

    gw = Gateway(GatewayConfig(http_port=0, http_host="127.0.0.1"))
    port = gw.start_http()
    base = dict(
        detector="npr",
        detector_version="1",
        runtime="embedded",
        threshold=0.0,
        transform_s=0.1,
        variant_s=0.05,
        sample_s=0.01,
        infer_s=0.01,
    )
    rows = [
        ScoreRow(
            video_id=f"v{i}",
            condition=c,
            label=("generated" if i % 2 else "real"),
            score=float(i),
            decision=bool(i % 2),
            **base,
        )
        for i in range(4)
        for c in ("original", "full")
    ]
    rows.append(
        ScoreRow(
            video_id="bad",
            condition="original",
            error="x",
            error_kind="video",
            error_class="InvalidVideo",
            **{k: v for k, v in base.items() if k not in ("threshold",)},
        )
    )
    gw.metrics.observe_rows(rows, 0.01)
    gw.metrics.observe_condition_seconds("full", 0.2)
    gw.metrics.stage.labels("end_to_end").observe(1.0)
    gw.metrics.videos.labels("scored").inc()
    gw.metrics.dead_letters.labels("InvalidVideo").inc()
    gw.metrics.retries.inc()
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    gw.http.close()
    return _names(text) | _monitor_names(rows)


def _names(text: str) -> set[str]:
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}


def _monitor_names(rows: list[ScoreRow]) -> set[str]:
    """Metric names on a real /metrics page of a monitor holding those rows (labelled, paired, canary too)."""
    import time

    from gateway.monitor.config import MonitorConfig
    from gateway.monitor.service import Monitor

    mon = Monitor(MonitorConfig(http_port=0, comparisons=[{"champion": "npr", "challenger": "npr2"}]))
    port = mon.start_http()
    now = time.time()
    rows = rows + [r.model_copy(update={"detector": "npr2"}) for r in rows]  # a challenger, for the comparisons
    for r in rows:
        for canary in (False, True):
            vid = f"{r.video_id}-{canary}"
            mon.store.add_score(r.model_copy(update={"video_id": vid, "canary": canary, "event_time": now}), now)
    mon.handle(mon.cfg.kafka.labels_topic, b'{"video_id": "v9", "label": "real"}', int(now * 1000))
    mon.handle(mon.cfg.kafka.output_topic, b"not json", None)
    mon.caught_up.set()
    mon.metrics.caught_up.set(1)
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    mon.http.close()
    return _names(text)


def test_every_metric_used_is_exported_triton_or_recorded(scraped_names):
    recorded = _recorded()
    used = set()
    for expr in _rule_exprs() + _dashboard_exprs():
        used |= set(NAME.findall(expr))
    assert {"lastmile_auc", "lastmile_auc_drift_upper", "lastmile_fake_recall_lower", "lastmile_flip_rate"} <= used
    unknown = {n for n in used if not (n in scraped_names or n.startswith("nv_") or n in recorded)}
    assert not unknown, f"metrics used by rules/dashboards but not exported: {sorted(unknown)}"
    for name in scraped_names:  # naming convention: lastmile_ prefix, counters end in _total
        assert name.startswith("lastmile_")


def test_dashboards_are_generated_current_and_in_the_chart():
    for name, text in grafana.render().items():
        assert (ROOT / "dashboards" / "grafana" / name).read_text() == text, "run `lastmile dashboards generate`"
        assert (CHART / "files" / "grafana" / name).read_text() == text
        board = json.loads(text)
        assert board["schemaVersion"] >= 39 and board["uid"].startswith("lastmile-")
    assert (CHART / "files" / RULES.name).read_text() == RULES.read_text()
    # the rendered copy shipped in the wheel (lastmile up); each equals the rendered template:
    # tests/test_metric_catalogue.py
    assert grafana.RULES.read_text() == RULES.read_text(), "run `python -m gateway.ops.rules`"
    robustness = grafana.robustness()
    assert {v["name"] for v in robustness["templating"]["list"]} >= {"detector", "version", "condition"}


def _render(values: dict) -> list[dict]:
    helm = _helm()
    chart = helm.Chart.load(str(CHART))
    chart.validate_schema(values)
    out = chart.render(values, name="lm", namespace="lastmile")
    return [
        doc for path, text in out.items() if not path.endswith("NOTES.txt") for doc in yaml.safe_load_all(text) if doc
    ]


CRDS = {"ServiceMonitor", "PrometheusRule", "ScaledObject", "TriggerAuthentication", "KafkaTopic"}


@pytest.mark.parametrize("values_file", [None, "ci/all-on-values.yaml"])
def test_chart_renders_and_validates(values_file):
    import kubernetes_validate as kv

    values = yaml.safe_load((CHART / values_file).read_text()) if values_file else {}
    docs = _render(values)
    kinds = {d["kind"] for d in docs}
    for doc in docs:
        if doc["kind"] in CRDS:
            assert doc["apiVersion"] and doc["metadata"]["name"] and doc["spec"]
            continue
        kv.validate(doc, "1.30.0", strict=True)  # raises with the path of any schema violation
    if values_file is None:
        assert not kinds & CRDS  # no CRD object without its API or an explicit enable
    else:
        assert kinds >= CRDS
        scaled = next(d for d in docs if d["kind"] == "ScaledObject")
        assert scaled["spec"]["maxReplicaCount"] == 12  # capped by the partitions
        assert scaled["spec"]["triggers"][0]["metadata"]["allowIdleConsumers"] == "false"
        rule = next(d for d in docs if d["kind"] == "PrometheusRule")
        assert {r.get("alert") for g in rule["spec"]["groups"] for r in g["rules"]} >= {
            "LastmileAucDrift",
            "LastmileNoData",
        }
        gateway = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "lm-lastmile-gateway")
        assert "replicas" not in gateway["spec"]  # KEDA owns the replica count
    for dep in (d for d in docs if d["kind"] == "Deployment"):
        pod = dep["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        for c in pod["containers"]:
            assert c["securityContext"]["readOnlyRootFilesystem"] is True and c["resources"]["limits"]
    triton = next(d for d in docs if d["metadata"]["name"].endswith("-triton") and d["kind"] == "Deployment")
    container = triton["spec"]["template"]["spec"]["containers"][0]
    assert container["startupProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    boards = [
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"].get("labels", {}).get("grafana_dashboard") == "1"
    ]
    shipped = sorted(f.name for f in (ROOT / "dashboards" / "grafana").glob("*.json"))
    assert sorted(name for b in boards for name in b["data"]) == shipped and len(boards) == len(shipped) == 3
    monitor = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-monitor"))
    assert monitor["spec"]["replicas"] == 1
    assert monitor["spec"]["template"]["spec"]["containers"][0]["args"][:2] == ["monitor", "run"]
    canaries = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-canary")]
    assert len(canaries) == (values_file is not None)  # optional: only where enabled
    if values_file:
        monitors = [d for d in docs if d["kind"] == "ServiceMonitor"]
        assert {m["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] for m in monitors} == {
            "gateway",
            "monitor",
            "triton",  # the default runtime's Triton: its nv_* series feed the Triton alert and panels
        }


def test_values_schema_rejects_a_wrong_type():
    helm = _helm()
    chart = helm.Chart.load(str(CHART))
    with pytest.raises(helm.HelmValuesError, match="replicas"):
        chart.validate_schema({"gateway": {"replicas": "three"}})
    with pytest.raises(helm.HelmValuesError):
        chart.validate_schema({"gateway": {"fanout": {"policy": "most"}}})
    report = helm.lint(str(CHART), strict=True)
    assert not report["errors"] and all(m["severity"] < 3 for m in report["messages"])


@pytest.mark.parametrize("values_file", [None, "ci/all-on-values.yaml"])
def test_the_charts_monitor_config_is_a_valid_monitor_config(values_file, monkeypatch):
    from gateway.monitor.config import MonitorConfig

    for name in [n for n in os.environ if n.startswith("LASTMILE_")]:
        monkeypatch.delenv(name)
    values = yaml.safe_load((CHART / values_file).read_text()) if values_file else {}
    (cm,) = [d for d in _render(values) if d["kind"] == "ConfigMap" and "monitor.yaml" in d.get("data", {})]
    cfg = MonitorConfig(**yaml.safe_load(cm["data"]["monitor.yaml"]))
    assert cfg.http_host == "0.0.0.0" and cfg.kafka.labels_topic == "lastmile.labels"
    assert cfg.windows.seconds == 3600 and cfg.kafka.output_topic == "lastmile.scores"
    # checkpoints on by default, on the volume the monitor's pod mounts there (a claim where one is named)
    (monitor,) = [
        d for d in _render(values) if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-monitor")
    ]
    pod = monitor["spec"]["template"]["spec"]
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["mountPath"] == str(cfg.checkpoint.directory)]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    claim = (values.get("monitor", {}).get("checkpoint", {})).get("persistentVolumeClaim")
    assert volume == (
        {"name": "checkpoints", "persistentVolumeClaim": {"claimName": claim}}
        if claim
        else {"name": "checkpoints", "emptyDir": {"sizeLimit": "4Gi"}}
    )
    assert not mount.get("readOnly") and cfg.checkpoint.interval_s == (30 if claim else 60)


@pytest.mark.parametrize("values_file", [None, "ci/all-on-values.yaml"])
def test_the_charts_gateway_config_is_a_valid_gateway_config(values_file, monkeypatch):
    """The gateway.yaml the chart renders loads into GatewayConfig (no unknown or ill-typed field), with the
    chart's worker limits, and the default reads no file and reaches no host."""
    for name in [n for n in os.environ if n.startswith("LASTMILE_")]:
        monkeypatch.delenv(name)  # the file alone, as in the pod
    values = yaml.safe_load((CHART / values_file).read_text()) if values_file else {}
    (cm,) = [d for d in _render(values) if d["kind"] == "ConfigMap" and "gateway.yaml" in d.get("data", {})]
    cfg = GatewayConfig(**yaml.safe_load(cm["data"]["gateway.yaml"]))
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())["gateway"]
    chart_limits = {**defaults["limits"], **values.get("gateway", {}).get("limits", {})}
    assert cfg.limits.worker_memory_mb == chart_limits["workerMemoryMb"]
    assert cfg.limits.max_encoder_mb == chart_limits["maxEncoderMb"]
    assert cfg.limits.video_timeout_s == chart_limits["videoTimeoutS"]
    assert cfg.limits.max_attempts == chart_limits["maxAttempts"]
    assert cfg.http_host == "0.0.0.0"  # in a pod the endpoints must be reachable; the code's default is loopback
    if values_file is None:
        assert cfg.sources.file_roots == [] and cfg.sources.http_allow_hosts == []


def test_lastmile_ups_rules_let_the_decision_rate_alert_fire_on_a_folder_of_clips(tmp_path):
    """The decision-rate alert needed 50 videos for 30 minutes, so it never fired in `lastmile up` on the example
    traffic (12 clips, sent once); up's rules fire it after 10 videos for 1 minute, the shipped ones do not."""
    from gateway.ops.rules import RULES as SHIPPED
    from gateway.ops.rules import local

    promtool = require_tool("promtool")
    (tmp_path / "up.yaml").write_text(local(SHIPPED.read_text()))
    (tmp_path / "shipped.yaml").write_text(SHIPPED.read_text())
    at = 'detector="npr", version="1", condition="original", window="time", population="traffic"'
    series = [{"series": f"lastmile_generated_rate{{{at}}}", "values": "0.95x10"},
              {"series": f"lastmile_window_videos{{{at}}}", "values": "12x10"}]  # fmt: skip
    alert = yaml.safe_load(local(SHIPPED.read_text()))
    (rule,) = [
        r for g in alert["groups"] for r in g["rules"] if r.get("alert") == "LastmileDetectorFlagsNearlyEverything"
    ]
    said = {"{{ $labels.detector }}": "npr", "{{ $labels.version }}": "1", "{{ $value | humanizePercentage }}": "95%"}
    annotations = {}
    for key, text in rule["annotations"].items():
        for placeholder, value in said.items():
            text = text.replace(placeholder, value)
        annotations[key] = text
    fired = {"exp_labels": {"severity": "warning", "detector": "npr", "version": "1"}, "exp_annotations": annotations}
    for rules, expected in (("up.yaml", [fired]), ("shipped.yaml", [])):
        test = {"rule_files": [rules], "evaluation_interval": "1m",
                "tests": [{"interval": "1m", "input_series": series,
                           "alert_rule_test": [{"eval_time": "5m", "alertname": "LastmileDetectorFlagsNearlyEverything",
                                                "exp_alerts": expected}]}]}  # fmt: skip
        (tmp_path / f"test-{rules}").write_text(yaml.safe_dump(test))
        res = subprocess.run([promtool, "test", "rules", f"test-{rules}"], cwd=tmp_path, capture_output=True, text=True)
        assert res.returncode == 0 and "SUCCESS" in res.stdout, (rules, res.stdout + res.stderr)
