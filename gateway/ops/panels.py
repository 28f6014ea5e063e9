"""Building blocks of Grafana's dashboard JSON model (schema 39): variables, panels, a dashboard."""

from __future__ import annotations

SCHEMA_VERSION = 39
DS = {"type": "prometheus", "uid": "${datasource}"}


def variable(name: str, query: str, multi: bool = True) -> dict:
    return {
        "name": name,
        "label": name,
        "type": "query",
        "datasource": DS,
        "refresh": 2,
        "includeAll": True,
        "multi": multi,
        "allValue": ".*",
        "current": {"text": "All", "value": "$__all"},
        "query": {"query": query, "refId": f"var-{name}"},
        "definition": query,
        "sort": 1,
    }


def _datasourcevariable() -> dict:
    return {
        "name": "datasource",
        "label": "Prometheus",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "hide": 0,
    }


def panel(
    pid: int,
    title: str,
    targets: list[tuple[str, str]],
    x: int,
    y: int,
    w: int = 12,
    h: int = 8,
    unit: str = "percentunit",
    kind: str = "timeseries",
    minmax: tuple | None = (0, 1),
) -> dict:
    defaults: dict = {"unit": unit}
    if minmax:
        defaults["min"], defaults["max"] = minmax
    return {
        "id": pid,
        "type": kind,
        "title": title,
        "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {"legend": {"displayMode": "table", "placement": "right", "calcs": ["lastNotNull"]}},
        "targets": [
            {"refId": chr(65 + i), "expr": expr, "legendFormat": legend, "datasource": DS}
            for i, (expr, legend) in enumerate(targets)
        ],
    }


def dashboard(uid: str, title: str, panels: list[dict], variables: list[dict], tags: list[str]) -> dict:
    return {
        "uid": uid,
        "title": title,
        "tags": tags,
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": True,
        "timezone": "browser",
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [_datasourcevariable(), *variables]},
        "panels": panels,
        "annotations": {"list": []},
    }
