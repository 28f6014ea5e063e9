"""The paired proxy corpus: deterministic, paired, and labelled as a proxy."""

from __future__ import annotations

import json

import numpy as np

from detectors.manifest import read_manifest
from detectors.proxy.corpus import GENERATORS, PROXY_NOTICE, CorpusConfig, synthesize


def test_corpus_is_deterministic_and_paired(tmp_path):
    cfg = CorpusConfig(anchors=2, seed=123, width=96, height=64, min_seconds=2.0, max_seconds=2.5)
    a = read_manifest(synthesize(cfg, tmp_path / "a"))
    b = read_manifest(synthesize(cfg, tmp_path / "b"))
    assert [(r.video_id, r.sha256) for r in a] == [(r.video_id, r.sha256) for r in b]
    other = read_manifest(synthesize(cfg.model_copy(update={"seed": 124}), tmp_path / "c"))
    assert {r.sha256 for r in other}.isdisjoint({r.sha256 for r in a})
    reals = {r.video_id for r in a if r.label == "real"}
    assert len(reals) == 2 and all(r.anchor_id == r.video_id for r in a if r.label == "real")
    for r in a:
        assert (tmp_path / "a" / r.uri).exists()
        if r.label == "generated":
            assert r.anchor_id in reals and r.source in GENERATORS
    assert len(a) == 2 * (1 + len(GENERATORS))
    info = json.loads((tmp_path / "a" / "corpus.json").read_text())
    assert info["notice"] == PROXY_NOTICE and "not AI-generated video" in info["notice"]


def test_user_videos_can_be_real_anchors(tmp_path, media):
    reals = tmp_path / "reals"
    reals.mkdir()
    (reals / "one.mp4").write_bytes(media["long"])
    cfg = CorpusConfig(anchors=1, seed=5, width=96, height=64, min_seconds=2.0, max_seconds=2.0)
    rows = read_manifest(synthesize(cfg, tmp_path / "c", real_videos=[reals / "one.mp4"]))
    assert rows[0].label == "real" and rows[0].category == "user" and len(rows) == 1 + len(GENERATORS)


def test_a_moved_or_mixed_manifest_of_the_corpus_still_reports_as_a_proxy(tmp_path):
    """The report's proxy notice came only from corpus.json beside the manifest: a manifest copied elsewhere, or
    merged with a user's own videos, replayed as real data. Every row of the corpus is marked now."""
    import shutil

    from gateway.batch.replay import corpus_of
    from gateway.evaluation.provenance import PROXY_WARNING
    from gateway.evaluation.report import build_report
    from tests.support.report import _rows, _run

    cfg = CorpusConfig(anchors=1, seed=9, width=96, height=64, min_seconds=2.0, max_seconds=2.0)
    manifest = synthesize(cfg, tmp_path / "made")
    rows = read_manifest(manifest)
    assert all(getattr(r, "corpus", None) == "lastmile-proxy" for r in rows)
    assert corpus_of(manifest, rows)["config"]["seed"] == 9  # corpus.json beside it: the whole description
    moved = tmp_path / "elsewhere" / "mine.jsonl"
    moved.parent.mkdir()
    shutil.copy(manifest, moved)
    user = '{"video_id": "u1", "uri": "u1.mp4", "label": "real", "source": "real", "anchor_id": "u1"}\n'
    moved.write_text(user + moved.read_text())
    corpus = corpus_of(moved, read_manifest(moved))
    assert corpus["notice"] == PROXY_NOTICE and "mine.jsonl" in corpus["described"]
    (moved.parent / "plain.jsonl").write_text(user)
    assert corpus_of(moved.parent / "plain.jsonl", read_manifest(moved.parent / "plain.jsonl")) is None
    paths = build_report(_run(tmp_path / "run", _rows(6), corpus=corpus), replicates=50)
    assert PROXY_WARNING in paths["md"].read_text()
    assert "corpus seed not recorded (no corpus.json beside mine.jsonl" in paths["md"].read_text()


def test_user_anchors_keep_real_time_are_named_as_yours_and_recorded_by_file(tmp_path):
    """A user's 30 fps video becomes a 24 fps anchor in real time: the anchor's frame k is the source's frame at
    k/24 s (its first frames were written at 24 fps, slowing the footage by a fifth). The corpus's notice and the
    report say the anchors are the user's videos (they said synthetic scenes), and corpus.json maps each anchor to
    its file."""
    from detectors.proxy.scenes import encode_h264
    from gateway.evaluation.provenance import USER_ANCHORS_WARNING, corpus_notice
    from transforms.sampling import SamplingPolicy, sample_frames

    reals = tmp_path / "reals"
    reals.mkdir()
    ramp = [np.full((96, 128, 3), 4 * i, np.uint8) for i in range(60)]  # 2 s at 30 fps, brightness 4 per frame
    (reals / "ramp.mp4").write_bytes(encode_h264(ramp, 30, crf=10))
    cfg = CorpusConfig(anchors=1, seed=3, width=96, height=64, fps=24, min_seconds=2.0, max_seconds=2.0)
    manifest = synthesize(cfg, tmp_path / "c", real_videos=[reals / "ramp.mp4"])
    real = next(r for r in read_manifest(manifest) if r.label == "real")
    policy = SamplingPolicy(mode="first_k", frames=48, height=64, width=96)
    frames = sample_frames((tmp_path / "c" / real.uri).read_bytes(), policy)
    brightness = frames.reshape(48, -1).mean(axis=1)
    slope = np.polyfit(np.arange(48), brightness, 1)[0]  # brightness per anchor frame: 4 * 30 / 24 in real time
    assert 4.7 < slope < 5.3, (slope, brightness)  # (first frames at 24 fps: 4)
    info = json.loads((tmp_path / "c" / "corpus.json").read_text())
    assert info["anchor_files"] == {real.anchor_id: "ramp.mp4"} and "user's own videos" in info["notice"]
    assert corpus_notice({"proxy": True, "corpus": info}) == USER_ANCHORS_WARNING


def test_corpus_synth_takes_at_most_anchors_of_a_real_dir_and_refuses_one_without_videos(tmp_path, media):
    from click.testing import CliRunner

    from gateway.cli import main as cli

    reals = tmp_path / "reals"
    reals.mkdir()
    for name in ("a.mp4", "b.mp4", "c.mp4"):
        (reals / name).write_bytes(media["basic"])
    args = ["corpus", "synth", "--real-dir", str(reals), "--size", "96x64", "--seconds", "2"]
    result = CliRunner().invoke(cli, [*args, "--anchors", "2", "--out", str(tmp_path / "two")])
    assert result.exit_code == 0, result.output
    assert "user's own videos" in result.output
    files = json.loads((tmp_path / "two" / "corpus.json").read_text())["anchor_files"]
    assert sorted(files.values()) == ["a.mp4", "b.mp4"]
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(cli, ["corpus", "synth", "--real-dir", str(empty), "--out", str(tmp_path / "none")])
    assert result.exit_code == 2 and "no video files" in result.output
