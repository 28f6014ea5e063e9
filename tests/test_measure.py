"""Benchmark memory is the peak of the measured job's own process tree, whatever its parent holds."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gateway.ops.bench.measure import isolated
from tests import pool_jobs

HOLD_1GB_THEN_MEASURE = """
from tests.conftest import *  # noqa: F403 - the same import path as the test
from tests.pool_jobs import _touch, alloc_report
from gateway.ops.bench.measure import isolated
ballast = _touch(1024)
print(isolated(alloc_report, 200)["peak_rss_mb"])
"""


def test_a_job_measures_the_same_from_a_lean_parent_and_from_one_holding_1_gb():
    lean = isolated(pool_jobs.alloc_report, 200)["peak_rss_mb"]
    res = subprocess.run([sys.executable, "-c", HOLD_1GB_THEN_MEASURE], capture_output=True, text=True, check=True)
    fat = float(res.stdout.strip().splitlines()[-1])
    assert 200 <= lean < 400  # the 200 MB it holds, plus an interpreter
    assert fat == pytest.approx(lean, rel=0.10)  # ru_maxrss gave 216 MB lean and 1,040 MB from this parent


def test_the_peak_includes_the_jobs_child_processes():
    assert isolated(pool_jobs.child_alloc_report, 300)["peak_rss_mb"] >= 300
