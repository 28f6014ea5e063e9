"""The metric catalogue is the one place a series is named (issue 23): every family it lists is exported by the
component that owns it, every series a rule or a dashboard panel references is in it, the generated rules and
dashboards equal what generation writes, and renaming a family there renames it in the collectors, the
dashboards and the rules together."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gateway.core import catalogue as mc
from gateway.core.messages import ScoreRow
from gateway.monitor.config import WindowSettings
from gateway.monitor.exporter import MonitorMetrics
from gateway.monitor.store import Store
from gateway.ops import grafana, rules
from gateway.stream.live import LiveMetrics
from tests.support.monitor import NOW, Clock, stream

ROOT = Path(__file__).resolve().parent.parent
COPIES = (
    ROOT / "dashboards" / "prometheus" / "lastmile-rules.yaml",
    ROOT / "helm" / "lastmile-gateway" / "files" / "lastmile-rules.yaml",
    rules.RULES,
)
SERIES = re.compile(r"(?<![\w:])lastmile_\w+(?![\w:])")  # a selector's metric name (a recorded name has colons)
QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')  # label values are not metric names


def referenced(expr: str) -> set[str]:
    """The lastmile_* series a PromQL expression selects (Grafana's $variables are not names)."""
    return set(SERIES.findall(QUOTED.sub('""', expr)))


def rule_exprs(text: str) -> list[str]:
    return [r["expr"] for g in yaml.safe_load(text)["groups"] for r in g["rules"]]


def panel_exprs() -> list[str]:
    return [e for text in grafana.render().values() for e in grafana.expressions(json.loads(text))]


def exported(registry: CollectorRegistry) -> dict[str, str]:
    """Family name -> type of every family with at least one sample on a scrape of ``registry`` (the text format
    shows a counter's or histogram's ``_created`` as a gauge family of its own: folded back)."""
    page = generate_latest(registry).decode()
    found = {f.name: f.type for f in text_string_to_metric_families(page) if f.samples}
    return {n: t for n, t in found.items() if not (n.endswith("_created") and n.removesuffix("_created") in found)}


def gateway_registry() -> CollectorRegistry:
    """A gateway's metrics after it published labelled scores and failed rows, as the service observes them
    (``observe_detectors`` on a real pipeline: tests/test_gpu_placement.py)."""
    m = LiveMetrics()
    base = dict(detector="npr", detector_version="1", runtime="embedded", threshold=0.0, transform_s=0.1)
    rows = [
        ScoreRow(video_id=f"v{i}", condition=c, score=float(i), decision=bool(i % 2), sample_s=0.01, **base)
        for i in range(4)
        for c in ("original", "full")
    ]
    rows.append(ScoreRow(video_id="bad", condition="full", error="x", error_kind="video", **base))
    chat = dict(detector="chat-d", detector_version="1", runtime="chat", condition="full", tokens_in=9, tokens_out=2)
    rows.append(ScoreRow(video_id="v0", decision=True, **chat))  # a chat verdict, and a reply that said none
    rows.append(ScoreRow(video_id="v1", error="no verdict", error_kind="reply", error_class="UnparsedReply", **chat))
    m.observe_rows(rows, 0.01)
    m.observe_condition_seconds("full", 0.2)
    m.detector_info.labels("npr", "1", "embedded", "CPUExecutionProvider").set(1)
    m.videos.labels("scored").inc()
    m.dead_letters.labels("InvalidVideo").inc()
    m.retries.inc()
    m.runtime_up.labels("scorer").set(1)
    m.worker_failures.labels("WorkerCrashed").inc()
    return m.registry


def monitor_registry() -> CollectorRegistry:
    """A monitor's metrics with full windows: labelled, paired and label-free series for two detectors."""
    truth, rows = stream(np.random.default_rng(5), n=80)
    store = Store(WindowSettings(count=40), Clock())
    for row in rows:
        store.add_score(row, 0.0)
    for vid, label in truth.items():
        store.add_label(vid, label, NOW)
    m = MonitorMetrics(store, store.settings, Clock(), lambda: True)
    m.runtime_up.labels("broker").set(1)
    m.lag.labels("lastmile.scores").set(0)
    m.invalid.labels("lastmile.scores").inc()
    m.caught_up.set(1)
    return m.registry


def test_names_are_unique_lastmile_and_carry_their_unit():
    names = [s for f in mc.families() for s in {f.name, *f.series}]
    assert len(names) == len(set(names)), "two families share a name or a scraped series"
    for f in mc.families():
        assert f.name.startswith("lastmile_") and not f.name.endswith("_total"), f.name
        assert f.help and f.exporters and (not f.unit or f.name.endswith("_" + f.unit)), f.name
        assert bool(f.buckets) <= (f.kind is mc.Kind.HISTOGRAM), f.name
    assert mc.keyed()["AUC_DRIFT_UPPER"].name == "lastmile_auc_drift_upper"
    assert mc.family_of("lastmile_stage_seconds_bucket") is mc.STAGE_SECONDS and mc.family_of("lastmile_x") is None


@pytest.mark.parametrize(
    ("build", "owners"),
    [(gateway_registry, {mc.Exporter.GATEWAY}), (monitor_registry, {mc.Exporter.MONITOR, mc.Exporter.WINDOWS})],
)
def test_every_catalogue_family_is_exported_by_its_owner_and_nothing_else(build, owners):
    scraped = exported(build())
    want = {f.name: f for f in mc.families() if owners & set(f.exporters)}
    assert set(scraped) == set(want), "exported families differ from the catalogue's"
    for name, family in want.items():  # an info family is a gauge of value 1 on the wire
        assert scraped[name] == ("gauge" if family.kind is mc.Kind.INFO else family.kind.value), name


def test_every_series_a_rule_or_panel_references_is_in_the_catalogue():
    exprs = rule_exprs(rules.render()) + panel_exprs()
    used = set().union(*map(referenced, exprs))
    assert {"lastmile_auc_drift_upper", "lastmile_videos_total", "lastmile_score_bucket"} <= used
    unknown = {s for s in used if mc.family_of(s) is None}
    assert not unknown, f"series referenced by rules or dashboards but not in the catalogue: {sorted(unknown)}"
    assert referenced('sum(rate(lastmile_x_total{a="lastmile_y"}[5m])) / a:lastmile_z:b') == {"lastmile_x_total"}


def test_the_rules_template_names_every_series_through_the_catalogue():
    """A literal name in the template would survive a rename: every catalogue series there is an @{KEY}."""
    body = rules.TEMPLATE_ONLY.sub("", rules.TEMPLATE.read_text())
    body = "\n".join(line for line in body.splitlines() if not line.lstrip().startswith("#"))
    literal = {t for t in re.findall(r"lastmile_\w+", body) if any(t.startswith(f.name) for f in mc.families())}
    assert not literal, f"spell these as @{{KEY}} in {rules.TEMPLATE.name}: {sorted(literal)}"
    with pytest.raises(KeyError, match="NO_SUCH"):
        rules.RulesTemplate("x: @{NO_SUCH}").substitute({})


def test_every_rules_copy_is_the_rendered_template():
    text = rules.render()
    for path in COPIES:
        assert path.read_text() == text, f"{path} is stale: run `lastmile dashboards generate --chart helm/...`"
    assert rules.RULES == grafana.RULES  # the one `lastmile up` copies


def test_no_module_but_the_catalogue_spells_a_series_name():
    """String literals (docstrings aside) of every gateway module: a metric name there would escape a rename."""
    names = {s for f in mc.families() for s in (f.name, *f.series)}
    found = []
    for path in sorted((ROOT / "gateway").rglob("*.py")):
        if path.name == "catalogue.py" and path.parent.name == "core":
            continue
        tree = ast.parse(path.read_text())
        docs = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef) and node.body
            if isinstance(node.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                found += [(path.name, t) for t in re.findall(r"lastmile_\w+", node.value) if t in names]
    assert not found, found


def test_renaming_a_family_in_the_catalogue_renames_it_in_collectors_dashboards_and_rules(monkeypatch):
    monkeypatch.setattr(mc, "VIDEOS", replace(mc.VIDEOS, name="lastmile_videos_finished"))
    monkeypatch.setattr(mc, "AUC", replace(mc.AUC, name="lastmile_roc_auc"))
    new = {"lastmile_videos_finished", "lastmile_roc_auc", "lastmile_roc_auc_lower", "lastmile_roc_auc_upper"}
    old = {"lastmile_videos", "lastmile_auc", "lastmile_auc_lower", "lastmile_auc_upper"}
    scraped = set(exported(gateway_registry())) | set(exported(monitor_registry()))
    assert new <= scraped and not old & scraped
    series = set().union(*map(referenced, rule_exprs(rules.render()) + panel_exprs()))
    families = {mc.family_of(s) for s in series}
    assert None not in families and new <= {f.name for f in families} and not old & {f.name for f in families}
    text = rules.render() + "".join(grafana.render().values())
    assert "lastmile_roc_auc_upper" in text and ":lastmile_roc_auc:time" in text and ":lastmile_auc:" not in text
