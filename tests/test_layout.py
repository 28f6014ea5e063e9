"""The shape of the code: small modules, every package shipped in the wheel. (Import layering and cycles are
checked by import-linter in tests/run.sh, from the contracts in pyproject.toml.)"""

from __future__ import annotations

import tomllib
import warnings
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parent.parent
ROOMS = ("transforms", "detectors", "gateway")
WARN_LINES = 300  # a module past this is worth a look: does it hold more than one concern?
MAX_LINES = 500  # past this, it does: split it by concern (never by count alone)


def _lengths() -> dict[str, int]:
    return {
        str(f.relative_to(ROOT)): len(f.read_text().splitlines()) for room in ROOMS for f in (ROOT / room).rglob("*.py")
    }


def test_no_module_over_500_lines_and_a_warning_past_300():
    lengths = _lengths()
    long = {name: n for name, n in lengths.items() if n > WARN_LINES}
    if long:
        warnings.warn(f"modules over {WARN_LINES} lines (a look: one concern each?): {long}", stacklevel=1)
    assert {name: n for name, n in lengths.items() if n > MAX_LINES} == {}


def test_the_wheel_lists_every_package():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = set(find_packages(str(ROOT), include=[f"{r}*" for r in ROOMS]))
    assert found <= listed, f"packages missing from pyproject.toml: {sorted(found - listed)}"


def test_the_cli_and_the_monitor_start_without_the_media_stack():
    """``lastmile monitor run`` (and ``lastmile --help``) loads neither the transforms' codecs (PyAV, Pillow,
    ffmpeg) nor a model runtime: about 22 MB of the monitor's memory and half the CLI's start-up time. The
    monitor processes of ``lastmile bench monitor`` load no more than the service (so their RSS is its own)."""
    import subprocess
    import sys

    heavy = ("av", "PIL", "ffmpeg", "imageio_ffmpeg", "transforms.spec", "onnxruntime", "torch", "matplotlib")
    imports = "gateway.cli, gateway.monitor.service, gateway.ops.bench.measure, gateway.ops.bench.monitor_jobs"
    code = f"import sys, {imports}; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_package_version_is_one_figure():
    """Reports say which lastmile-gateway wrote them (gateway.__version__): it must be the one pip installs."""
    import gateway

    root = Path(__file__).resolve().parent.parent
    assert tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"] == gateway.__version__
