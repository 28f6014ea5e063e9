"""The project as users install it: the wheel built from a clean copy of the tree (what `git clone` gives),
installed with pip into a new virtualenv *without* system site packages, and run as `lastmile` from a folder
outside the checkout. It runs the README's blocks marked runnable as written, the demo at its smallest size,
`detectors add` (writing nothing under site-packages) with a replay and Triton, and the tap with the extra the
README names; each checks what was written, not only the exit status."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.support.stack import NARROW, PORTS, _stack_left, readme_commands
from tests.support.tools import require_tool
from tests.support.triton import _triton

ROOT = Path(__file__).resolve().parent.parent
PIP = ["-m", "pip", "-q", "--disable-pip-version-check"]
NUMBER_CELL = re.compile(r"^-?\d+\.\d \[-?\d+\.\d, -?\d+\.\d\]†?( \([+-]\d+\.\d\))?$")  # †: zero width


def tracked_files() -> list[str]:
    """The files a clean clone of this work tree has: tracked, plus new ones git does not ignore."""
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard", "-z"],
                         check=True, capture_output=True, text=True).stdout  # fmt: skip
    return sorted(f for f in out.split("\0") if f and (ROOT / f).is_file())


def clean_copy(dst: Path) -> Path:
    for name in tracked_files():
        (dst / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, dst / name)
    return dst


def _files(folder: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built as `pip install .` builds it (with build isolation) from a clean copy of the tree."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = clean_copy(tmp / "src")
    built = subprocess.run([sys.executable, *PIP, "wheel", "--no-deps", str(src), "-w", str(tmp / "wheels")],
                           capture_output=True, text=True, timeout=600)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    (path,) = (tmp / "wheels").glob("lastmile_gateway-*.whl")
    return path


@pytest.fixture(scope="module")
def user(wheel, tmp_path_factory) -> dict:
    """A new virtualenv (no system site packages) with the wheel and the extras the README names installed; a
    user's folder outside the checkout; PATH with the venv's bin first, as after `source .venv/bin/activate`."""
    tmp = tmp_path_factory.mktemp("user")
    subprocess.run([sys.executable, "-m", "venv", str(tmp / "venv")], check=True, timeout=300)
    py = tmp / "venv" / "bin" / "python"
    cfg = (tmp / "venv" / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in cfg
    # (--no-compile: the packages' bytecode is written when a module is first imported, not all of it up front: a
    # third of the install's time, and the same installed files)
    for args in ([f"{wheel}[local,triton-local]"], ["--no-deps", "nvidia-pytriton==0.7.0"]):
        install = [str(py), *PIP, "install", "--no-compile", *args]
        done = subprocess.run(install, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
    probe = "import gateway, pathlib; print(pathlib.Path(gateway.__file__).parents[1])"
    site = Path(
        subprocess.run([str(py), "-c", probe], cwd=tmp, check=True, capture_output=True, text=True).stdout.strip()
    )
    assert site.is_relative_to(tmp / "venv")  # the installed copy, not this checkout
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LASTMILE_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(HOME=str(tmp / "home"), XDG_DATA_HOME="", PATH=f"{tmp / 'venv' / 'bin'}:/usr/bin:/bin")
    return {"python": str(py), "site": site, "env": env, "tmp": tmp, "before": _files(site)}


def lastmile(user: dict, *args: str, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    """The installed `lastmile` console script, found on PATH as a user's shell finds it."""
    return subprocess.run(["lastmile", *args], env=user["env"], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def runnable_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"<!-- runnable -->\n```bash\n(.*?)```", text, re.S)


def test_the_wheel_holds_every_data_file_the_packages_track(wheel):
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    tops = {p.split(".")[0] for p in packages}
    ignored = {"__pycache__"}
    data = [f for f in tracked_files() if f.split("/")[0] in tops and not f.endswith(".py")
            and not ignored & set(f.split("/"))]  # fmt: skip
    assert "transforms/data/encoder_memory.yaml" in data and "gateway/ops/data/lastmile-rules.yaml" in data
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [f for f in data if f not in names]
    assert not missing, f"data files the code loads but the wheel lacks (pyproject package-data): {missing}"
    examples = [f for f in tracked_files() if f.startswith("examples/")]
    lacking = [f for f in examples if f"gateway/{f}" not in names]  # `lastmile examples` writes them from there
    assert len(examples) > 10 and not lacking, f"example files the wheel lacks (gateway.examples): {lacking}"


def test_the_image_build_stage_builds_the_same_wheel(wheel, tmp_path):
    """The Dockerfile's build stage copies only some paths: the wheel built from them holds the same files."""
    stage = (ROOT / "Dockerfile").read_text().split("\nFROM ")[1]
    copies = [line.split()[1:-1] for line in stage.splitlines() if line.startswith("COPY ")]
    src = tmp_path / "src"
    for name in tracked_files():
        if any(name == c or name.startswith(c.rstrip("/") + "/") for group in copies for c in group):
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    built = subprocess.run([sys.executable, *PIP, "wheel", "--no-deps", str(src), "-w", str(tmp_path / "w")],
                           capture_output=True, text=True, timeout=600)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    (image_wheel,) = (tmp_path / "w").glob("*.whl")
    assert set(zipfile.ZipFile(image_wheel).namelist()) == set(zipfile.ZipFile(wheel).namelist())


def test_the_readme_runnable_blocks_run_as_written_in_an_empty_folder(user):
    """No clone: the first block, `lastmile examples`, writes the examples out of the wheel; the others use them."""
    blocks = runnable_blocks()
    assert len(blocks) >= 3, "the README marks its runnable blocks with <!-- runnable -->"
    assert blocks[0].startswith("lastmile examples ")
    clone = user["tmp"] / "empty"  # (named as before: the assertions below read `clone`)
    clone.mkdir()
    for block in blocks:
        run = subprocess.run(["bash", "-euo", "pipefail", "-c", block], env=user["env"], cwd=clone,
                             capture_output=True, text=True, timeout=1200)  # fmt: skip
        assert run.returncode == 0, (block, run.stdout[-2000:], run.stderr[-3000:])
    written = sorted(_files(clone))
    assert written and all(Path(p).relative_to(clone).parts[0] in ("runs", "examples") for p in written), written[:10]
    shipped = [f for f in tracked_files() if f.startswith("examples/")]
    assert sorted(str(Path(p).relative_to(clone)) for p in written if "/examples/" in p) == shipped
    assert all((clone / f).read_bytes() == (ROOT / f).read_bytes() for f in shipped)  # the repository's, unchanged
    assert _files(user["site"]) == user["before"]  # nothing written into the installed package

    import pyarrow.parquet as pq

    rows = pq.read_table(clone / "runs" / "example" / "results.parquet").to_pylist()
    assert len(rows) == 12 * 6 * 4 and all(r["error"] is None and r["score"] is not None for r in rows)
    report = (clone / "runs" / "example" / "report.md").read_text()
    assert "proxy for AI-generated video" in report
    assert json.loads((clone / "runs" / "example" / "report.json").read_text())["failures"]["infra_rows"] == 0
    boards = clone / "runs" / "dashboards"
    assert {p.name for p in (boards / "grafana").glob("*.json")} == {
        "lastmile-robustness.json",
        "lastmile-pipeline.json",
        "lastmile-comparisons.json",
    }
    assert yaml.safe_load((boards / "prometheus" / "lastmile-rules.yaml").read_text())["groups"]
    variants = sorted((clone / "runs" / "variants").glob("*.json"))
    assert [p.stem.split(".", 1)[1] for p in variants] == ["clipped", "original", "quarter"]
    assert all(json.loads(p.read_text())["frames"] > 0 for p in variants)


def test_the_demo_at_its_smallest_has_a_value_in_every_cell(user):
    work = user["tmp"] / "work-demo"
    work.mkdir()
    demo = lastmile(user, "demo", "--anchors", "2", "--profile", "throughput", cwd=work)
    assert demo.returncode == 0, demo.stderr[-3000:]
    table = [line for line in demo.stdout.splitlines() if line.startswith("| ") and not line.startswith("| **")]
    header, *body = table
    assert header.split("|")[2].strip() == "original" and len(body) == 4, demo.stdout
    for line in body:
        cells = [c.strip() for c in line.strip("|").split("|")][1:]
        assert len(cells) == 6 and all(NUMBER_CELL.match(c) for c in cells), line
    report = json.loads((work / "lastmile-demo" / "run" / "report.json").read_text())
    assert report["failures"]["infra_rows"] == 0 and not report["failures"]["empty_cells"]
    assert sorted(p.name for p in work.iterdir()) == ["lastmile-demo"]  # written where asked, nowhere else
    assert _files(user["site"]) == user["before"]


def test_detectors_add_writes_nothing_under_site_packages_and_the_detector_is_replayed_and_served(user):
    work = user["tmp"] / "work-add"
    shutil.copytree(ROOT / "examples", work / "examples")
    shipped = user["site"] / "triton_models" / "d3_px"
    card = yaml.safe_load((shipped / "card.yaml").read_text())
    (work / "card.yaml").write_text(yaml.safe_dump({**card, "name": "d3-mine", "version": "2.0.0"}))
    added = lastmile(user, "detectors", "add", str(shipped / "1" / "model.onnx"), "--card", "card.yaml", cwd=work)
    assert added.returncode == 0, added.stderr
    assert _files(user["site"]) == user["before"]  # nothing written, nothing touched
    user_repo = user["tmp"] / "home" / ".local" / "share" / "lastmile" / "models"
    assert (user_repo / "d3-mine" / "1" / "model.onnx").exists() and (user_repo / "d3-mine" / "config.pbtxt").exists()
    listed = lastmile(user, "detectors", "list", cwd=work).stdout
    assert any(line.split()[:2] == ["d3-mine", "user"] for line in listed.splitlines())
    assert any(line.split()[:2] == ["npr", "shipped"] for line in listed.splitlines())

    run = lastmile(user, "replay", "examples/manifest.jsonl", "--detectors", "d3-mine,npr", "--conditions",
                   "original", "--profile", "throughput", "--out", "run", "--workers", "1", cwd=work)  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    import pyarrow.parquet as pq

    table = pq.read_table(work / "run" / "results.parquet").to_pylist()
    assert {r["detector"] for r in table} == {"d3-mine", "npr"} and all(r["error"] is None for r in table)
    assert _files(user["site"]) == user["before"]

    _triton()  # the bundled tritonserver (here: the one installed into the checkout's environment), or a skip
    served = subprocess.run([user["python"], "-c", SERVE], env=user["env"], cwd=work, capture_output=True, text=True,
                            timeout=600)  # fmt: skip
    assert served.returncode == 0 and "served d3-mine" in served.stdout, served.stderr[-2000:]
    assert _files(user["site"]) == user["before"]


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


def test_the_tap_runs_from_the_wheel_with_the_local_extra(user):
    require_tool("prometheus")
    up_cmd, send_cmd, scores_cmd = readme_commands()
    work = user["tmp"] / "work-tap"
    work.mkdir()
    made = lastmile(user, "examples", cwd=work)  # the clips the README's send names, out of the wheel
    assert made.returncode == 0 and (work / send_cmd[2] / "a7_0000.mp4").is_file(), made.stderr
    clips = sorted((work / send_cmd[2]).glob("*.mp4"))
    up = subprocess.Popen([*up_cmd, *NARROW, *PORTS], env=user["env"], cwd=work, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        printed = []
        for line in up.stdout:
            printed.append(line)
            if line.startswith("ready:"):
                break
        assert printed and printed[-1].startswith("ready:"), "".join(printed) + up.stderr.read()
        sent = lastmile(user, *send_cmd[1:], cwd=work, timeout=120)
        assert sent.returncode == 0 and f"{len(clips)} videos sent" in sent.stdout, sent.stderr
        assert "note: using lastmile-up/gateway.yaml" in sent.stderr  # the stack's config, named
        follow = subprocess.Popen([*scores_cmd, "--json"], env=user["env"], cwd=work, stdout=subprocess.PIPE,
                                  text=True)  # fmt: skip
        want = {(cond, det) for cond in ("original", "spatial") for det in ("d3_px", "spectral")}
        got = set()
        for line in follow.stdout:
            row = json.loads(line)
            assert row["error"] is None and row["score"] is not None and row["video_id"].startswith("a7_000")
            if row["video_id"].rsplit("-", 1)[0] == "a7_0000":  # (all twelve are scored; one clip's rows suffice)
                got.add((row["condition"], row["detector"]))
            if got >= want:
                break
        follow.send_signal(signal.SIGINT)
        assert follow.wait(30) is not None and got == want
    finally:
        pids = json.loads((work / "lastmile-up" / "stack.json").read_text())["pids"]
        up.send_signal(signal.SIGTERM)
        assert up.wait(120) == 0
    assert _stack_left(set(pids.values()) | {up.pid}) == []
    assert _files(user["site"]) == user["before"]


def test_a_store_without_its_sdk_is_refused_at_start_naming_the_extra(user, tmp_path):
    """The wheel without the `attach` extra reads no object store: a configuration that lists one stops the gateway
    at start with the pip command, instead of failing every video read from it."""
    (tmp_path / "gateway.yaml").write_text("sources:\n  object_stores: [s3://uploads/videos/]\n")
    done = lastmile(user, "gateway", "run", "--config", "gateway.yaml", cwd=tmp_path, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "s3:// is read with boto3, which is not installed: pip install 'lastmile-gateway[attach]'" in done.stderr
