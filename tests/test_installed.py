"""A non-editable install, as a user has it: the wheel installed with ``pip install --no-deps`` into a
``--system-site-packages`` virtualenv whose bin is not on PATH. ``lastmile detectors add`` writes nothing
under site-packages, and the added detector is listed, replayed and served by Triton."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from detectors.repository import list_detectors
from tests.test_triton import _triton

ROOT = Path(__file__).resolve().parent.parent


def _files(folder: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("installed")
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", str(ROOT), "-w", str(tmp / "wheels")],
                   check=True, capture_output=True)  # fmt: skip
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(tmp / "venv")], check=True)
    py = tmp / "venv" / "bin" / "python"
    (wheel,) = (tmp / "wheels").glob("lastmile_gateway-*.whl")
    subprocess.run([str(py), "-m", "pip", "-q", "install", "--no-deps", str(wheel)], check=True, capture_output=True)
    probe = "import gateway, pathlib; print(pathlib.Path(gateway.__file__).parents[1])"
    site = Path(
        subprocess.run([str(py), "-c", probe], cwd=tmp, check=True, capture_output=True, text=True).stdout.strip()
    )
    assert site.is_relative_to(tmp / "venv")  # the installed copy, not this checkout
    env = {k: v for k, v in os.environ.items() if not k.startswith("LASTMILE_") and k != "PYTHONPATH"}
    env.update(HOME=str(tmp / "home"), XDG_DATA_HOME="", PATH="/usr/bin:/bin")  # the venv's bin is not on PATH
    return {"python": str(py), "site": site, "env": env, "tmp": tmp}


def _lastmile(venv: dict, *args: str) -> subprocess.CompletedProcess:
    """The installed `lastmile`, run from outside this checkout (so the checkout is not importable)."""
    return subprocess.run([venv["python"], "-m", "gateway.cli", *args], env=venv["env"], cwd=venv["tmp"],
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def test_add_writes_nothing_under_site_packages_and_the_detector_is_listed_replayed_and_served(venv):
    from detectors.proxy.corpus import CorpusConfig, synthesize

    tmp, site = venv["tmp"], venv["site"]
    shipped = list_detectors()["d3_px"]
    card = yaml.safe_load((shipped.folder / "card.yaml").read_text())
    (tmp / "card.yaml").write_text(yaml.safe_dump({**card, "name": "d3-mine", "version": "2.0.0"}))
    before = _files(site)
    added = _lastmile(venv, "detectors", "add", str(shipped.model_path), "--card", str(tmp / "card.yaml"))
    assert added.returncode == 0, added.stderr
    assert _files(site) == before  # nothing written, nothing touched
    user_repo = tmp / "home" / ".local" / "share" / "lastmile" / "models"
    assert (user_repo / "d3-mine" / "1" / "model.onnx").exists() and (user_repo / "d3-mine" / "config.pbtxt").exists()
    listed = _lastmile(venv, "detectors", "list").stdout
    assert any(line.split()[:2] == ["d3-mine", "user"] for line in listed.splitlines())
    assert any(line.split()[:2] == ["npr", "shipped"] for line in listed.splitlines())

    manifest = synthesize(
        CorpusConfig(anchors=1, seed=58, width=160, height=128, min_seconds=2, max_seconds=2), tmp / "corpus"
    )
    run = _lastmile(venv, "replay", str(manifest), "--detectors", "d3-mine,npr", "--conditions", "original",
                    "--profile", "throughput", "--out", str(tmp / "run"), "--workers", "1")  # fmt: skip
    assert run.returncode == 0, run.stderr
    import pyarrow.parquet as pq

    table = pq.read_table(tmp / "run" / "results.parquet").to_pylist()
    assert {r["detector"] for r in table} == {"d3-mine", "npr"} and all(r["error"] is None for r in table)
    assert _files(site) == before

    _triton()  # the bundled tritonserver, or a skip (a failure in CI)
    served = subprocess.run([venv["python"], "-c", SERVE], env=venv["env"], cwd=tmp, capture_output=True, text=True,
                            timeout=600)  # fmt: skip
    assert served.returncode == 0 and "served d3-mine" in served.stdout, served.stderr[-2000:]
    assert _files(site) == before


SERVE = """
import numpy as np
from detectors.repository import list_detectors
from detectors.runtimes.embedded import EmbeddedRuntime
from detectors.runtimes.triton import TritonRuntime
from detectors.serving.local import LocalTriton
inst = list_detectors()["d3-mine"]
frames = np.random.default_rng(0).integers(0, 256, inst.card.input_shape(2), dtype=np.uint8)
with LocalTriton() as srv:
    got = TritonRuntime(inst.card, srv.url).score(frames)
np.testing.assert_allclose(got, EmbeddedRuntime(inst.model_path, inst.card).score(frames), atol=1e-5, rtol=1e-6)
print("served d3-mine")
"""
