"""The ``chat`` runtime: a multimodal LLM behind the OpenAI Chat Completions API, asked as RA-Bench asks.

Each variant's frames (by default 16, temporally ordered, short side 256) go as images in one user message after
the prompt's text, in order; nothing else about the video is sent. The reply is parsed
(:mod:`detectors.chat.replies`) into a :class:`Judgement`: the decision (the verdict, or rating >= the card's
threshold), the score (the rating; for a binary prompt, the verdict token's log-odds where the server gives
logprobs; else none), the aspects of a diagnostic prompt and the tokens used. A reply that cannot be read is an
:class:`~detectors.errors.UnparsedReply`; a server that cannot answer, :class:`~detectors.errors.RuntimeUnavailable`.

At start it asks the server's ``/models`` until ``startup_timeout_s`` and refuses a server that does not serve
the card's model. Requests in flight are bounded by ``chat.max_concurrency`` across the host's processes
(:mod:`detectors.chat.slots`); replies are cached (:mod:`detectors.chat.cache`) unless ``cache`` is None.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from detectors.card import ModelCard
from detectors.chat.cache import ReplyCache, cache_key
from detectors.chat.client import ChatClient, StructuredRefused, api_key, is_completion
from detectors.chat.prompts import PromptTemplate, load_template, request_sha256
from detectors.chat.replies import Reply, parse_reply, verdict_log_odds
from detectors.chat.slots import Slots
from detectors.errors import BadRequest, CardError, DetectorError, RuntimeUnavailable, UnparsedReply
from detectors.runtimes.base import RuntimeStats

log = logging.getLogger("lastmile.chat")
TOP_LOGPROBS = 5


@dataclass(frozen=True)
class Judgement:
    """One variant's answer from a chat detector."""

    decision: bool  # generated
    score: float | None  # the rating, or the verdict's log-odds; None: the reply gives none
    threshold: float | None  # what the score was decided at (rating prompts); None: the verdict decided
    aspects: dict[str, float] | None
    tokens_in: int | None
    tokens_out: int | None
    cached: bool


class ChatRuntime:
    name = "chat"

    def __init__(
        self,
        card: ModelCard,
        card_dir: Path | None = None,
        *,
        cache: ReplyCache | None = None,
        startup_timeout_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if card.chat is None:
            raise CardError(f"{card.name}: the chat runtime needs a card with a chat: section")
        self.card, self.spec = card, card.chat
        self.template: PromptTemplate = load_template(self.spec.prompt, card_dir)
        self.request_sha256 = request_sha256(card, self.template)
        self.endpoint = self.spec.endpoint
        self.client = ChatClient(self.spec, api_key(self.spec, card_dir), sleep, f"{card.name}: {self.endpoint}")
        self.slots = Slots(f"{card.name}|{self.endpoint}|{self.spec.model}", self.spec.max_concurrency)
        self.cache, self.structured = cache, self.spec.structured
        self.max_batch = self.spec.max_concurrency
        self.stats = RuntimeStats()
        self._check(startup_timeout_s)

    def _check(self, timeout_s: float) -> None:
        """Wait for the server to list its models; refuse one that does not list the card's."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                models = self.client.models()
                break
            except RuntimeUnavailable:  # (the key refused: said at once)
                raise
            except Exception as exc:  # urllib's, a reply that is no JSON: not answering yet
                if time.monotonic() > deadline:
                    why = self.client.scrub(f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}")
                    raise RuntimeUnavailable(
                        f"{self.card.name}: no Chat Completions server answers at {self.endpoint} ({why})"
                    ) from None
                time.sleep(0.25)
        if self.spec.model not in models:
            listed = ", ".join(map(str, models[:10])) or "no model"
            raise CardError(
                f"{self.card.name}: the server at {self.endpoint} does not serve {self.spec.model!r} "
                f"(it lists {listed})"
            )

    def score(self, frames: np.ndarray) -> np.ndarray:
        """The :class:`~detectors.runtimes.base.Runtime` interface, for callers that want scores alone: each
        variant's score (NaN where the reply gives none)."""
        out = []
        for j in self.judge(list(frames)):
            if isinstance(j, DetectorError):
                raise j
            out.append(np.nan if j.score is None else j.score)
        return np.asarray(out, dtype=np.float64)

    def judge(self, frames: Sequence[np.ndarray]) -> list[Judgement | DetectorError]:
        """One judgement (or this variant's error) per ``[T, H, W, 3]`` uint8 frames, in order; up to
        ``max_concurrency`` asked at once."""
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=max(1, min(self.max_batch, len(frames)))) as pool:
            out = list(pool.map(self._one, frames))
        self.stats.batches += 1
        self.stats.videos += len(frames)
        self.stats.seconds += time.perf_counter() - t0
        return out

    def _one(self, frames: np.ndarray) -> Judgement | DetectorError:
        try:
            return self._judge(frames)
        except DetectorError as exc:
            return exc

    def _judge(self, frames: np.ndarray) -> Judgement:
        """The cached reply to these frames, if one reads as a completion, else the server's: read, then kept
        (a reply that says no verdict is kept too: the same request would get it again)."""
        if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
            raise BadRequest(f"{self.card.name}: frames of shape {frames.shape} {frames.dtype}, not [T, H, W, 3] uint8")
        key = cache_key(self.request_sha256, np.ascontiguousarray(frames).tobytes())
        reply = self.cache.get(key) if self.cache is not None else None
        if reply is not None and is_completion(reply):
            return self._read(reply, cached=True)
        reply = self._ask(frames)
        try:
            judged = self._read(reply, cached=False)
        except UnparsedReply:
            self._keep(key, reply)
            raise
        self._keep(key, reply)
        return judged

    def _keep(self, key: str, reply: dict) -> None:
        if self.cache is not None:
            self.cache.put(key, reply)

    def _ask(self, frames: np.ndarray) -> dict:
        body = self.request(frames)
        with self.slots.hold(self.spec.timeout_s * (self.spec.retries + 1)):
            try:
                return self.client.complete(body)
            except StructuredRefused as exc:  # (requests already sent with a schema are refused alike)
                if self.structured:
                    log.warning("%s: the server takes no JSON schema, asking in plain text: %s", self.card.name, exc)
                self.structured = False
                body.pop("response_format", None)
                return self.client.complete(body)

    def request(self, frames: np.ndarray) -> dict:
        """The Chat Completions request for one variant's frames: the prompt's texts, then the frames in order as
        data URLs; the sampling settings; a JSON schema where asked; logprobs for a binary prompt."""
        system, user = self.template.texts(len(frames))
        content = [{"type": "text", "text": user}] + [
            {"type": "image_url", "image_url": {"url": self._data_url(f)}} for f in frames
        ]
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": content}]
        body: dict = {
            "model": self.spec.model,
            "messages": messages,
            "max_tokens": self.spec.max_tokens,
            "temperature": self.spec.temperature,
            "stream": False,
        }
        if self.spec.seed is not None:
            body["seed"] = self.spec.seed
        if self.structured:
            schema = {"name": f"lastmile_{self.template.format}", "schema": self.template.schema(), "strict": True}
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
        if self.template.format == "binary" and self.spec.logprobs:
            body |= {"logprobs": True, "top_logprobs": TOP_LOGPROBS}
        return body

    def _data_url(self, frame: np.ndarray) -> str:
        from PIL import Image

        buf = io.BytesIO()
        image = Image.fromarray(np.ascontiguousarray(frame), "RGB")
        if self.spec.image_format == "png":
            image.save(buf, "PNG")
        else:
            image.save(buf, "JPEG", quality=self.spec.jpeg_quality)
        return f"data:image/{self.spec.image_format};base64," + base64.b64encode(buf.getvalue()).decode()

    def _read(self, reply: dict, cached: bool) -> Judgement:
        """A completion read: its judgement, or :class:`UnparsedReply` (also for a completion of a shape no rule
        reads: never an exception out of the runtime)."""
        try:
            return self._reading(reply, cached)
        except UnparsedReply:
            raise
        except Exception as exc:  # a shape the rules do not foresee: no verdict, said as such
            raise UnparsedReply(f"a reply of an unexpected shape ({type(exc).__name__}: {str(exc)[:80]})") from None

    def _reading(self, reply: dict, cached: bool) -> Judgement:
        usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
        tokens_in, tokens_out = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
        choice = reply["choices"][0] if isinstance(reply["choices"][0], dict) else {}
        message = choice.get("message") if isinstance(choice.get("message"), dict) else {}
        text = message.get("content")
        try:
            parsed: Reply = parse_reply(
                text if isinstance(text, str) else None,
                self.template,
                refusal=message.get("refusal") if isinstance(message.get("refusal"), str) else None,
                finish_reason=choice.get("finish_reason"),
            )
        except UnparsedReply as exc:
            raise UnparsedReply(str(exc), tokens_in, tokens_out, cached) from None
        threshold = self.card.threshold.value if self.template.format == "rating" else None
        if parsed.rating is not None:
            score, decision = parsed.rating, parsed.rating >= self.card.threshold.value
        else:
            logprobs = choice.get("logprobs") if self.spec.logprobs else None
            score = verdict_log_odds(logprobs, bool(parsed.verdict), parsed.verdict_at, text)
            decision = bool(parsed.verdict)
        return Judgement(decision, score, threshold, parsed.aspects, tokens_in, tokens_out, cached)


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def aspects_text(aspects: dict[str, float] | None) -> str | None:
    """A diagnostic's aspects as a row holds them: a JSON object, in the template's order."""
    return None if aspects is None else json.dumps(aspects, separators=(",", ":"))
