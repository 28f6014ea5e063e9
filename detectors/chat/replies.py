"""A chat reply read deterministically: the verdict, the rating, the aspects, or the reason it cannot be read.

The rules, in order (docs/detectors.md repeats them):

1. A refusal (the API's ``refusal`` field) or a reply with no text is unparsed.
2. Code fences are dropped; the first JSON object in the text is read, its keys without regard to case.
   ``verdict`` (or ``answer``, ``label``, ``prediction``, ``classification``) is a verdict word; ``rating`` (or
   ``score``, ``likelihood``) a number from 0 to 100 (a number or a numeric string, a trailing ``%`` or ``/100``
   allowed); each aspect of a diagnostic template a number from 0 to 100, at the top level or under ``aspects``.
3. What the JSON does not hold is looked for in the text: a labelled line (``Verdict: real``, ``Rating: 73``,
   ``motion: 40``); for a verdict, else the verdict words of one class alone (a negation just before a word,
   ``not real``, names the other class); for a rating, else a reply that is a number alone.
4. Verdict words: generated, ai-generated, ai generated, fake, synthetic, artificial -> generated (and ``ai`` as a
   verdict's whole value); real, authentic, genuine, natural, camera -> real. Any other value, both classes at
   once, a missing field, a number outside 0-100, one on another scale (``8/10``) or one between 0 and 1 with a
   fraction (a probability, not a rating of 0-100) is unparsed, with the reason (a reply cut off at
   ``max_tokens`` says so). Nothing is guessed: an unparsed reply is no verdict.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from detectors.chat.prompts import PromptTemplate
from detectors.errors import UnparsedReply

GENERATED_WORDS = ("generated", "ai-generated", "ai generated", "ai", "fake", "synthetic", "artificial")
REAL_WORDS = ("real", "authentic", "genuine", "natural", "camera")
PROSE_WORDS = tuple(w for w in GENERATED_WORDS + REAL_WORDS if w != "ai")  # ("as an AI model, ..." is no verdict)
VERDICT_KEYS = ("verdict", "answer", "label", "prediction", "classification")
RATING_KEYS = ("rating", "score", "likelihood")
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*")
_NUMBER = r"(-?\d+(?:\.\d+)?)\s*(%|/\s*\d+)?"
_NEGATION = re.compile(r"\b(?:not|isn't|isnt|is not|never|no)\s*$")
_WORD = re.compile(r"\b(" + "|".join(re.escape(w) for w in sorted(PROSE_WORDS, key=len, reverse=True)) + r")\b")


@dataclass(frozen=True)
class Reply:
    """What a reply says: the verdict (True: generated), the rating (0-100) and the aspects, each None where
    the format does not ask for it."""

    verdict: bool | None = None
    rating: float | None = None
    aspects: dict[str, float] | None = None
    verdict_at: int | None = None  # where in the reply's text the verdict's word begins

    @property
    def collapsed(self) -> bool | None:
        """Every aspect given the same value (RA-Bench's diagnostic collapse); None without aspects."""
        return None if not self.aspects else len(set(self.aspects.values())) == 1


def parse_reply(
    text: str | None, template: PromptTemplate, refusal: str | None = None, finish_reason: str | None = None
) -> Reply:
    """The reply ``text`` read by the rules above, for ``template``'s format; :class:`UnparsedReply` with the
    reason where it cannot be read."""
    if refusal:
        raise UnparsedReply(f"refusal: {refusal.strip()[:120]}")
    if text is None or not text.strip():
        raise UnparsedReply("empty reply" + (" (cut off at max_tokens)" if finish_reason == "length" else ""))
    try:
        return _read(_FENCE.sub(lambda m: " " * len(m.group()), text), template)  # (offsets kept: see verdict_at)
    except UnparsedReply as exc:
        if finish_reason == "length":
            raise UnparsedReply(f"{exc} (cut off at max_tokens)") from None
        raise


def _read(text: str, template: PromptTemplate) -> Reply:
    obj, start = _first_object(text)
    verdict = rating = at = None
    aspects: dict[str, float] | None = None
    if template.format in ("binary", "diagnostic"):
        verdict, at = _verdict(obj, text, start)
    if template.format == "rating":
        rating = _rating(obj, text)
    if template.format == "diagnostic":
        aspects = {name: _aspect(obj, text, name) for name in template.aspects or {}}
    return Reply(verdict, rating, aspects, at)


def _first_object(text: str) -> tuple[dict[str, object], int]:
    """The first JSON object in ``text`` (keys lower-cased, an ``aspects`` object merged up) and where it begins,
    or ({}, -1)."""
    decoder = json.JSONDecoder()
    for start in (m.start() for m in re.finditer(r"\{", text)):
        try:
            obj, _ = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):  # (JSONDecodeError, and an integer too long to convert)
            continue
        if isinstance(obj, dict):
            flat = {str(k).strip().lower(): v for k, v in obj.items()}
            nested = flat.get("aspects")
            if isinstance(nested, dict):
                flat |= {str(k).strip().lower(): v for k, v in nested.items() if str(k).strip().lower() not in flat}
            return flat, start
    return {}, -1


def verdict_of(word: str) -> bool | None:
    """True for a generated word, False for a real one, None for anything else."""
    w = re.sub(r"[^a-z -]", "", word.strip().lower()).strip(" -")
    if w in GENERATED_WORDS:
        return True
    if w in REAL_WORDS:
        return False
    return None


def _verdict(obj: dict[str, object], text: str, start: int) -> tuple[bool, int | None]:
    """The verdict, and where its word begins in ``text`` (None where that cannot be told)."""
    for key in VERDICT_KEYS:
        if key in obj:
            value = obj[key]
            said = verdict_of(value) if isinstance(value, str) else None
            if said is None:
                raise UnparsedReply(f"verdict {str(value)[:40]!r} is neither generated nor real")
            m = re.compile(r'"' + key + r'"\s*:\s*"', re.I).search(text, start)
            return said, m.end() if m else None
    labelled = r"\b(?:verdict|answer|label|prediction|classification)\s*[:=-]\s*\**\s*([A-Za-z -]+)"
    if (m := re.search(labelled, text, re.I)) and (said := _leading_verdict(m.group(1))) is not None:
        return said, m.start(1)
    found: dict[bool, int] = {}
    lower = text.lower()
    for m in _WORD.finditer(lower):
        negated = _NEGATION.search(lower[: m.start()]) is not None
        found.setdefault(verdict_of(m.group(1)) != negated, m.start(1))
    if len(found) == 1:
        ((said, at),) = found.items()
        return said, at
    raise UnparsedReply("names both generated and real" if found else "no verdict in the reply")


def _leading_verdict(phrase: str) -> bool | None:
    """The verdict the first words of ``phrase`` name (``AI-generated video`` -> generated)."""
    words = phrase.strip().lower().split()
    for n in (2, 1):
        if len(words) >= n and (said := verdict_of(" ".join(words[:n]))) is not None:
            return said
    return None


def _number(value: object, what: str) -> float:
    """A number of 0-100 as the reply gives it: a JSON number, or a numeric string (``73``, ``73%``, ``73/100``)."""
    if isinstance(value, bool):
        raise UnparsedReply(f"{what} {value!r} is not a number")
    if isinstance(value, int | float):
        x, scale = value, None
    elif isinstance(value, str) and (m := re.fullmatch(r"\s*" + _NUMBER + r"\s*", value)):
        x, scale = m.group(1), m.group(2)
    else:
        raise UnparsedReply(f"{what} {str(value)[:40]!r} is not a number")
    try:
        x = float(x)
    except OverflowError:
        raise UnparsedReply(f"{what} is out of range (0-100)") from None
    if scale and scale.startswith("/") and scale[1:].strip() != "100":
        raise UnparsedReply(f"{what} {x:g}{scale.replace(' ', '')} is on another scale than 0-100")
    if not math.isfinite(x) or not 0 <= x <= 100:
        raise UnparsedReply(f"{what} {x:g} is out of range (0-100)")
    if 0 < x < 1 and not x.is_integer():
        raise UnparsedReply(f"{what} {x:g} looks like a probability, not a number of 0-100")
    return x


def _labelled(text: str, names: tuple[str, ...]) -> str | None:
    """The number (with its % or /scale) after ``name:`` for the first of ``names`` labelled in ``text``."""
    for name in names:
        m = re.search(r"\b" + re.escape(name) + r"\b\**\s*[:=]\s*\**\s*" + _NUMBER, text, re.I)
        if m:
            return m.group(1) + (m.group(2) or "")
    return None


def _rating(obj: dict[str, object], text: str) -> float:
    for key in RATING_KEYS:
        if key in obj:
            return _number(obj[key], "rating")
    if (found := _labelled(text, RATING_KEYS)) is not None:
        return _number(found, "rating")
    if m := re.fullmatch(r"\s*" + _NUMBER + r"\s*\.?\s*", text):
        return _number(m.group(1) + (m.group(2) or ""), "rating")
    raise UnparsedReply("no rating in the reply")


def _aspect(obj: dict[str, object], text: str, name: str) -> float:
    if name.lower() in obj:
        return _number(obj[name.lower()], f"aspect {name}")
    if (found := _labelled(text, (name,))) is not None:
        return _number(found, f"aspect {name}")
    raise UnparsedReply(f"no score for aspect {name}")


def verdict_log_odds(logprobs: object, verdict: bool, at: int | None, text: str | None) -> float | None:
    """The log-odds of the generated verdict, ln p(generated) - ln p(real), at the token of the reply ``text``
    where the verdict's word begins (``at``: :attr:`Reply.verdict_at`), read from the OpenAI ``logprobs.content``
    list with its ``top_logprobs``. The probability of each class sums the alternatives there that begin one of its
    words; a class absent from them gets the mass they leave (at least 1e-9). None where the tokens do not spell
    ``text``, or the token there does not begin a word of the verdict's class."""
    if at is None or text is None or not isinstance(logprobs, dict) or not isinstance(logprobs.get("content"), list):
        return None
    entries = [e for e in logprobs["content"] if isinstance(e, dict) and isinstance(e.get("token"), str)]
    if len(entries) != len(logprobs["content"]) or "".join(e["token"] for e in entries) != text:
        return None
    words, others = (GENERATED_WORDS, REAL_WORDS) if verdict else (REAL_WORDS, GENERATED_WORDS)
    end = 0
    for entry in entries:
        end += len(entry["token"])
        if end > at:
            break
    token = entry["token"]
    if _begins(token, words) is None or _begins(token, others) is not None:
        return None
    alternatives = [a for a in entry.get("top_logprobs") or [] if isinstance(a, dict)]
    if not any(a.get("token") == token for a in alternatives):
        alternatives.append(entry)
    p = {True: 0.0, False: 0.0}
    total = 0.0
    for a in alternatives:
        lp = a.get("logprob")
        if not isinstance(lp, int | float) or not math.isfinite(lp):
            continue
        total += math.exp(lp)
        gen, real = _begins(a.get("token"), GENERATED_WORDS), _begins(a.get("token"), REAL_WORDS)
        if (gen is None) != (real is None):  # a token that begins words of both classes ("a") counts for neither
            p[gen is not None] += math.exp(lp)
    rest = max(1.0 - total, 1e-9)
    return math.log(p[True] or rest) - math.log(p[False] or rest)


def _begins(token: object, words: tuple[str, ...]) -> str | None:
    """The word of ``words`` that ``token`` (stripped of spaces, quotes and case) begins, if any."""
    if not isinstance(token, str):
        return None
    t = token.strip().strip("\"'`*").lower()
    if not t or not t.replace("-", "").isalpha():
        return None
    return next((w for w in words if w.startswith(t)), None)
