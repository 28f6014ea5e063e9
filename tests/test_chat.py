"""Chat detectors in one process, against the protocol double of a Chat Completions server over real HTTP
(tests/support/chat_server.py): the parse of realistic replies, the request as sent (16 ordered frames at short side
256, no metadata), retries, the cache, the bound on requests in flight, the key that never prints."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from detectors.card import ModelCard
from detectors.chat.cache import ReplyCache, cache_key
from detectors.chat.client import retry_after
from detectors.chat.prompts import load_template
from detectors.chat.replies import parse_reply, verdict_log_odds
from detectors.errors import CardError, RuntimeUnavailable, UnparsedReply
from detectors.runtimes.chat import ChatRuntime, Judgement
from detectors.serving.processes import free_port
from tests.support.chat_server import ChatDouble, frames_of
from tests.support.media import ramp_clip

BINARY, RATING, DIAGNOSTIC = (load_template(p) for p in ("binary", "rating", "diagnostic"))
ASPECTS = ("appearance", "lighting", "temporal", "motion", "physics")


def _card(double: ChatDouble, prompt: str = "binary", name: str = "chat-x", **chat) -> ModelCard:
    spec = {"endpoint": double.url, "model": double.model, "prompt": prompt, **chat}
    return ModelCard.model_validate({"name": name, "version": "1", "chat": spec})


def _frames(value: int, t: int = 16, h: int = 256, w: int = 320) -> np.ndarray:
    return np.full((t, h, w, 3), value, np.uint8)


# -- the parse: realistic reply shapes --------------------------------------------------------------------------
PARSED = [
    (BINARY, '{"verdict": "generated"}', True),
    (BINARY, '```json\n{"Verdict": "REAL"}\n```', False),
    (BINARY, "After looking at the frames closely, I believe this video is AI-generated.", True),
    (BINARY, "Verdict: Real. The lighting is consistent across frames.", False),
    (BINARY, "This is not real footage.", True),
    (BINARY, 'Sure! Here is my answer:\n{"answer": "fake"}\nLet me know if you need more.', True),
    (RATING, '{"rating": 73}', 73.0),
    (RATING, '{"Rating": "85%"}', 85.0),
    (RATING, "Rating: 12/100", 12.0),
    (RATING, " 42 ", 42.0),
    (RATING, '```\n{"rating": 0}\n```', 0.0),
]


@pytest.mark.parametrize(("template", "text", "want"), PARSED)
def test_a_reply_is_read_by_the_written_rules(template, text, want):
    reply = parse_reply(text, template)
    assert (reply.verdict if template.format == "binary" else reply.rating) == want


UNPARSED = [
    (BINARY, "", "empty reply"),
    (BINARY, "   \n", "empty reply"),
    (BINARY, "It could be real, or it could be generated.", "names both"),
    (BINARY, "I'm sorry, I can't help with identifying that.", "no verdict"),
    (BINARY, '{"verdict": "maybe"}', "neither generated nor real"),
    (RATING, '{"rating": 150}', "out of range"),
    (RATING, '{"rating": -3}', "out of range"),
    (RATING, "Rating: 101", "out of range"),
    (RATING, "I would say it is fairly likely.", "no rating"),
    (RATING, '{"rating": true}', "not a number"),
    (
        DIAGNOSTIC,
        '{"appearance": 10, "lighting": 20, "temporal": 30, "physics": 40, "verdict": "real"}',
        "aspect motion",
    ),
    (BINARY, "As an AI model, I cannot judge this video.", "no verdict"),  # ("AI" in prose is no verdict)
    (RATING, "Rating: 8/10", "another scale"),
    (RATING, '{"rating": 0.92}', "looks like a probability"),
    (RATING, '{"probability": 0.92}', "no rating"),
    (RATING, '{"rating": ' + "9" * 400 + "}", "out of range"),
    (RATING, '{"rating": ' + "9" * 5000 + "}", "no rating"),  # (past the JSON parser's longest integer)
]


@pytest.mark.parametrize(("template", "text", "reason"), UNPARSED)
def test_a_reply_that_says_no_verdict_is_unparsed_with_its_reason(template, text, reason):
    with pytest.raises(UnparsedReply, match=reason):
        parse_reply(text, template)


def test_refusals_and_replies_cut_off_at_max_tokens_say_so():
    with pytest.raises(UnparsedReply, match="refusal: I can't assist"):
        parse_reply(None, BINARY, refusal="I can't assist with that.")
    with pytest.raises(UnparsedReply, match=r"no verdict in the reply \(cut off at max_tokens\)"):
        parse_reply('{"verdict": "gen', BINARY, finish_reason="length")


def test_a_diagnostic_reply_gives_five_aspects_in_json_nested_or_in_lines():
    flat = parse_reply('{"appearance": 10, "lighting": 20, "temporal": 30, "motion": 40, "physics": 50, '
                       '"verdict": "generated"}', DIAGNOSTIC)  # fmt: skip
    nested = parse_reply('{"aspects": {"Appearance": 10, "Lighting": 20, "Temporal": 30, "Motion": 40, '
                         '"Physics": 50}, "verdict": "generated"}', DIAGNOSTIC)  # fmt: skip
    lines = parse_reply("Appearance: 10\nLighting: 20\nTemporal: 30\nMotion: 40\nPhysics: 50\nVerdict: generated",
                        DIAGNOSTIC)  # fmt: skip
    for reply in (flat, nested, lines):
        assert reply.verdict is True and reply.aspects == dict(zip(ASPECTS, (10, 20, 30, 40, 50), strict=True))
        assert reply.collapsed is False
    same = parse_reply('{"appearance": 7, "lighting": 7, "temporal": 7, "motion": 7, "physics": 7, "verdict": "real"}',
                       DIAGNOSTIC)  # fmt: skip
    assert same.collapsed is True and same.verdict is False


def test_the_log_odds_are_read_at_the_verdict_token_whatever_the_tokenizer_splits():
    text = 'It was recorded, I think. {"verdict": "generated"}'
    tokens = ["It", " was", " re", "corded", ",", " I", " think", ".", ' {"', "verdict", '":', ' "', "gener", 'ated"}']
    assert "".join(tokens) == text
    gen = tokens.index("gener")

    def content(top):
        out = [{"token": t, "logprob": 0.0, "top_logprobs": []} for t in tokens]
        out[gen] = {"token": "gener", "logprob": math.log(0.8), "top_logprobs": top}
        # a prose token before the verdict that begins a real word ("re"corded) is not the verdict's
        out[tokens.index(" re")]["top_logprobs"] = [{"token": " re", "logprob": math.log(0.9)}]
        return {"content": out}

    reply = parse_reply(text, BINARY)
    assert reply.verdict is True and text[reply.verdict_at :].startswith("generated")
    both = [{"token": "gener", "logprob": math.log(0.8)}, {"token": "real", "logprob": math.log(0.15)}]
    assert verdict_log_odds(content(both), True, reply.verdict_at, text) == pytest.approx(math.log(0.8 / 0.15))
    # the other class absent from the alternatives: the mass they leave (here 1 - 0.8)
    one = both[:1]
    assert verdict_log_odds(content(one), True, reply.verdict_at, text) == pytest.approx(math.log(0.8 / 0.2))
    assert verdict_log_odds(None, True, reply.verdict_at, text) is None
    assert verdict_log_odds(content(both), False, reply.verdict_at, text) is None  # not a real word there
    assert verdict_log_odds(content(both), True, reply.verdict_at, text + " ") is None  # tokens that do not spell it


def test_retry_after_reads_seconds_and_dates_and_is_capped():
    assert retry_after("3") == 3.0 and retry_after("100000") == 60.0
    assert retry_after(None) is None and retry_after("soon") is None
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past: no wait


# -- the runtime against the double ----------------------------------------------------------------------------
@pytest.fixture
def double(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # (the request slots' folder: this test's own)
    with ChatDouble() as d:
        yield d


@pytest.fixture
def cache(tmp_path):
    return ReplyCache(tmp_path / "cache")


def test_the_scores_follow_the_pictures_in_each_format(double):
    dark, bright = _frames(40), _frames(210)
    binary = ChatRuntime(_card(double, "binary")).judge([dark, bright])
    rating = ChatRuntime(_card(double, "rating")).judge([dark, bright])
    diagnostic = ChatRuntime(_card(double, "diagnostic")).judge([dark, bright])
    assert [j.decision for j in binary] == [False, True] and binary[0].score < 0 < binary[1].score
    # the double's p(generated) = sigmoid((b - 127.5) / 20): the log-odds are (b - 127.5) / 20, JPEG's rounding aside
    assert binary[1].score == pytest.approx((210 - 127.5) / 20, abs=0.1) and binary[0].threshold is None
    assert [j.score for j in rating] == [round(40 / 2.55), round(210 / 2.55)] and rating[0].threshold == 50.0
    assert [j.decision for j in rating] == [False, True]
    assert [j.decision for j in diagnostic] == [False, True] and diagnostic[0].score is None
    assert set(diagnostic[1].aspects.values()) == {round(210 / 2.55)}  # a grey still: every aspect one value
    assert all(j.tokens_in == 12 + 85 * 16 and j.tokens_out and not j.cached for j in binary + rating + diagnostic)


def test_a_request_carries_the_frames_in_order_as_images_and_asks_for_the_format(double):
    frames = np.stack([np.full((256, 300, 3), 10 * i, np.uint8) for i in range(16)])
    runtime = ChatRuntime(_card(double, "diagnostic", seed=7, max_tokens=64))
    runtime.judge([frames])
    (seen,) = double.requests
    body = seen.body
    sent = frames_of(body)
    assert sent.shape == (16, 256, 300, 3)
    assert np.allclose(sent.reshape(16, -1).mean(axis=1), 10 * np.arange(16), atol=1.5)  # in temporal order
    assert body["model"] == double.model and body["stream"] is False and body["seed"] == 7
    assert body["temperature"] == 0 and body["max_tokens"] == 64
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["required"] == [*ASPECTS, "verdict"] and "logprobs" not in body  # (logprobs: binary only)
    text = body["messages"][-1]["content"][0]["text"]
    assert "16 images" in text and "{" in text and "{frames}" not in text and "{answer}" not in text


def test_a_server_without_json_schemas_is_asked_in_plain_text(double):
    double.schema = False
    judged = ChatRuntime(_card(double, "rating")).judge([_frames(200), _frames(20)])
    assert [j.score for j in judged] == [round(200 / 2.55), round(20 / 2.55)]
    assert "response_format" in double.requests[0].body and "response_format" not in double.requests[-1].body


def test_429_with_retry_after_then_200_gives_scores_after_the_wait_it_asked(double):
    waits = []
    double.script = [("status", 429, {"Retry-After": "2"}), ("status", 503), ("malformed",)]
    (judged,) = ChatRuntime(_card(double, "rating"), sleep=waits.append).judge([_frames(200)])
    assert isinstance(judged, Judgement) and judged.score == round(200 / 2.55)
    assert waits == [2.0, 1.0, 2.0]  # Retry-After, then the backoff's second and third steps (0.5 s doubling)
    assert len(double.requests) == 4


def test_a_server_that_keeps_failing_or_stalls_is_unavailable_never_a_verdict(double):
    double.script = [("status", 500)] * 3
    (judged,) = ChatRuntime(_card(double, "rating", retries=2), sleep=lambda s: None).judge([_frames(200)])
    assert isinstance(judged, RuntimeUnavailable) and "did not answer after 3 attempts: 500" in str(judged)
    double.script = [("slow", 2.0)] * 2
    (judged,) = ChatRuntime(_card(double, "rating", retries=1, timeout_s=0.3), sleep=lambda s: None).judge(
        [_frames(200)]
    )
    assert isinstance(judged, RuntimeUnavailable) and "timed out" in str(judged)


def test_a_server_that_is_down_or_serves_another_model_is_refused_at_start(double):
    down = ModelCard.model_validate(
        {"name": "x", "version": "1", "chat": {"endpoint": f"http://127.0.0.1:{free_port()}/v1", "model": "m"}}
    )
    with pytest.raises(RuntimeUnavailable, match="no Chat Completions server answers"):
        ChatRuntime(down, startup_timeout_s=0.5)
    with pytest.raises(CardError, match="does not serve 'other-model' \\(it lists double-vl\\)"):
        ChatRuntime(_card(double, model="other-model"))


def test_an_unparsed_reply_is_its_own_outcome_with_the_tokens_it_used(double):
    double.script = [("text", "I cannot tell from these frames.")]
    (judged,) = ChatRuntime(_card(double, "binary")).judge([_frames(200)])
    assert isinstance(judged, UnparsedReply) and "no verdict" in str(judged)
    assert judged.tokens_in == 12 + 85 * 16 and judged.tokens_out > 0


def test_the_cache_answers_a_repeated_request_and_only_the_same_one(double, cache):
    runtime = ChatRuntime(_card(double, "rating"), cache=cache)
    first = runtime.judge([_frames(200), _frames(60)])
    again = runtime.judge([_frames(200), _frames(60)])
    assert len(double.requests) == 2 and [j.cached for j in again] == [True, True]
    assert [j.score for j in again] == [j.score for j in first]
    ChatRuntime(_card(double, "binary"), cache=cache).judge([_frames(200)])  # another prompt: another request
    ChatRuntime(_card(double, "rating", temperature=0.7), cache=cache).judge([_frames(200)])  # another sampling
    ChatRuntime(_card(double, "rating"), cache=cache).judge([_frames(201)])  # other frames
    assert len(double.requests) == 5
    ChatRuntime(_card(double, "rating"), cache=None).judge([_frames(200)])  # no cache: asked again
    assert len(double.requests) == 6


def test_requests_in_flight_stay_within_max_concurrency(double):
    double.script = [("slow", 0.3)] * 6
    judged = ChatRuntime(_card(double, "rating", max_concurrency=2)).judge([_frames(v) for v in range(10, 70, 10)])
    assert all(isinstance(j, Judgement) for j in judged) and double.most_in_flight == 2


def test_the_api_key_is_sent_as_a_bearer_token_and_never_printed(double, tmp_path, monkeypatch):
    key = "sk-planted-4f1c9e0b7d2a"
    double.key = key
    (tmp_path / "key.txt").write_text(key + "\n")
    runtime = ChatRuntime(_card(double, "rating", api_key_file="key.txt"), tmp_path)
    (judged,) = runtime.judge([_frames(200)])
    assert isinstance(judged, Judgement) and double.requests[-1].headers["Authorization"] == f"Bearer {key}"
    assert key not in repr(vars(runtime)) and key not in repr(vars(runtime.client))
    # a wrong key, which the server's 401 echoes: refused at start, at once, and the message holds no key
    monkeypatch.setenv("PLANTED_KEY", "sk-wrong-key-0000")
    with pytest.raises(RuntimeUnavailable, match=r"API key was refused \(401\)") as refused:
        ChatRuntime(_card(double, "rating", api_key_env="PLANTED_KEY"), startup_timeout_s=600)
    assert "sk-wrong-key-0000" not in str(refused.value) and "***" in str(refused.value)
    # the key refused later (rotated while running): a row's error holds no key either
    runtime.client.key = type(runtime.client.key)("sk-rotated-1111")
    (later,) = runtime.judge([_frames(100)])
    assert isinstance(later, RuntimeUnavailable) and "sk-rotated-1111" not in str(later) and "***" in str(later)
    monkeypatch.delenv("PLANTED_KEY")
    with pytest.raises(CardError, match="PLANTED_KEY is not set"):
        ChatRuntime(_card(double, "rating", api_key_env="PLANTED_KEY"))
    (tmp_path / "two.txt").write_text(key + "\nsecond-line")  # a header would quote it in its error: refused
    with pytest.raises(CardError, match="not one key") as bad:
        ChatRuntime(_card(double, "rating", api_key_file="two.txt"), tmp_path)
    assert key not in str(bad.value)


def test_a_reply_of_an_unexpected_shape_is_unparsed_and_a_bad_cache_entry_is_asked_again(double, cache):
    double.script = [("raw", {"choices": [{"message": {"content": 5}}], "usage": {"prompt_tokens": "x"}})]
    (judged,) = ChatRuntime(_card(double, "rating"), cache=cache).judge([_frames(90)])
    assert isinstance(judged, UnparsedReply) and "empty reply" in str(judged) and judged.tokens_in is None
    runtime = ChatRuntime(_card(double, "rating"), cache=cache)
    key = cache_key(runtime.request_sha256, _frames(80).tobytes())
    cache.put(key, {"choices": []})  # a kept file that is no completion
    (again,) = runtime.judge([_frames(80)])
    assert isinstance(again, Judgement) and not again.cached and len(double.requests) == 2


def test_a_chat_card_keeps_the_protocol_defaults_it_does_not_override(double, tmp_path):
    chat = {"endpoint": double.url, "model": "m", "api_key_file": "key.txt"}
    card = ModelCard.model_validate({"name": "c", "version": "1", "sampling": {"frames": 8}, "chat": chat})
    assert (card.sampling.frames, card.sampling.height, card.sampling.resize) == (8, 256, "short_side")
    with pytest.raises(ValueError, match="only a chat card"):
        ModelCard.model_validate({**json.loads(_card(double).model_dump_json()), "chat": None})
    from detectors.repository import install_remote

    stored = install_remote(card, tmp_path / "models", card_dir=tmp_path).card
    assert stored.chat.api_key_file == str(tmp_path.resolve() / "key.txt")  # (the key is not copied)


def test_a_template_is_read_beside_its_card_and_never_outside_it(tmp_path):
    (tmp_path / "mine.yaml").write_text("format: rating\nuser: 'Rate the {frames} frames: {answer}'\n")
    assert load_template("mine.yaml", tmp_path).texts(16)[1] == 'Rate the 16 frames: {"rating": N} with N from 0 to 100'
    (tmp_path.parent / "outside.yaml").write_text("format: binary\nuser: x\n")
    with pytest.raises(CardError, match="not outside it"):
        load_template("../outside.yaml", tmp_path)
    (tmp_path / "bad.yaml").write_text("format: diagnostic\nuser: x\n")
    with pytest.raises(CardError, match="names its aspects"):
        load_template("bad.yaml", tmp_path)


def test_the_pipeline_sends_16_ordered_frames_at_short_side_256_and_no_metadata(double, tmp_path):
    """The requests of a scored video, under every condition: the card's frames, each with a short side of 256, in
    temporal order (brightness rises through the clip); and nothing of the video's identity: the same clip under
    another id, label, source and anchor sends the very same requests."""
    from detectors.repository import install_remote
    from gateway.core.config import PipelineSettings
    from gateway.core.messages import VideoItem
    from gateway.scoring.assembly import build_pipeline

    install_remote(_card(double, "rating", name="chat-r"), tmp_path / "models")
    settings = PipelineSettings(detectors="chat-r", repo=tmp_path / "models", profile="throughput", chat_cache=False)
    pipeline = build_pipeline(settings)
    clip = ramp_clip()
    facts = dict(video_id="vid-3f9a-secret", label="generated", source="gen-sora-x", anchor_id="anchor-77c1")
    rows = pipeline.score(VideoItem(**facts, data=clip)).rows
    assert len(rows) == 6 and all(r.error is None and r.runtime == "chat" for r in rows)
    assert len(double.requests) == 6
    for seen in double.requests:
        sent = frames_of(seen.body)
        assert len(sent) == 16 and min(sent.shape[1:3]) == 256
        means = sent.reshape(16, -1).mean(axis=1)
        assert (np.diff(means) > -2).all() and means[-1] - means[0] > 100  # in temporal order
        urls = [p["image_url"]["url"] for p in seen.body["messages"][-1]["content"][1:]]
        assert all(u.startswith("data:image/jpeg;base64,") for u in urls)
        texts = [m["content"] if isinstance(m["content"], str) else m["content"][0] for m in seen.body["messages"]]
        words = json.dumps(texts) + json.dumps({k: v for k, v in seen.body.items() if k != "messages"})
        for value in ("vid-3f9a", "gen-sora", "anchor-77c1", ".mp4", "uri"):
            assert value not in words and value not in json.dumps(seen.headers)
    other = dict(video_id="x", label="real", source="real", anchor_id="x")
    pipeline.score(VideoItem(**other, data=clip))
    bodies = [json.dumps(s.body, sort_keys=True) for s in double.requests]  # (asked at once: in any order)
    assert sorted(bodies[6:]) == sorted(bodies[:6])
    assert {r.tokens_in for r in rows} == {12 + 85 * 16} and {r.threshold for r in rows} == {50.0}


def test_the_monitor_reads_a_chat_score_event_on_its_fast_path():
    """A chat detector's events (aspects as text, tokens as integers) keep the monitor's decoder on its fast path,
    which takes only fields of plain types: one field of another type would send every event through the model."""
    from gateway.core.messages import ScoreEvent
    from gateway.monitor import decode

    row = dict(video_id="v", condition="original", detector="chat-d", detector_version="1", runtime="chat",
               decision=True, aspects='{"motion":40.0}', tokens_in=1372, tokens_out=25, cached=False)  # fmt: skip
    value = ScoreEvent(**row, idempotency_key="v|original|chat-d|1").model_dump_json().encode()
    assert decode.FIELDS and decode.fast_fields(value) == decode.by_model(value)
    assert decode.fast_fields(value)["aspects"] == '{"motion":40.0}'


def test_the_cache_lives_where_the_environment_says_and_one_that_cannot_be_written_costs_nothing(tmp_path, monkeypatch):
    from detectors.chat.cache import cache_root

    for var in ("LASTMILE_CHAT_CACHE", "LASTMILE_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "lastmile" / "chat"
    monkeypatch.setenv("LASTMILE_CACHE", "/tmp/lastmile")  # as the chart sets it (a read-only root, /tmp writable)
    assert cache_root() == Path("/tmp/lastmile/chat")
    monkeypatch.setenv("LASTMILE_CHAT_CACHE", str(tmp_path / "chat"))
    assert cache_root() == tmp_path / "chat"
    (tmp_path / "file").write_text("not a folder")
    blocked = ReplyCache(tmp_path / "file" / "cache")  # a folder that cannot be made
    blocked.put("ab" * 32, {"choices": []})
    assert blocked.get("ab" * 32) is None
