"""Shared by `tests/test_triton.py`."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.support.tools import IN_CI


def _triton():
    from detectors.errors import TritonNotInstalled
    from detectors.runtimes import triton as client
    from detectors.serving import local

    try:
        local.bundled_server()
    except TritonNotInstalled as exc:
        if IN_CI:
            pytest.fail(f"the bundled tritonserver is required in CI: {exc}")
        pytest.skip(str(exc))
    return SimpleNamespace(LocalTriton=local.LocalTriton, TritonRuntime=client.TritonRuntime)
