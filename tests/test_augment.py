"""The augmentation across processes: the same (seed, index, epoch) gives the same frames in another process and in a
``DataLoader`` worker; ``lastmile augment`` renders a manifest to disk; ``lastmile bench augment`` measures a worker
against its floor."""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
from pathlib import Path

import pytest

from detectors.manifest import read_manifest
from detectors.proxy.scenes import SceneSpec, render_video
from tests.support.cli import _lastmile
from transforms.augment import AugmentConfig, Augmenter
from transforms.sampling import SamplingPolicy

torch = pytest.importorskip("torch", reason="the Dataset is in the extra `train` (torch)")

POLICY = SamplingPolicy(frames=4, height=32, width=32)


def run_cli(*args: str):
    return _lastmile(*args, cwd=Path.cwd())


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> list[Path]:
    folder = tmp_path_factory.mktemp("clips")
    paths = []
    for i in range(4):
        path = folder / f"clip{i}.mp4"
        path.write_bytes(render_video(SceneSpec(width=96, height=72, fps=12, seconds=1.0, seed=10 + i)))
        paths.append(path)
    return paths


def _digests(path: str, keys: list[tuple[int, int]]) -> list[str]:
    augmenter = Augmenter(seed=11)
    return [hashlib.sha256(augmenter.frames(path, i, e, POLICY)[0].tobytes()).hexdigest() for i, e in keys]


def test_the_same_key_gives_the_same_frames_in_another_process_and_epochs_differ(clips):
    keys = [(3, epoch) for epoch in range(4)]
    with mp.get_context("spawn").Pool(1) as pool:
        theirs = pool.apply(_digests, (str(clips[0]), keys))
    ours = _digests(str(clips[0]), keys)
    assert theirs == ours
    # four epochs of one video: more than one condition drawn, so more than one set of frames
    assert len(set(ours)) > 1


def test_a_dataloader_with_two_workers_yields_what_the_dataset_gives_in_process(clips):
    from torch.utils.data import DataLoader

    from transforms.dataset import AugmentedVideos

    dataset = AugmentedVideos(clips, labels=[0, 1, 0, 1], seed=11, sampling=POLICY)
    dataset.set_epoch(2)
    loader = DataLoader(dataset, batch_size=2, num_workers=2, multiprocessing_context="spawn")
    batches = list(loader)
    assert [b["frames"].shape for b in batches] == [(2, 4, 32, 32, 3)] * 2
    assert torch.cat([b["label"] for b in batches]).tolist() == [0, 1, 0, 1]
    assert torch.cat([b["epoch"] for b in batches]).tolist() == [2, 2, 2, 2]
    in_process = AugmentedVideos(clips, labels=[0, 1, 0, 1], seed=11, sampling=POLICY)
    for i, frames in enumerate(torch.cat([b["frames"] for b in batches])):
        item = in_process[(i, 2)]
        assert torch.equal(frames, item["frames"])
        assert item["condition"] == Augmenter(seed=11).draw(i, 2).condition.name


def _manifest(folder: Path, clips: list[Path], broken: bool = False) -> Path:
    rows = [
        {"video_id": "r0", "uri": str(clips[0]), "label": "real", "source": "real", "anchor_id": "r0"},
        {"video_id": "g0", "uri": str(clips[1]), "label": "generated", "source": "gen", "anchor_id": "r0"},
    ]
    if broken:
        (folder / "broken.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42 not a video at all")
        rows.append({"video_id": "g1", "uri": "broken.mp4", "label": "generated", "source": "gen", "anchor_id": "r0"})
    path = folder / "manifest.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_augment_writes_variants_sidecars_and_a_manifest_of_its_own(tmp_path, clips):
    manifest = _manifest(tmp_path, clips)
    out = tmp_path / "out"
    result = run_cli(
        "augment",
        str(manifest),
        "--out",
        str(out),
        "--epochs",
        "2",
        "--seed",
        "11",
        "--file-root",
        str(clips[0].parent),
    )
    assert result.returncode == 0, result.stderr
    assert "4 variants written" in result.stdout
    rows = read_manifest(out / "manifest.jsonl")
    assert [r.video_id for r in rows] == ["r0.e0", "g0.e0", "r0.e1", "g0.e1"]
    assert [r.anchor_id for r in rows] == ["r0.e0", "r0.e0", "r0.e1", "r0.e1"]
    augmenter = Augmenter(AugmentConfig(), seed=11)
    for row, (index, epoch) in zip(rows, [(0, 0), (1, 0), (0, 1), (1, 1)], strict=True):
        data = (out / row.uri).read_bytes()
        sidecar = json.loads((out / row.uri).with_suffix(".json").read_text())
        # the bytes are the API's own variant for the key, and the sidecar says where they came from
        variant, drawn = augmenter.variant(clips[index], index, epoch)
        assert data == variant.data and hashlib.sha256(data).hexdigest() == row.sha256
        assert sidecar["condition"] == drawn.condition.name == row.model_extra["condition"]
        assert sidecar["draw"] == {"seed": 11, "index": index, "epoch": epoch}
        assert sidecar["from"]["sha256"] == hashlib.sha256(clips[index].read_bytes()).hexdigest()
        assert sidecar["variant"]["spec_hash"] == variant.meta.spec_hash


def test_a_bad_video_is_named_and_the_others_are_written(tmp_path, clips):
    manifest = _manifest(tmp_path, clips, broken=True)
    out = tmp_path / "out"
    result = run_cli("augment", str(manifest), "--out", str(out), "--file-root", str(clips[0].parent))
    assert result.returncode == 1
    assert "1 of 3 (video, epoch) pairs failed" in result.stderr
    (failure,) = [json.loads(line) for line in (out / "failures.jsonl").read_text().splitlines()]
    assert failure["video_id"] == "g1" and failure["error"] == "InvalidVideo"
    assert [r.video_id for r in read_manifest(out / "manifest.jsonl")] == ["r0.e0", "g0.e0"]


def test_a_video_whose_bytes_are_not_its_rows_sha256_is_named_before_any_decode(tmp_path, clips):
    manifest = _manifest(tmp_path, clips)
    rows = [json.loads(line) for line in manifest.read_text().splitlines()]
    rows[1]["sha256"] = "0" * 64
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    result = run_cli("augment", str(manifest), "--out", str(out), "--file-root", str(clips[0].parent))
    assert result.returncode == 1
    (failure,) = [json.loads(line) for line in (out / "failures.jsonl").read_text().splitlines()]
    assert failure["video_id"] == "g0" and failure["error"] == "ContentMismatch"
    assert hashlib.sha256(clips[1].read_bytes()).hexdigest() in failure["reason"]


def test_a_file_outside_the_roots_or_a_url_stops_the_run_before_any_work(tmp_path, clips):
    manifest = _manifest(tmp_path, clips)
    with manifest.open("a") as f:
        row = {"video_id": "g2", "uri": "https://example.com/v.mp4", "label": "generated", "source": "gen"}
        f.write(json.dumps({**row, "anchor_id": "r0"}) + "\n")
    out = tmp_path / "out"
    result = run_cli("augment", str(manifest), "--out", str(out))
    assert result.returncode != 0
    assert "outside the folders the replay reads" in result.stderr
    assert "https://example.com/v.mp4: augment reads local files only" in result.stderr
    assert not out.exists()


def test_bench_augment_measures_a_worker_against_its_floor(tmp_path):
    out = tmp_path / "augment.json"
    result = run_cli("bench", "augment", "--quick", "--draws", "2", "--json", str(out))
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    (row,) = report["results"]
    assert sum(row["drawn"].values()) == 2
    assert set(row["floor"]["per_condition"]) == set(row["drawn"])
    assert row["worker"]["cpu_s"] > 0 and row["floor"]["cpu_s"] > 0 and row["peak_rss_mb"] > 0
    ratio = row["worker"]["cpu_s"] / row["floor"]["cpu_s"]
    assert row["worker_cpu_vs_floor"] == pytest.approx(ratio, abs=1e-3)
    assert set(report["targets"]) == {"worker_cpu_vs_floor <= 1.15", "peak_rss_mb <= 1024"}


def test_an_augmented_build_installs_each_version_beside_its_default(tmp_path):
    import shutil

    from detectors.reference.augmented import build_augmented
    from detectors.reference.build import BuildConfig
    from detectors.repository import SHIPPED_REPO, list_detectors, list_versions

    # the shipped default versions, copied: what an augmented build goes beside
    repo, cfg = tmp_path / "repo", BuildConfig(seed=7, anchors=3, npr_epochs=1)
    shutil.copytree(SHIPPED_REPO, repo, ignore=shutil.ignore_patterns("versions", "__pycache__", "*.py"))
    before = {name: inst.card for name, inst in list_detectors(repo).items()}
    summary = build_augmented(cfg, AugmentConfig(), repo, rounds=1, workers=1, log=lambda m: None)
    # 3 anchors: 2 calibrate, 1 trains (its real video and 5 generated ones), each rendered once
    assert sorted(summary["detectors"]) == ["npr", "spectral"] and sum(summary["drawn"].values()) == 6
    assert json.loads((repo / "BUILD.json").read_text())["augmented"]["version"] == "1.1.0-proxy7-aug"
    # the default versions as they were; the new ones beside them, saying how they were trained
    assert {name: inst.card for name, inst in list_detectors(repo).items()} == before
    versions = list_versions(repo)
    for name in ("npr", "spectral"):
        new = versions[f"{name}@1.1.0-proxy7-aug"]
        assert new.folder == repo / name / "versions" / "1.1.0-proxy7-aug"
        assert "augmentation" in new.card.training_data and "PROXY CORPUS" in new.card.training_data
        assert summary["detectors"][name]["onnx_vs_reference"] < 1e-3
    assert "restrav_px@1.1.0-proxy7-aug" not in versions
