"""Issue 26: ``lastmile bench gpu``'s detectors part, on the CPU provider (the rows a GPU provider gets too): the
pipeline's request shape, the embedded runtime's largest batch and 64, each with and without onnxruntime I/O
binding, the bound scores equal to the plain ones, a reason for each provider this onnxruntime lacks; parity's
inputs; the table; the parts and what a failing or cut-off part leaves behind."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from detectors.repository import list_detectors
from detectors.runtimes import make_runtime
from detectors.runtimes.base import score_in_batches
from detectors.runtimes.embedded import EmbeddedRuntime
from detectors.runtimes.providers import ORT_NAMES, ProviderSettings
from gateway.cli import bench as bench_cli
from gateway.ops.bench import gpu as bench_gpu
from gateway.ops.bench.gpu_detectors import (
    MIN_CALLS,
    PARITY_BATCHES,
    PIXEL_LEVELS,
    REAL_CLIPS,
    WIDE_BATCH,
    bound_infer,
    detectors,
    parity_job,
)
from transforms.spec import LASTMILE

DETECTOR = "d3_px"  # the fastest shipped graph
BINDING_TOLERANCE = 1e-6


def test_the_detectors_part_measures_each_batch_with_and_without_io_binding_on_the_cpu():
    progress: list[list[str]] = []
    report = detectors(quick=True, names=[DETECTOR], on_progress=lambda r: progress.append(list(r["results"])))
    present = [label for label, name in ORT_NAMES.items() if name in ort.get_available_providers()]
    assert progress[0] == ["cpu"] and len(progress) == len(present)  # after each detector on each provider
    request, largest = report["batches"]["request"]["batch"], report["batches"]["max"]["batch"]
    wide = report["batches"]["wide"]["batch"]
    assert wide == WIDE_BATCH > largest
    assert request == len(LASTMILE)  # one video's condition variants in one call
    assert largest == make_runtime(list_detectors()[DETECTOR], "embedded").max_batch  # what the gateway's runtime takes
    assert list(report["results"]["cpu"]) == [DETECTOR]
    rows = report["results"]["cpu"][DETECTOR]
    assert sorted((r["batch"], r["io_binding"]) for r in rows) == [
        (request, False),
        (request, True),
        (largest, False),
        (largest, True),
        (wide, False),
        (wide, True),
    ]
    for row in rows:
        assert row["provider"] == ORT_NAMES["cpu"]
        assert row["runtime_max_batch"] == max(row["batch"], largest)  # the wide rows: 64 in one session call
        assert row["videos_per_s"] > 0 and row["calls"] >= MIN_CALLS
        assert row["frames_per_s"] > row["videos_per_s"]
        if row["io_binding"]:
            assert row["output_device"] == "cpu"
            assert 0 <= row["binding_max_abs_diff"] <= BINDING_TOLERANCE
        else:
            assert "binding_max_abs_diff" not in row
    assert report["settings"]["cpu"]["provider"] == "cpu"
    for label in ("cuda", "tensorrt"):
        if ORT_NAMES[label] not in ort.get_available_providers():
            assert ORT_NAMES[label] in report["skipped"][label]
            assert "not in this onnxruntime build" in report["skipped"][label]
    if ORT_NAMES["tensorrt"] not in ort.get_available_providers():
        assert "tensorrt_engine_cache" not in report


@pytest.mark.parametrize("name", sorted(list_detectors()))
def test_bound_scores_equal_plain_scores_across_batch_sizes(name):
    """A bound output keeps the first call's shape unless bound again: a 16 after a 6 must still score."""
    inst = list_detectors()[name]
    runtime = EmbeddedRuntime(inst.model_path, inst.card)
    infer = bound_infer(runtime.session, inst.card, on_gpu=False, device_id=0)
    rng = np.random.default_rng(1)
    for batch in (len(LASTMILE), runtime.max_batch, len(LASTMILE), 1):
        frames = rng.integers(0, PIXEL_LEVELS, inst.card.input_shape(batch), dtype=np.uint8)
        bound = score_in_batches(inst.card, frames, runtime.max_batch, infer, runtime.stats)
        plain = runtime.score(frames)
        assert bound.shape == (batch,)
        assert np.abs(bound - plain).max() <= BINDING_TOLERANCE


def test_the_check_passes_quick_to_the_detectors_and_writes_their_json(tmp_path: Path, monkeypatch):
    asked: list[bool] = []
    monkeypatch.setattr(bench_gpu, "machine", lambda: {"ffmpeg_cli": None})
    monkeypatch.setattr(bench_gpu, "transforms", lambda inputs, with_floor: {"results": []})
    monkeypatch.setattr(bench_gpu, "detectors", lambda quick, on_progress: asked.append(quick) or {"quick": quick})
    report = bench_gpu.run_check(tmp_path, {}, quick=True)
    assert asked == [True]
    assert json.loads((tmp_path / "detectors.json").read_text()) == report["detectors"] == {"quick": True}


def _rows(rates: dict[int, float]) -> list[dict]:
    shapes = {6: "request", 16: "max", 64: "wide"}
    return [
        {"shape": shapes[b], "batch": b, "io_binding": bound, "videos_per_s": v * (2 if bound else 1)}
        for b, v in rates.items()
        for bound in (False, True)
    ]


def test_the_table_divides_each_gpu_rate_by_the_cpu_rate_at_the_same_batch_and_reads_parity_and_placement():
    report = {
        "batches": {"request": {"batch": 6}, "max": {"batch": 16}, "wide": {"batch": 64}},
        "results": {
            "cpu": {"a": _rows({6: 100.0, 16: 90.0, 64: 80.0}), "b": _rows({6: 10.0, 16: 10.0, 64: 10.0})},
            "cuda": {"a": _rows({6: 1000.0, 16: 1800.0, 64: 4000.0})},
        },
        "parity": {
            "cuda": {
                "a": {
                    "use_tf32=0": {
                        "max_abs_diff": 2e-6,
                        "real_clips": {"max_abs_diff": 4e-7},
                        "nodes_by_provider": {"CUDAExecutionProvider": 9},
                    },
                    "use_tf32=1": {"max_abs_diff": 3e-3, "nodes_by_provider": {"CUDAExecutionProvider": 9}},
                }
            }
        },
    }
    entry = bench_gpu.summary(report)["a"]
    assert entry["speedup"]["cuda"] == {"request": 10.0, "max": 20.0, "wide": 50.0}  # plain rows, not bound ones
    assert entry["parity"]["cuda"] == {"use_tf32=0": 2e-6, "use_tf32=1": 3e-3}
    assert entry["real_clips"]["cuda"] == 4e-7
    assert entry["wholly_on_gpu"]["cuda"] is True
    lines = bench_gpu.markdown(report).splitlines()
    assert lines[0].startswith("| detector | provider | CPU b6/b16/b64 (videos/s) | GPU b6/b16/b64 | GPU/CPU at b64")
    cells = "| a | CUDA | 100 / 90 / 80 | 1,000 / 1,800 / 4,000 | 50.00x | 2.0e-06 | 3.0e-03 | 4.0e-07 | yes |"
    assert lines[2] == cells
    assert lines[3] == "| b | CPU only | 10 / 10 / 10 | - | - | - | - | - | - |"
    report["parity"]["cuda"]["a"]["use_tf32=0"]["nodes_by_provider"]["CPUExecutionProvider"] = 1
    assert bench_gpu.summary(report)["a"]["wholly_on_gpu"]["cuda"] is False
    # a failed parity run is shown as failed, not as a placement; a detector with GPU rows only is still listed
    report["parity"]["cuda"]["a"] = {"use_tf32=0": {"failed": "ProviderUnavailable(...)"}}
    report["results"]["cuda"]["c"] = _rows({6: 7.0})
    lines = bench_gpu.markdown(report).splitlines()
    assert lines[2].endswith("| 50.00x | failed | - | - | - |")
    assert lines[4] == "| c | CUDA | - / - / - | 7 / - / - | - | - | - | - | - |"


def test_the_check_runs_only_the_parts_asked_for_and_writes_the_detectors_table(tmp_path: Path, monkeypatch):
    report = {"batches": {"request": {"batch": 6}}, "results": {"cpu": {"a": _rows({6: 5.0})}}}
    monkeypatch.setattr(bench_gpu, "machine", lambda: {"ffmpeg_cli": None})
    monkeypatch.setattr(bench_gpu, "transforms", lambda inputs, with_floor: pytest.fail("transforms not asked for"))
    monkeypatch.setattr(bench_gpu, "detectors", lambda quick, on_progress: report)
    out = bench_gpu.run_check(tmp_path, {}, parts=["detectors"])
    assert set(out) == {"machine", "detectors"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["detectors.json", "detectors.md", "machine.json"]
    assert "| a | CPU only | 5 |" in (tmp_path / "detectors.md").read_text()
    with pytest.raises(ValueError, match="unknown parts"):
        bench_gpu.run_check(tmp_path, {}, parts=["nvenc"])
    assert bench_cli.PARTS == bench_gpu.PARTS  # the CLI's choices are the check's parts


def test_a_detectors_part_that_fails_keeps_what_it_measured_and_no_earlier_table(tmp_path: Path, monkeypatch):
    (tmp_path / "detectors.md").write_text("| an earlier run's table |")
    seen_on_disk: list[str] = []

    def detectors_then_fail(quick, on_progress):
        on_progress({"batches": {"request": {"batch": 6}}, "results": {"cpu": {"a": _rows({6: 5.0})}}})
        seen_on_disk.append((tmp_path / "detectors.md").read_text())  # the table is there while the run goes on
        raise RuntimeError("the GPU went away")

    monkeypatch.setattr(bench_gpu, "machine", lambda: {"ffmpeg_cli": None})
    monkeypatch.setattr(bench_gpu, "detectors", detectors_then_fail)
    out = bench_gpu.run_check(tmp_path, {}, parts=["detectors"])
    written = json.loads((tmp_path / "detectors.json").read_text())
    assert written == out["detectors"] and "the GPU went away" in written["failed"]
    assert written["results"]["cpu"]["a"][0]["videos_per_s"] == 5.0  # measured before the failure, kept
    assert "| a | CPU only | 5 |" in seen_on_disk[0] and "earlier" not in (tmp_path / "detectors.md").read_text()
    assert not list(tmp_path.glob("*.part"))  # every write replaced its file whole


def test_the_cli_measures_only_the_detectors_part_without_reading_the_clips(tmp_path: Path, monkeypatch):
    from click.testing import CliRunner

    from gateway.cli import main

    monkeypatch.setattr(bench_cli, "_transform_inputs", lambda quick: pytest.fail("clips read for no transforms"))
    monkeypatch.setattr(bench_gpu, "machine", lambda: {"ffmpeg_cli": None})
    monkeypatch.setattr(bench_gpu, "detectors", lambda quick, on_progress: {"quick": quick})
    result = CliRunner().invoke(main, ["bench", "gpu", "--out", str(tmp_path), "--part", "detectors", "--quick"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"machine": {"ffmpeg_cli": None}, "detectors": {"quick": True}}
    bad = CliRunner().invoke(main, ["bench", "gpu", "--out", str(tmp_path), "--part", "nvenc"])
    assert bad.exit_code == 2 and "nvenc" in bad.output


def test_the_gpu_check_script_exits_with_the_checks_status(tmp_path: Path):
    script = Path(__file__).resolve().parent.parent / "scripts" / "gpu-check.sh"
    done = subprocess.run(["bash", str(script), str(tmp_path / "out"), "--part", "nvenc"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "GPU_CHECK_LIMIT": "100"})  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr  # click's usage error, not the script's last command
    assert "exit 2" in done.stdout and "nvenc" in (tmp_path / "out" / "gpu-check.log").read_text()


def test_parity_reads_both_random_batches_and_the_real_clips_at_their_own_score_scale():
    """On the CPU against itself every difference is 0; what is checked is what the GPU rows will carry: each
    random batch, the real clips sampled as the card says, and the score scale each absolute difference is of."""
    inst = list_detectors()["npr"]
    out = parity_job(str(inst.model_path), inst.card.model_dump_json(), ProviderSettings().model_dump_json())
    assert sorted(out["by_batch"], key=int) == [str(b) for b in PARITY_BATCHES]
    assert out["real_clips"]["clips"] == list(REAL_CLIPS)
    assert out["max_abs_diff"] == out["real_clips"]["max_abs_diff"] == 0.0
    # random frames drive npr's logits far beyond what real footage gives: why both are reported
    assert out["by_batch"]["8"]["max_abs_cpu_score"] > 5 * out["real_clips"]["max_abs_cpu_score"] > 0
    assert out["nodes_by_provider"] and set(out["nodes_by_provider"]) == {ORT_NAMES["cpu"]}
