"""One exchange with a Chat Completions server: the request as sent, the reply as read, the retries between.

A 429 or a 5xx is retried after the wait its ``Retry-After`` asks (seconds or an HTTP date, at most
:data:`RETRY_AFTER_MAX_S`), else after the project's capped exponential backoff; so is a server that does not
answer within ``timeout_s``, refuses the connection or answers with a body that is not a completion. When the tries
run out the server is :class:`RuntimeUnavailable` (retry later, never a verdict). A 400 or 422 is this request's fault
(:class:`BadRequest`), except one that refuses the ``response_format`` (:class:`StructuredRefused`: the caller asks
again in plain text); a 401, 403 or 404 is the configuration's (unavailable, saying which). The API key goes in
the ``Authorization`` header and nowhere else: no error message, row or log line holds it.
"""

from __future__ import annotations

import email.utils
import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from detectors.card import ChatSpec
from detectors.errors import BadRequest, CardError, RuntimeUnavailable
from detectors.http import ReplyTooLarge, read_bounded
from transforms.support.backoff import Backoff

RETRY_AFTER_MAX_S = 60.0  # the longest wait a Retry-After may ask
BACKOFF = (0.5, 8.0)  # first and longest wait between tries without a Retry-After
RETRIED = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_STRUCTURED_WORDS = ("response_format", "json_schema", "guided", "grammar", "structured")


class StructuredRefused(BadRequest):
    """The server refused the ``response_format`` (it takes no JSON schema): ask again in plain text."""


class Secret:
    """An API key that never prints: ``str()``, ``repr()`` and formatting give ``***``."""

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


def api_key(spec: ChatSpec, card_dir: Path | None = None) -> Secret | None:
    """The key the card names: ``api_key_file`` (relative to the card's folder), or ``api_key_env``; None when it
    names neither. :class:`CardError` (naming the file or variable, never its content) where it cannot be read."""
    if spec.api_key_file:
        path = Path(spec.api_key_file).expanduser()
        path = path if path.is_absolute() or card_dir is None else card_dir / path
        try:
            with path.open("rb") as f:
                value = f.read(4097).decode().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise CardError(f"chat.api_key_file {path}: cannot be read ({type(exc).__name__})") from None
        return _checked(value, f"chat.api_key_file {path}")
    if spec.api_key_env:
        value = os.environ.get(spec.api_key_env, "").strip()
        if not value:
            raise CardError(f"chat.api_key_env: the environment variable {spec.api_key_env} is not set")
        return _checked(value, f"chat.api_key_env {spec.api_key_env}")
    return None


def _checked(value: str, where: str) -> Secret:
    """A key fit for a header: printable, no whitespace, at most 4096 characters (else the HTTP library's own
    error would quote it)."""
    if not value or len(value) > 4096 or not value.isprintable() or any(c.isspace() for c in value):
        raise CardError(f"{where}: not one key of at most 4096 printable characters without spaces")
    return Secret(value)


def retry_after(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks (an integer, or an HTTP date), capped; None if absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), RETRY_AFTER_MAX_S)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return min(max(when.timestamp() - time.time(), 0.0), RETRY_AFTER_MAX_S)


class ChatClient:
    """``GET {endpoint}/models`` and ``POST {endpoint}/chat/completions`` with the retry rules above."""

    def __init__(
        self, spec: ChatSpec, key: Secret | None = None, sleep: Callable[[float], None] = time.sleep, who: str = ""
    ) -> None:
        self.base, self.spec, self.key, self.sleep = spec.endpoint.rstrip("/"), spec, key, sleep
        self.who = who or f"{spec.model} at {self.base}"

    def _request(self, path: str, body: dict | None) -> urllib.request.Request:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.key is not None:
            headers["Authorization"] = f"Bearer {self.key.reveal()}"
        data = json.dumps(body).encode() if body is not None else None
        return urllib.request.Request(self.base + path, data=data, headers=headers)

    def scrub(self, text: str) -> str:
        """``text`` without the key (a server may echo what it was sent)."""
        return text.replace(self.key.reveal(), "***") if self.key is not None else text

    def models(self) -> list[str]:
        """The model ids the server lists (one try: the caller waits for a server that is starting).
        :class:`RuntimeUnavailable` at once, saying so, where the server refuses the key."""
        try:
            reply = json.loads(read_bounded(self._request("/models", None), self.spec.timeout_s))
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                detail = self.scrub(_detail(exc))
                raise RuntimeUnavailable(f"{self.who}: the API key was refused ({exc.code}): {detail}") from None
            raise
        return [m.get("id") for m in reply.get("data", []) if isinstance(m, dict)]

    def complete(self, body: dict) -> dict:
        """The completion for ``body``, retried as the module says; no error it raises holds the key."""
        try:
            return self._complete(body)
        except (BadRequest, RuntimeUnavailable) as exc:
            scrubbed = self.scrub(str(exc))
            if scrubbed == str(exc):
                raise
            raise type(exc)(scrubbed) from None

    def _complete(self, body: dict) -> dict:
        backoff, last = Backoff(*BACKOFF), "no try"
        for attempt in range(self.spec.retries + 1):
            wait = None
            try:
                reply = json.loads(read_bounded(self._request("/chat/completions", body), self.spec.timeout_s))
                if not is_completion(reply):
                    raise ValueError("a reply without a choice holding a message")
                return reply
            except urllib.error.HTTPError as exc:
                detail = _detail(exc)
                if exc.code in (400, 422):
                    refused = body.get("response_format") and any(w in detail.lower() for w in _STRUCTURED_WORDS)
                    error = StructuredRefused if refused else BadRequest
                    raise error(f"{self.who}: the server rejected the request ({exc.code}): {detail}") from None
                if exc.code in (401, 403, 404):
                    what = "model not found" if exc.code == 404 else "the API key was refused"
                    raise RuntimeUnavailable(f"{self.who}: {what} ({exc.code}): {detail}") from None
                if exc.code not in RETRIED:
                    raise RuntimeUnavailable(f"{self.who}: answered {exc.code}: {detail}") from None
                wait, last = retry_after(exc.headers.get("Retry-After")), f"{exc.code} {detail}"
            except (urllib.error.URLError, TimeoutError, ConnectionError, ReplyTooLarge) as exc:
                last = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
            except (ValueError, UnicodeDecodeError) as exc:  # not JSON, or not a completion
                last = f"a malformed reply ({str(exc)[:80]})"
            if attempt < self.spec.retries:
                self.sleep(wait if wait is not None else backoff.delay(attempt + 1))
        raise RuntimeUnavailable(f"{self.who} did not answer after {self.spec.retries + 1} attempts: {last}")


def is_completion(reply: object) -> bool:
    """Whether ``reply`` has the shape of a completion: a first choice holding a message."""
    if not isinstance(reply, dict) or not isinstance(reply.get("choices"), list) or not reply["choices"]:
        return False
    choice = reply["choices"][0]
    return isinstance(choice, dict) and isinstance(choice.get("message"), dict)


def _detail(exc: urllib.error.HTTPError) -> str:
    """The first 300 characters of an error reply's body, on one line."""
    try:
        text = exc.read(300).decode(errors="replace")
    except OSError:
        text = ""
    return " ".join(text.split()) or exc.reason or ""
