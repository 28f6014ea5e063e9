"""A chat detector through the command line, as a user runs it: the shipped example cards added, the examples
replayed under all six conditions beside ``npr`` by worker processes, the report's chat quantities equal to an
independent computation (scikit-learn, scipy), the cache across runs, the bound on requests in flight across
workers, a server that is down, and a planted API key found nowhere. The server is the protocol double
(tests/support/chat_server.py) on a real socket; it answers in the example card's model's name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest
from sklearn.metrics import f1_score, roc_auc_score

from gateway.batch.results import read_results
from tests.support.chat_server import ChatDouble

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
KEY = "sk-planted-9c41d2e7a0b35f68"
CONDITIONS = ["original", "transcode", "spatial", "temporal", "presentation", "full"]
UNPARSED = 3  # replies scripted to say no verdict


def _lastmile(*args: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=600)  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The examples replayed with chat-rating and chat-diagnostic (the shipped cards, pointed at the double's port,
    with a key from the environment), npr beside them; then reported."""
    tmp = tmp_path_factory.mktemp("chat")
    model = "Qwen/Qwen2.5-VL-7B-Instruct"
    # the cut puts the examples' mean brightness (about 140) on both sides of the verdict
    with ChatDouble(model=model, key=KEY, cut=141.0) as double:
        env = {**os.environ, "LASTMILE_REPO": str(tmp / "models"), "LASTMILE_CHAT_CACHE": str(tmp / "cache"),
               "XDG_RUNTIME_DIR": str(tmp), "PLANTED_KEY": KEY}  # fmt: skip
        port = double.url.split(":")[2].split("/")[0]
        added = []
        for name in ("card.yaml", "card-diagnostic.yaml", "card-binary.yaml"):
            text = (EXAMPLES / "chat" / name).read_text()
            assert "http://127.0.0.1:8000/v1" in text and model in text
            text = text.replace("127.0.0.1:8000", f"127.0.0.1:{port}")
            text = text.replace("# api_key_env: OPENAI_API_KEY", "api_key_env: PLANTED_KEY")
            (tmp / name).write_text(text + ("  api_key_env: PLANTED_KEY\n" if "api_key_env: P" not in text else ""))
            added.append(_lastmile("detectors", "add", "--card", str(tmp / name), env=env, cwd=tmp))
        listed = _lastmile("detectors", "list", env=env, cwd=tmp)
        double.script = [("text", "I am not able to judge this video.")] * UNPARSED
        args = ["replay", str(EXAMPLES / "manifest.jsonl"), "--profile", "throughput", "--workers", "2"]
        chats = "chat-rating,chat-diagnostic,chat-binary"
        first = _lastmile(*args, "--detectors", f"{chats},npr,spectral", "--out", "run", env=env, cwd=tmp)
        asked = len(double.requests)
        compare = ("--compare", "npr:chat-rating", "--compare", "chat-binary:chat-rating")  # (two prompts of a model)
        report = _lastmile("report", "run", "--replicates", "200", *compare, env=env, cwd=tmp)
        again = _lastmile(*args, "--detectors", chats, "--conditions", "original", "--out", "again", env=env,
                          cwd=tmp)  # fmt: skip
        asked_again = len(double.requests) - asked
        fresh = _lastmile(*args, "--detectors", "chat-rating", "--conditions", "original", "--no-cache", "--out",
                          "fresh", env=env, cwd=tmp)  # fmt: skip
        asked_fresh = len(double.requests) - asked - asked_again
        yield dict(tmp=tmp, double=double, added=added, listed=listed, first=first, report=report, again=again,
                   fresh=fresh, asked=asked, asked_again=asked_again, asked_fresh=asked_fresh)  # fmt: skip


def test_the_shipped_cards_are_recorded_and_replayed_under_every_condition_beside_npr(run):
    for added in run["added"]:
        assert added.returncode == 0 and added.stdout.startswith("installed chat chat-"), added.stderr
    assert "chat-rating" in run["listed"].stdout and "chat-diagnostic" in run["listed"].stdout
    assert run["first"].returncode == 0, run["first"].stderr
    rows = read_results(run["tmp"] / "run" / "results.parquet")
    chat = [r for r in rows if r.runtime == "chat"]
    assert {(r.detector, r.condition) for r in rows} == {
        (d, c) for d in ("chat-rating", "chat-diagnostic", "chat-binary", "npr", "spectral") for c in CONDITIONS
    }
    # issue 64: on the example clips (made at the cards' calibration size) no reference detector goes over 90% one
    # way on both labels at once (at 160x120, npr called all 72 verdicts generated and spectral all real)
    for det in ("npr", "spectral"):
        for called in (True, False):
            shares = [
                np.mean([r.decision == called for r in rows if r.detector == det and r.label == label])
                for label in ("real", "generated")
            ]
            assert not all(share > 0.9 for share in shares), (det, called, shares)
    assert len(chat) == 3 * 6 * 12 and run["asked"] == len(chat)  # one request per variant and chat detector
    assert all(r.runtime_endpoint == run["double"].url and r.model_sha256 for r in chat)
    assert sum(r.error_kind == "reply" for r in chat) == UNPARSED
    assert all(r.error_class == "UnparsedReply" and r.decision is None for r in chat if r.error_kind == "reply")
    scored = [r for r in chat if r.error is None]
    assert all(r.tokens_in == 12 + 85 * 16 and r.tokens_out and r.cached is False for r in scored)
    assert {r.score is None for r in scored if r.detector == "chat-diagnostic"} == {True}
    assert {r.threshold for r in scored if r.detector == "chat-rating"} == {50.0}
    binary = [r for r in scored if r.detector == "chat-binary"]  # the verdict decides; its log-odds are the score
    assert binary and all(r.threshold is None and r.score is not None for r in binary)
    assert all((r.score >= 0) == r.decision for r in binary)  # (the double's p and its verdict share one cut)


def test_the_report_shows_recall_macro_f1_rating_auc_aspects_and_collapse_with_intervals(run):
    assert run["report"].returncode == 0, run["report"].stderr
    md = (run["tmp"] / "run" / "report.md").read_text()
    report = json.loads((run["tmp"] / "run" / "report.json").read_text())
    assert "## Chat detectors (multimodal LLMs), 95% CI" in md and "## Diagnostic aspects" in md
    assert "| chat-diagnostic | no score | no score |" in md  # no AUC is made of verdicts
    assert "| chat-binary | no score" not in md  # (its log-odds rank)
    cells = {(c["detector"], c["condition"]): c for c in report["chat"]}
    assert set(cells) == {(d, c) for d in ("chat-rating", "chat-diagnostic", "chat-binary") for c in CONDITIONS}
    assert sum(c["unparsed"] for c in cells.values()) == UNPARSED
    assert sum(c["tokens_in"] for c in cells.values()) == (3 * 6 * 12) * (12 + 85 * 16)
    assert {c["by_verdict"] for c in report["cells"] if c["detector"] in ("chat-binary", "chat-diagnostic")} == {True}
    for c in report["cells"]:
        if c["detector"].startswith("chat-"):
            assert c["macro_f1_ci"][0] <= c["macro_f1"] <= c["macro_f1_ci"][1]
    for c in cells.values():
        for a in c["aspects"].values():
            assert a["auc_ci"][0] <= a["auc"] <= a["auc_ci"][1]
    contests = {
        (c["champion"], c["challenger"]): c for c in json.loads((run["tmp"] / "run" / "comparison.json").read_text())
    }
    for pair in (("npr", "chat-rating"), ("chat-binary", "chat-rating")):  # against an ONNX one; two prompts
        by_condition = {c["condition"]: c for c in contests[pair]["conditions"]}
        assert set(by_condition) == set(CONDITIONS)
        assert all(c["videos"] >= 11 and c["auc_difference"] is not None for c in by_condition.values())


def _paired(rows, det, cond):
    """Per generation source: (labels, rows) of its generated videos and the real anchors they are paired with."""
    mine = [r for r in rows if r.detector == det and r.condition == cond]
    for source in sorted({r.source for r in mine if r.label == "generated"}):
        gen = [r for r in mine if r.label == "generated" and r.source == source]
        anchors = {r.anchor_id for r in gen}
        pair = gen + [r for r in mine if r.label == "real" and r.anchor_id in anchors]
        yield np.array([r.label == "generated" for r in pair]), pair


def test_each_chat_quantity_equals_an_independent_computation(run):
    rows = read_results(run["tmp"] / "run" / "results.parquet")
    report = json.loads((run["tmp"] / "run" / "report.json").read_text())
    cells = {(c["detector"], c["condition"]): c for c in report["cells"]}
    chat = {(c["detector"], c["condition"]): c for c in report["chat"]}
    checked = 0
    for cond in CONDITIONS:
        for det in ("chat-rating", "chat-diagnostic"):
            f1s, aucs, aspect_aucs = [], [], {}
            for y, pair in _paired(rows, det, cond):
                # a reply that said no verdict is a miss of its class
                said = np.array([(r.decision if r.error is None else not y_i) for r, y_i in zip(pair, y, strict=True)])
                f1s.append(f1_score(y, said, average="macro", zero_division=0))
                ok = np.array([r.error is None for r in pair])
                if det == "chat-rating" and len(set(y[ok])) == 2:
                    aucs.append(roc_auc_score(y[ok], [r.score for r, k in zip(pair, ok, strict=True) if k]))
                for r, k in zip(pair, ok, strict=True):
                    if k and det == "chat-diagnostic":
                        for name in json.loads(r.aspects):
                            aspect_aucs.setdefault(name, [])
                if det == "chat-diagnostic" and len(set(y[ok])) == 2:
                    for name in aspect_aucs:
                        values = [json.loads(r.aspects)[name] for r, k in zip(pair, ok, strict=True) if k]
                        aspect_aucs[name].append(roc_auc_score(y[ok], values))
            assert cells[det, cond]["macro_f1"] == pytest.approx(np.mean(f1s))
            if det == "chat-rating":
                assert cells[det, cond]["auc"] == pytest.approx(np.mean(aucs))
            else:
                assert cells[det, cond]["auc"] is None  # no score
                for name, values in aspect_aucs.items():
                    assert chat[det, cond]["aspects"][name]["auc"] == pytest.approx(np.mean(values))
                given = [json.loads(r.aspects) for r in rows if r.detector == det and r.condition == cond and r.aspects]
                collapsed = sum(len(set(a.values())) == 1 for a in given)
                ci = binomtest(collapsed, len(given)).proportion_ci(method="wilson")
                assert chat[det, cond]["collapse"] == pytest.approx(collapsed / len(given))
                assert chat[det, cond]["collapse_ci"] == pytest.approx([ci.low, ci.high])
            checked += 1
    assert checked == 12


def test_a_repeated_replay_sends_no_request_and_no_cache_sends_them_all(run):
    assert run["again"].returncode == 0, run["again"].stderr
    assert run["asked_again"] == 0
    again = read_results(run["tmp"] / "again" / "results.parquet")
    first = {r.key: r for r in read_results(run["tmp"] / "run" / "results.parquet")}
    assert all(r.cached is True and (r.score, r.decision) == (first[r.key].score, first[r.key].decision) for r in again)
    assert run["fresh"].returncode == 0, run["fresh"].stderr
    assert run["asked_fresh"] == 12  # every video asked again under original
    assert len(again) == 3 * 12
    fresh = read_results(run["tmp"] / "fresh" / "results.parquet")
    assert {r.cached for r in fresh} == {False}


def test_workers_share_the_bound_on_requests_in_flight(tmp_path, monkeypatch):
    """Two worker processes, each asking its video's six variants at once (slow replies keep them open), against
    max_concurrency 3: without the bound shared across processes the double would see 6 requests open at once; it
    sees 3."""
    from detectors.card import ModelCard
    from detectors.repository import install_remote
    from gateway.batch.replay import ReplayConfig, replay

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # (the slots' folder, which the workers inherit)
    manifest = _two_videos(tmp_path)
    with ChatDouble(script=[("slow", 0.5)] * 12) as double:
        chat = {"endpoint": double.url, "model": double.model, "prompt": "rating", "max_concurrency": 3}
        install_remote(ModelCard.model_validate({"name": "chat-b", "version": "1", "chat": chat}), tmp_path / "models")
        cfg = ReplayConfig(manifest=manifest, detectors="chat-b", profile="throughput", repo=tmp_path / "models",
                           chat_cache=False)  # fmt: skip
        rows = read_results(replay(cfg, tmp_path / "run", workers=2, progress=False))
    assert len(rows) == 12 and all(r.error is None for r in rows)
    assert double.most_in_flight == 3


def _two_videos(tmp_path: Path) -> Path:
    """A manifest of the examples' first two videos (a real anchor and a counterpart), their files beside it."""
    manifest = tmp_path / "two.jsonl"
    lines = (EXAMPLES / "manifest.jsonl").read_text().splitlines()[:2]
    manifest.write_text("".join(line + "\n" for line in lines))
    for line in lines:
        uri = json.loads(line)["uri"]
        (tmp_path / uri).parent.mkdir(exist_ok=True)
        (tmp_path / uri).write_bytes((EXAMPLES / uri).read_bytes())
    return manifest


def test_the_planted_key_is_sent_and_appears_in_no_row_log_or_report(run):
    assert all(s.headers.get("Authorization") == f"Bearer {KEY}" for s in run["double"].requests)
    for done in (run["added"][0], run["added"][1], run["listed"], run["first"], run["report"], run["again"]):
        assert KEY not in done.stdout + done.stderr
    for path in run["tmp"].rglob("*"):
        if path.is_file() and "cache" not in path.parts:
            assert KEY.encode() not in path.read_bytes(), path


def test_a_server_down_for_the_whole_run_gives_infra_rows_and_a_failed_run(tmp_path):
    from detectors.repository import install_remote
    from detectors.serving.processes import free_port
    from gateway.batch.failures import check_results
    from gateway.batch.replay import ReplayConfig, replay
    from tests.support.chat_server import ChatDouble as _Double

    with _Double() as double:  # (a card recorded while the server was up; the server then gone)
        from detectors.card import ModelCard

        endpoint = f"http://127.0.0.1:{free_port()}/v1"
        card = ModelCard.model_validate({"name": "chat-down", "version": "1", "chat": {"endpoint": endpoint,
                                         "model": double.model, "prompt": "binary"}})  # fmt: skip
    install_remote(card, tmp_path / "models")
    manifest = _two_videos(tmp_path)
    cfg = ReplayConfig(manifest=manifest, conditions="original", detectors="chat-down", profile="throughput",
                       repo=tmp_path / "models", triton_startup_timeout_s=1)  # fmt: skip
    path = replay(cfg, tmp_path / "run", workers=1, progress=False, start_grace_s=3)
    rows = read_results(path)
    assert len(rows) == 2 and {(r.error_kind, r.decision, r.runtime) for r in rows} == {("infra", None, "chat")}
    assert {r.runtime_endpoint for r in rows} == {endpoint}
    assert check_results(path).failed  # what makes `lastmile replay` exit 1
