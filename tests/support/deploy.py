"""Shared by `tests/test_deploy.py`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.tools import IN_CI

ROOT = Path(__file__).resolve().parents[2]


CHART = ROOT / "helm" / "lastmile-gateway"


NAME = re.compile(r"(?<![\w:])(?:[a-z_]*:[a-z0-9_]+:[a-z0-9_]+|lastmile_[a-z0-9_]+|nv_[a-z0-9_]+)\b")


def _helm():
    try:
        import helm_python
    except ImportError:
        if IN_CI:
            pytest.fail("helm-python-sdk is required in CI")
        pytest.skip("helm-python-sdk not installed")
    return helm_python
