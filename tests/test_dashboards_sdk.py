"""The dashboards built with Grafana's SDK (gateway/ops/panels.py) against the hand-built JSON they replaced
(tests/data/grafana-hand-built/): the same panels, queries, legends, units, ranges, positions, repeats and
variables; and the JSON the SDK writes loads back into the SDK's own model unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import Dashboard

from gateway.ops import grafana

HAND_BUILT = Path(__file__).parent / "data" / "grafana-hand-built"
BOARDS = sorted(grafana.DASHBOARDS)


def _panel(p: dict) -> dict:
    d = p["fieldConfig"]["defaults"]
    return {
        "type": p["type"],
        "title": p["title"],
        "gridPos": p["gridPos"],
        "datasource": p["datasource"],
        "unit": d["unit"],
        "range": (d.get("min"), d.get("max")),
        "repeat": (p.get("repeat"), p.get("repeatDirection") if p.get("repeat") else None),
        "legend": {k: p["options"]["legend"][k] for k in ("displayMode", "placement", "calcs")},
        "targets": [(t["refId"], t["expr"], t["legendFormat"], t["datasource"]["uid"]) for t in p["targets"]],
    }


def _variable(v: dict) -> dict:
    q = v.get("query")
    keys = ("name", "label", "type", "allValue", "refresh", "sort")
    absent_is_false = {k: v.get(k, False) for k in ("includeAll", "multi")}  # Grafana's defaults, written or not
    return {k: v.get(k) for k in keys} | absent_is_false | {"query": q.get("query") if isinstance(q, dict) else q}


def _board(b: dict) -> dict:
    return {k: b[k] for k in ("uid", "title", "tags", "refresh", "time", "timezone", "editable")}


@pytest.mark.parametrize("name", BOARDS)
def test_the_sdks_dashboard_equals_the_hand_built_one(name):
    sdk = json.loads(grafana.render()[name])
    hand = json.loads((HAND_BUILT / name).read_text())
    assert _board(sdk) == _board(hand)
    assert [_panel(p) for p in sdk["panels"]] == [_panel(p) for p in hand["panels"]]
    assert [_variable(v) for v in sdk["templating"]["list"]] == [_variable(v) for v in hand["templating"]["list"]]
    assert sdk["schemaVersion"] >= hand["schemaVersion"]
    assert sorted(grafana.expressions(sdk)) == sorted(grafana.expressions(hand))


@pytest.mark.parametrize("name", BOARDS)
def test_the_written_json_loads_back_into_the_sdk_unchanged(name):
    text = grafana.render()[name]
    model = Dashboard.from_json(json.loads(text))
    assert json.loads(JSONEncoder().encode(model)) == json.loads(text)
    assert len(model.panels) == len(json.loads(text)["panels"]) and model.templating.list_val
