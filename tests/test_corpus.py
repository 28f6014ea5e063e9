"""The paired proxy corpus: deterministic, paired, and labelled as a proxy."""

from __future__ import annotations

import json

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
    from gateway.evaluation.report import PROXY_WARNING, build_report
    from tests.test_compare import _rows
    from tests.test_report_glance import _run

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
