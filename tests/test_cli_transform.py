"""The `lastmile transform` and `lastmile bench transforms` commands, run as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from transforms.spec import LASTMILE


def lastmile(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )


def test_transform_writes_variants_and_sidecars(tmp_path, media):
    src = tmp_path / "clip.mp4"
    src.write_bytes(media["basic"])
    res = lastmile(
        "transform", str(src), "--conditions", "all", "--profile", "throughput", "--out", str(tmp_path / "o")
    )
    assert res.returncode == 0, res.stderr
    for cond in LASTMILE:
        meta = json.loads((tmp_path / "o" / f"clip.{cond.name}.json").read_text())
        assert meta["condition"] == cond.name and len(meta["spec_hash"]) == 64
        assert (tmp_path / "o" / f"clip.{cond.name}.mp4").stat().st_size == meta["bytes"]


def test_transform_with_a_conditions_file_and_a_bad_input(tmp_path, media):
    good, bad = tmp_path / "good.mp4", tmp_path / "bad.mp4"
    good.write_bytes(media["basic"])
    bad.write_bytes(b"not a video at all" * 20)
    spec = tmp_path / "conds.yaml"
    spec.write_text(
        "conditions:\n  - name: quarter\n    steps: [{kind: vp9}, {kind: scale, factor: 0.25}, {kind: h264}]\n"
    )
    res = lastmile(
        "transform",
        str(good),
        str(bad),
        "--conditions-file",
        str(spec),
        "--profile",
        "throughput",
        "--out",
        str(tmp_path / "o"),
    )
    assert res.returncode == 1  # one input failed...
    assert "bad.mp4: InvalidVideo" in res.stderr
    meta = json.loads((tmp_path / "o" / "good.quarter.json").read_text())  # ...the other was still done
    assert (meta["width"], meta["height"]) == (40, 30)
    res = lastmile("transform", str(good), "--conditions", "nope", "--out", str(tmp_path / "o"))
    assert res.returncode == 2 and "unknown condition" in res.stderr


@pytest.mark.slow
def test_bench_transforms_writes_the_ratios(tmp_path):
    out = tmp_path / "bench.json"
    res = lastmile(
        "bench",
        "transforms",
        "--quick",
        "--profiles",
        "throughput",
        "--json",
        str(out),
        env={"LASTMILE_CACHE": str(tmp_path / "cache")},
    )
    assert res.returncode == 0, res.stderr
    report = json.loads(out.read_text())
    assert set(report["targets"]) >= {"fanout_cpu_vs_floor <= 1.15", "full_vs_ffmpeg_cli <= 1.15"}  # per row
    assert not [t for t in report["targets"] if "45 min" in t]  # judged on the --long run only
    measured = sum(r["fanout"]["wall_s"] + r["naive_ffmpeg"]["wall_s"] + r["full"]["wall_s"] for r in report["results"])
    assert report["wall_s"] >= measured  # the whole run, every measurement in it
    for row in report["results"]:
        assert row["fanout"]["wall_s"] > 0 and row["naive_ffmpeg"]["cpu_s"] > 0 and row["fanout"]["peak_rss_mb"] > 0
        assert row["fanout_vs_naive_ffmpeg"] > 0 and row["full_vs_ffmpeg_cli"] > 0
        floor = row["floor"]["steps"]
        assert {"decode source", "vp9 encode", "vp9 decode"} <= set(floor) and len(floor) == 13  # the whole tree
        assert row["floor"]["cpu_s"] == pytest.approx(sum(floor.values()), abs=0.01)
        assert row["fanout_cpu_vs_floor"] == pytest.approx(row["fanout"]["cpu_s"] / row["floor"]["cpu_s"], rel=1e-2)
        assert 0 < row["fanout_core_utilisation"] <= 1.05 and row["realtime_factor"] > 0
        assert row["fanout"]["passes"] >= 1 and 0 < row["fanout"]["variants_mb"] < row["peak_rss_mb"]
        assert row["peak_rss_less_variants_mb"] == pytest.approx(row["peak_rss_mb"] - row["fanout"]["variants_mb"])


@pytest.mark.slow
def test_the_gpu_check_runs_without_a_gpu_and_says_why_each_part_was_skipped(tmp_path):
    """scripts/gpu-check.sh on a machine without NVENC or GPU execution providers: every part still writes its
    JSON, the CPU measurements are there, and each GPU part is skipped with FFmpeg's or onnxruntime's reason."""
    import onnxruntime as ort

    from transforms.codecs import nvenc_available

    if nvenc_available():
        pytest.skip("this machine has NVENC: the skip reasons under test do not arise")
    out = tmp_path / "gpu"
    res = subprocess.run(
        ["bash", "scripts/gpu-check.sh", str(out), "--quick"],
        capture_output=True,
        text=True,
        env={**os.environ, "LASTMILE_CACHE": str(tmp_path / "cache"), "PYTHON": sys.executable},
    )
    assert res.returncode == 0 and "exit 0" in res.stdout, res.stdout + (out / "gpu-check.log").read_text()
    machine = json.loads((out / "machine.json").read_text())
    assert machine["nvenc"] is False and "h264_nvenc" in machine["skipped"]["nvenc"]
    transforms = json.loads((out / "transforms.json").read_text())
    assert "nvenc" in transforms["skipped"] and len(transforms["results"]) == 2
    for row in transforms["results"]:
        assert "fanout_nvenc" not in row
        for label in ("libx264", "fidelity"):
            assert row[f"fanout_{label}"]["cpu_s"] > 0 and row[f"fanout_{label}"]["realtime_factor"] > 0
        assert row["fanout_libx264_cpu_vs_floor"] == pytest.approx(
            row["fanout_libx264"]["cpu_s"] / row["floor_libx264"]["cpu_s"], rel=1e-2
        )
    detectors = json.loads((out / "detectors.json").read_text())
    assert detectors["results"]["cpu"] and all(  # each detector's rows: request shape and largest batch, +- binding
        r["provider"] == "CPUExecutionProvider" and r["videos_per_s"] > 0
        for rows in detectors["results"]["cpu"].values()
        for r in rows
    )
    for label, provider in (("cuda", "CUDAExecutionProvider"), ("tensorrt", "TensorrtExecutionProvider")):
        if provider not in ort.get_available_providers():
            assert provider in detectors["skipped"][label]
