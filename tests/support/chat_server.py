"""A protocol double of an OpenAI-compatible Chat Completions server, over real HTTP on a real socket.

It answers ``GET /v1/models`` and ``POST /v1/chat/completions`` with the documented request and reply shapes
(non-streaming; ``usage``; ``logprobs.content`` with ``top_logprobs``; ``response_format`` of type
``json_schema``), and its answers follow the pictures: it decodes the frames it is sent and takes their mean
brightness ``b`` (0-255). A rating is ``round(b / 2.55)``; a verdict is generated when ``b >= cut`` (127.5), with
p(generated) = sigmoid((b - cut) / 20) as the verdict token's probability; the five aspects of a diagnostic are
the mean of the red, green and blue channels, of the first half of the frames and of the second half (a grey still
video collapses). ``script`` queues what the next requests get instead: an HTTP status (with headers), a slow
reply, a body that is not JSON, or a reply text of the test's own. Every request is recorded with its headers.

``python -m tests.support.chat_server --port 8000 --model M`` serves it, e.g. for examples/chat/card.yaml.
"""

from __future__ import annotations

import base64
import http.server
import io
import json
import math
import threading
import time
from dataclasses import dataclass, field

import numpy as np

ASPECTS = ("appearance", "lighting", "temporal", "motion", "physics")


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict


@dataclass
class ChatDouble:
    model: str = "double-vl"
    port: int = 0
    cut: float = 127.5  # the brightness at and above which its verdict is generated
    key: str | None = None  # when set, requests without "Authorization: Bearer KEY" get 401
    schema: bool = True  # takes response_format json_schema; else 400 naming it
    logprobs: bool = True  # answers logprobs when asked
    script: list[tuple] = field(
        default_factory=list
    )  # ("status", code, headers) | ("slow", s) | ("malformed",) | ("text", s)
    seen: list[Seen] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        double = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                if double.key is not None and self.headers.get("Authorization") != f"Bearer {double.key}":
                    return self._refuse()
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": double.model, "object": "model"}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                body = json.loads(raw)
                with double.lock:
                    double.seen.append(Seen(self.path, dict(self.headers.items()), body))
                    double.in_flight += 1
                    double.most_in_flight = max(double.most_in_flight, double.in_flight)
                    action = double.script.pop(0) if double.script else None
                try:
                    self._answer(body, action)
                finally:
                    with double.lock:
                        double.in_flight -= 1

            def _answer(self, body, action):
                if double.key is not None and self.headers.get("Authorization") != f"Bearer {double.key}":
                    return self._refuse()
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                if action and action[0] == "status":
                    return self._send(
                        action[1], {"error": {"message": "scripted"}}, action[2] if len(action) > 2 else {}
                    )
                if action and action[0] == "malformed":
                    return self._raw(200, b'{"choices": [{"message": ')
                if action and action[0] == "raw":
                    return self._send(200, action[1])
                if action and action[0] == "slow":
                    time.sleep(action[1])
                if body.get("response_format") and not double.schema:
                    return self._send(400, {"error": {"message": "response_format json_schema is not supported"}})
                text = action[1] if action and action[0] == "text" else None
                self._send(200, double.complete(body, text))

            def _refuse(self):
                """A 401 that echoes what it was sent, as some gateways do (the client must not repeat it)."""
                said = self.headers.get("Authorization")
                self._send(401, {"error": {"message": f"invalid api key: {said}"}})

            def _send(self, code, obj, headers=None):
                self._raw(code, json.dumps(obj).encode(), headers)

            def _raw(self, code, data, headers=None):
                self.send_response(code)
                for k, v in {"Content-Type": "application/json", **(headers or {})}.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> ChatDouble:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def requests(self) -> list[Seen]:
        return [s for s in self.seen if s.path == "/v1/chat/completions"]

    def complete(self, body: dict, text: str | None = None) -> dict:
        """The completion this double gives ``body`` (``text``: the reply's content instead of its own)."""
        frames = frames_of(body)
        b = float(frames.mean())
        p = 1 / (1 + math.exp(-(b - self.cut) / 20))
        verdict = "generated" if b >= self.cut else "real"
        schema = (body.get("response_format") or {}).get("json_schema", {}).get("schema", {})
        props = list(schema.get("properties", {})) or _asked(body)
        if text is None:
            if "rating" in props:
                answer = {"rating": round(b / 2.55)}
            elif len(props) > 1:
                half = len(frames) // 2
                values = [frames[..., 0].mean(), frames[..., 1].mean(), frames[..., 2].mean()]
                values += [frames[:half].mean(), frames[half:].mean()]
                answer = {a: round(v / 2.55) for a, v in zip(ASPECTS, values, strict=True)} | {"verdict": verdict}
            else:
                answer = {"verdict": verdict}
            text = json.dumps(answer) if schema else "\n".join(f"{k.capitalize()}: {v}" for k, v in answer.items())
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        if body.get("logprobs") and self.logprobs and verdict in text:
            choice["logprobs"] = {"content": _logprobs(text, verdict, p)}
        usage = {"prompt_tokens": 12 + 85 * len(frames), "completion_tokens": max(1, len(text) // 4)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return {"id": "chatcmpl-double", "object": "chat.completion", "created": int(time.time()),
                "model": body.get("model"), "choices": [choice], "usage": usage}  # fmt: skip


def _asked(body: dict) -> list[str]:
    """Without a schema, what the prompt's text asks for."""
    text = json.dumps(body["messages"]).lower()
    if '\\"rating\\"' in text:
        return ["rating"]
    return [*ASPECTS, "verdict"] if "aspects" in text else ["verdict"]


def _logprobs(text: str, verdict: str, p: float) -> list[dict]:
    """Tokens of ``text`` split at the verdict word, its entry carrying both verdicts as alternatives."""
    i = text.index(verdict)
    chosen, other = (p, 1 - p) if verdict == "generated" else (1 - p, p)
    alt = "real" if verdict == "generated" else "generated"
    lp = lambda q: math.log(max(q, 1e-12))  # noqa: E731
    return [
        {"token": text[:i], "logprob": -0.01, "top_logprobs": [{"token": text[:i], "logprob": -0.01}]},
        {"token": verdict, "logprob": lp(chosen),
         "top_logprobs": [{"token": verdict, "logprob": lp(chosen)}, {"token": alt, "logprob": lp(other)}]},
        {"token": text[i + len(verdict):], "logprob": -0.01, "top_logprobs": []},
    ]  # fmt: skip


def frames_of(body: dict) -> np.ndarray:
    """The images of a request's user message, decoded, in order: ``[T, H, W, 3]`` uint8."""
    from PIL import Image

    images = []
    for message in body["messages"]:
        if isinstance(message.get("content"), list):
            for part in message["content"]:
                if part.get("type") == "image_url":
                    data = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
                    images.append(np.asarray(Image.open(io.BytesIO(data)).convert("RGB")))
    return np.stack(images)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model", default="double-vl")
    args = parser.parse_args()
    double = ChatDouble(model=args.model, port=args.port)
    print(f"serving {args.model} at {double.url}", flush=True)
    try:
        double.thread.join()
    except KeyboardInterrupt:
        double.close()
