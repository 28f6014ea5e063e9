"""A chat detector in the moderation tap, against the local broker and the Chat Completions double: its verdicts
are published as score events beside a tensor detector's, its replies and tokens are in the gateway's metrics, and
a chat server that goes away makes the gateway not ready, holds the video (never a verdict) and scores it once the
server is back."""

from __future__ import annotations

import json

from detectors.card import ModelCard
from detectors.repository import install_remote
from gateway import bus
from gateway.core.messages import ScoreEvent, VideoEvent
from tests.support.chat_server import ChatDouble
from tests.support.gateway import _config, _readyz
from tests.support.streaming import metric, read_topics, scrape, start_gateway, wait_for


def _card(double: ChatDouble, name: str, prompt: str) -> ModelCard:
    chat = {"endpoint": double.url, "model": double.model, "prompt": prompt, "retries": 1}
    return ModelCard.model_validate({"name": name, "version": "v1", "chat": chat})


def test_the_tap_publishes_chat_verdicts_and_holds_videos_while_the_chat_server_is_down(broker, tmp_path, media):
    video = tmp_path / "basic.mp4"
    video.write_bytes(media["basic"])
    double = ChatDouble()
    install_remote(_card(double, "chat-rating", "rating"), tmp_path / "models")
    install_remote(_card(double, "chat-diagnostic", "diagnostic"), tmp_path / "models")
    cfg = _config(broker, tmp_path, "chattap", detectors="chat-rating,chat-diagnostic,d3_px", repo=tmp_path / "models",
                  chat_cache=False, retry_backoff_s=0.2, retry_backoff_max_s=0.5)  # fmt: skip
    k = cfg.kafka
    producer = bus.producer(k)

    def send(video_id: str) -> None:
        event = VideoEvent(video_id=video_id, uri=video.as_uri(), label="generated")
        producer.send(k.input_topic, key=video_id.encode(), value=event.model_dump_json().encode())
        producer.flush()

    gw, thread = start_gateway(cfg)
    try:
        send("v1")
        per_video = 2 * 3  # two conditions, three detectors
        got = read_topics(broker.bootstrap, [k.output_topic], lambda g: len(g[k.output_topic]) >= per_video, 120)
        events = [ScoreEvent.model_validate_json(m.value) for m in got[k.output_topic]]
        chat = [e for e in events if e.runtime == "chat"]
        assert len(chat) == 4 and all(e.error is None and e.decision is not None for e in chat)
        assert {e.threshold for e in chat if e.detector == "chat-rating"} == {50.0}
        assert all(e.score is None and len(json.loads(e.aspects)) == 5 for e in chat if e.detector == "chat-diagnostic")
        assert all(e.tokens_in == 12 + 85 * 16 and e.runtime_endpoint == double.url for e in chat)
        text = scrape(gw.port)
        assert metric(text, "lastmile_chat_replies_total", detector="chat-rating", outcome="parsed") == 2
        assert metric(text, "lastmile_chat_prompt_tokens_total", detector="chat-diagnostic") == 2 * (12 + 85 * 16)

        port = int(double.url.split(":")[2].split("/")[0])
        double.close()  # the chat server goes away
        send("v2")
        _status, body = wait_for(lambda: (s := _readyz(gw.port))[0] == 503 and s, 120, "not ready")
        assert "scorer" in body and f"127.0.0.1:{port}" in body
        back = ChatDouble(port=port)  # the same server back on its port: the held video is scored, nothing lost
        try:
            wait_for(lambda: _readyz(gw.port)[0] == 200, 120, "ready again")
            got = read_topics(broker.bootstrap, [k.output_topic], lambda g: len(g[k.output_topic]) >= 2 * per_video)
            later = [ScoreEvent.model_validate_json(m.value) for m in got[k.output_topic]]
            v2 = [e for e in later if e.video_id == "v2"]
            assert len(v2) == per_video and all(e.error is None for e in v2)  # no infra row was ever published
            assert len(back.requests) == 4
        finally:
            back.close()
    finally:
        producer.close()
        gw.stop_event.set()
        thread.join(60)
