"""The example configurations load and validate, document every setting, and comment each one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gateway.core.config import GatewayConfig
from gateway.monitor.config import MonitorConfig

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _keys(tree: dict, prefix: str = "") -> set[str]:
    out = set()
    for k, v in tree.items():
        out.add(prefix + k)
        if isinstance(v, dict):
            out |= _keys(v, f"{prefix}{k}.")
    return out


@pytest.mark.parametrize("name, model", [("gateway.yaml", GatewayConfig), ("monitor.yaml", MonitorConfig)])
def test_each_example_config_loads_and_documents_every_setting(monkeypatch, name, model):
    for var in [n for n in __import__("os").environ if n.startswith("LASTMILE_")]:
        monkeypatch.delenv(var)
    path = EXAMPLES / name
    cfg = model.load(path)
    assert cfg == model()  # every value shown is the default, so the comments can say "default"
    every_setting = _keys(json.loads(model().model_dump_json()))
    assert _keys(yaml.safe_load(path.read_text())) == every_setting  # none missing, none unknown
    settings = [line for line in path.read_text().splitlines() if ":" in line.split("#")[0]]
    uncommented = [line for line in settings if not line.rstrip().endswith(":") and "#" not in line]
    assert uncommented == []  # field by field


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")))
def test_every_example_is_valid_yaml(path):
    assert isinstance(yaml.safe_load(path.read_text()), dict)
