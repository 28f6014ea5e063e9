"""Replay: results rows with provenance, failures as rows, and kill-and-resume without duplicates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from detectors.proxy.corpus import CorpusConfig, synthesize
from detectors.serving.processes import kill_group
from gateway.batch.replay import ReplayConfig, replay
from gateway.batch.results import read_results
from gateway.core.messages import TIMING_FIELDS
from tests.support.media import ffmpeg

DETECTORS = "d3_px,spectral"


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    manifest = synthesize(CorpusConfig(anchors=3, seed=77, width=160, height=128, min_seconds=2, max_seconds=2), root)
    # one corrupt video and one missing file: they must become error rows, not gaps
    (root / "videos" / "broken.mp4").write_bytes(b"\x00\x00\x00\x18ftypisom" + os.urandom(3000))
    with manifest.open("a") as f:
        f.write(
            json.dumps(
                {
                    "video_id": "broken",
                    "uri": "videos/broken.mp4",
                    "label": "generated",
                    "source": "latent8",
                    "anchor_id": "a77_0000",
                }
            )
            + "\n"
        )
        f.write(
            json.dumps(
                {
                    "video_id": "missing",
                    "uri": "videos/nope.mp4",
                    "label": "generated",
                    "source": "checker",
                    "anchor_id": "a77_0001",
                }
            )
            + "\n"
        )
    return manifest


def _table(path: Path):
    table = pq.read_table(path)
    return table.drop_columns(list(TIMING_FIELDS))


def test_replay_rows_carry_provenance_and_failures_stay(small_corpus, tmp_path):
    cfg = ReplayConfig(manifest=small_corpus, conditions="original,spatial", detectors=DETECTORS, profile="throughput")
    rows = read_results(replay(cfg, tmp_path / "run", workers=2, progress=False))
    n_videos = 3 * 6 + 2
    assert len(rows) == n_videos * 2 * 2  # every (video, condition, detector), failures included
    assert len({r.key for r in rows}) == len(rows)
    ok = [r for r in rows if r.error is None]
    assert all(
        len(r.input_sha256) == 64
        and len(r.spec_hash) == 64
        and r.detector_version
        and r.runtime == "embedded"
        and r.model_sha256
        and r.variant_sha256
        for r in ok
    )
    broken = [r for r in rows if r.video_id == "broken"]
    missing = [r for r in rows if r.video_id == "missing"]
    assert {r.error_class for r in broken} == {"InvalidVideo"} and all(r.error_kind == "video" for r in broken)
    assert {r.error_class for r in missing} == {"SourceError"} and len(missing) == 4
    spatial = [r for r in ok if r.condition == "spatial"]
    assert {(r.width, r.height) for r in spatial} == {(80, 64)}


def test_a_killed_replay_resumes_to_the_same_results(small_corpus, tmp_path):
    args = [
        sys.executable,
        "-m",
        "gateway.cli",
        "replay",
        str(small_corpus),
        "--conditions",
        "original,spatial",
        "--detectors",
        DETECTORS,
        "--profile",
        "throughput",
        "--workers",
        "1",
        "--allow-missing",  # (the corpus names a missing file on purpose: its rows are part of what resumes)
    ]
    full = tmp_path / "full"
    subprocess.run([*args, "--out", str(full)], check=True, capture_output=True)

    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [*args, "--out", str(killed)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 120
    while len(list((killed / "parts").glob("part-*.parquet"))) < 2:  # wait for some, not all, of the work
        assert proc.poll() is None, "the run finished before it could be killed"
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.02)
    kill_group(proc)
    assert not (killed / "results.parquet").exists()
    parts_before = len(list((killed / "parts").glob("part-*.parquet")))
    assert 2 <= parts_before < 10

    res = subprocess.run([*args, "--out", str(killed)], capture_output=True, text=True)
    assert res.returncode == 1 and "--resume" in res.stderr  # an existing run is never silently overwritten
    subprocess.run([*args, "--out", str(killed), "--resume"], check=True, capture_output=True)

    a, b = _table(full / "results.parquet"), _table(killed / "results.parquet")
    assert a.num_rows == b.num_rows == 20 * 2 * 2
    assert a.equals(b)  # same rows, same scores, same provenance; only timings differ between runs


def test_resume_refuses_another_configuration(small_corpus, tmp_path):
    cfg = ReplayConfig(manifest=small_corpus, conditions="original", detectors="d3_px", profile="throughput")
    replay(cfg, tmp_path / "run", workers=1, progress=False)
    other = cfg.model_copy(update={"conditions": "original,spatial"})
    with pytest.raises(ValueError, match="another configuration"):
        replay(other, tmp_path / "run", resume=True, progress=False)
    for operational in ({"max_encoder_mb": 1}, {"worker_memory_mb": 999}):  # how it runs, not what it yields
        limits = cfg.limits.model_copy(update=operational)
        assert cfg.model_copy(update={"limits": limits}).identity() == cfg.identity()
    fewer_frames = cfg.limits.model_copy(update={"max_frames": 9})  # what it yields: part of the identity
    assert cfg.model_copy(update={"limits": fewer_frames}).identity() != cfg.identity()


def test_a_replay_reads_under_its_manifests_folder_unless_given_more_roots(tmp_path, media):
    """Videos named by absolute path outside the manifest's folder are refused (error rows, naming --file-root),
    unless --file-root adds their folder; the manifest's own folder stays readable (--file-root replaced it, and
    the manifest's own videos were refused, though the docs said it adds)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "v.mp4").write_bytes(media["basic"])
    run = tmp_path / "manifests"
    run.mkdir()
    (run / "w.mp4").write_bytes(media["basic"])
    manifest = run / "m.jsonl"
    rows = [{"video_id": "v", "uri": str(elsewhere / "v.mp4"), "label": "real", "source": "real", "anchor_id": "v"},
            {"video_id": "w", "uri": "w.mp4", "label": "real", "source": "real", "anchor_id": "w"}]  # fmt: skip
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows))
    cfg = ReplayConfig(manifest=manifest, conditions="original", detectors="d3_px", profile="throughput")
    by_video = {r.video_id: r for r in read_results(replay(cfg, tmp_path / "r1", workers=1, progress=False))}
    refused = by_video["v"]
    assert refused.error_class == "SourceError" and "outside the allowed roots" in refused.error
    assert by_video["w"].score is not None
    from gateway.batch.failures import summarize

    (line,) = summarize(list(by_video.values())).lines()
    assert "outside the allowed roots" in line and "--file-root" in line and "into a new --out" in line
    wider = cfg.model_copy(update={"file_roots": [elsewhere]})
    assert wider.identity() == cfg.identity()  # where files may be read does not change what a run yields
    resumed = {r.video_id: r for r in read_results(replay(wider, tmp_path / "r1", resume=True, progress=False))}
    assert resumed["v"].error == refused.error  # what the hint says: a --resume keeps a refused video's rows
    scored = read_results(replay(wider, tmp_path / "r2", workers=1, progress=False))
    assert len(scored) == 2 and all(r.error is None and r.score is not None for r in scored)


@pytest.fixture
def served(tmp_path):
    """A loopback HTTP server of the folder ``tmp_path / "served"``: its base URL."""
    import http.server
    import threading
    from functools import partial

    (tmp_path / "served").mkdir()
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "served"))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_replay_fetches_a_manifests_urls_only_from_the_hosts_it_is_given(tmp_path, media, served):
    """A manifest of URLs could not be replayed: no replay option reached sources.http_allow_hosts, so every URL row
    was a SourceError. Now --http-allow-host does; without it the refusal says which option to give."""
    (tmp_path / "served" / "v.mp4").write_bytes(media["basic"])
    (tmp_path / "w.mp4").write_bytes(media["basic"])
    manifest = tmp_path / "m.jsonl"
    rows = [{"video_id": "v", "uri": f"{served}/v.mp4", "label": "real", "source": "real", "anchor_id": "v"},
            {"video_id": "w", "uri": "w.mp4", "label": "real", "source": "real", "anchor_id": "w"}]  # fmt: skip
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows))
    cfg = ReplayConfig(manifest=manifest, conditions="original", detectors="d3_px", profile="throughput")
    by_video = {r.video_id: r for r in read_results(replay(cfg, tmp_path / "r1", workers=1, progress=False))}
    assert by_video["v"].error_class == "SourceError" and "not in the allow-list" in by_video["v"].error
    from gateway.batch.failures import summarize

    (line,) = summarize(list(by_video.values())).lines()
    assert "--http-allow-host" in line and "into a new --out" in line
    allowed = cfg.model_copy(update={"http_allow_hosts": [served.split("://", 1)[1]]})  # 127.0.0.1:port
    assert allowed.identity() == cfg.identity()  # where videos may come from does not change what a run yields
    v, w = sorted(read_results(replay(allowed, tmp_path / "r2", workers=1, progress=False)), key=lambda r: r.video_id)
    assert v.error is None and v.score == w.score and v.input_sha256 == w.input_sha256  # the same bytes, fetched
    with pytest.raises(ValueError, match="allow-list entry 'a b' is no host name"):
        ReplayConfig(manifest=manifest, http_allow_hosts=["a b"])


def test_the_command_line_gives_the_allow_list_to_a_replay_via_kafka_and_a_host_not_on_it_is_refused(
    tmp_path, media, served, broker
):
    """--http-allow-host reaches the gateway that a --via kafka replay configures (its fetch, not the in-process
    one), and holds only the host named: the same server under another name (localhost) is refused."""
    from click.testing import CliRunner

    from gateway.cli import main

    (tmp_path / "served" / "v.mp4").write_bytes(media["basic"])
    port = served.rsplit(":", 1)[1]
    rows = [{"video_id": "v", "uri": f"{served}/v.mp4", "label": "real", "source": "real", "anchor_id": "v"},
            {"video_id": "x", "uri": f"http://localhost:{port}/v.mp4", "label": "real", "source": "real",
             "anchor_id": "x"}]  # fmt: skip
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps(row) + "\n" for row in rows))
    run = ["--conditions", "original", "--detectors", "d3_px", "--profile", "throughput", "--out", str(tmp_path / "r")]
    # (--allow-missing: past the pre-flight, which refuses the localhost row before any work, to the gateway's fetch)
    args = ["replay", str(manifest), *run, "--http-allow-host", f"127.0.0.1:{port}", "--allow-missing", "--via",
            "kafka", "--bootstrap"]  # fmt: skip
    got = CliRunner().invoke(main, [*args, broker.bootstrap])
    assert got.exit_code == 0, got.output
    by_video = {r.video_id: r for r in read_results(tmp_path / "r" / "results.parquet")}
    assert by_video["v"].error is None and by_video["v"].score is not None  # fetched by the gateway from 127.0.0.1
    assert by_video["x"].error_class == "SourceError" and "'localhost' is not in the allow-list" in by_video["x"].error
    assert "--http-allow-host" in got.output and "into a new --out" in got.output  # the hint, on the CLI's stderr
    route = json.loads((tmp_path / "r" / "run.json").read_text())["route"]  # how the videos went, recorded
    assert route == f"through Kafka (the Kafka cluster at {broker.bootstrap}) and a gateway in this process"


def test_a_run_records_its_route_and_a_resume_in_process_adds_to_it(tmp_path, media):
    """A killed --via kafka replay leaves run.json and no rows; finished in process with --resume, its rows came
    in process, and run.json (so the report) said nothing of either route."""
    from detectors.manifest import read_manifest
    from gateway.batch.replay import IN_PROCESS, prepare_run

    (tmp_path / "w.mp4").write_bytes(media["basic"])
    manifest = tmp_path / "m.jsonl"
    row = {"video_id": "w", "uri": "w.mp4", "label": "real", "source": "real", "anchor_id": "w"}
    manifest.write_text(json.dumps(row) + "\n")
    cfg = ReplayConfig(manifest=manifest, conditions="original", detectors="d3_px", profile="throughput")
    prepare_run(cfg, tmp_path / "r", False, read_manifest(manifest), route="through Kafka (a local Tansu broker)")
    (scored,) = read_results(replay(cfg, tmp_path / "r", resume=True, workers=1, progress=False))
    assert scored.score is not None
    route = json.loads((tmp_path / "r" / "run.json").read_text())["route"]
    assert route == f"through Kafka (a local Tansu broker); resumed {IN_PROCESS}"
    replay(cfg, tmp_path / "r", resume=True, workers=1, progress=False)  # resumed again: said once
    assert json.loads((tmp_path / "r" / "run.json").read_text())["route"] == route


def test_a_video_that_always_overruns_is_retried_up_to_the_cap_then_gets_rows(tmp_path, media, bikes):
    """Its worker is killed at the deadline each time (VideoTimeout); after max_attempts the video's rows carry
    the class, and the other videos of the run are scored as usual: the run is never aborted."""
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "small.mp4").write_bytes(media["basic"])
    (tmp_path / "once.mp4").write_bytes(bikes)
    # a minute of bikes (six times over, stream copied): its transcode takes far past the deadline on any machine
    # (bikes alone, 10 s, finished within 4 s on a fast one)
    ffmpeg("-stream_loop", "5", "-i", str(tmp_path / "once.mp4"), "-c", "copy", "-an", str(folder / "bikes.mp4"))
    manifest = folder / "m.jsonl"
    manifest.write_text(
        "".join(
            json.dumps({"video_id": v, "uri": f"{v}.mp4", "label": "real", "source": "real", "anchor_id": v}) + "\n"
            for v in ("small", "bikes")
        )
    )
    limits = {"video_timeout_s": 4.0, "max_attempts": 2}
    cfg = ReplayConfig(manifest=manifest, conditions="original,transcode", detectors="d3_px", limits=limits)
    rows = {
        (r.video_id, r.condition): r for r in read_results(replay(cfg, tmp_path / "run", workers=2, progress=False))
    }
    for cond in ("original", "transcode"):
        assert rows[("small", cond)].error is None
        slow = rows[("bikes", cond)]
        assert (slow.error_kind, slow.error_class, slow.score) == ("video", "VideoTimeout", None)
