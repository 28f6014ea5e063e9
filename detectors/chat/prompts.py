"""Prompt templates: the three presets of RA-Bench's zero-shot protocol (Binary, Rating, Diagnostic), a user's own
template file, the JSON schema each format's reply is asked to follow, and the hash that names a chat request.

A template is YAML: ``format`` (binary, rating or diagnostic), ``system`` and ``user`` texts, and for diagnostic
the ``aspects`` (name: what it looks at). In the texts, ``{frames}`` becomes the number of frames sent,
``{aspects}`` the aspects with their descriptions and ``{answer}`` the shape of the reply asked for; nothing else
is substituted, and nothing about the video (its name, id, source, label or URL) can be.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from detectors.errors import CardError
from transforms.support.config_errors import describe, one_line

if TYPE_CHECKING:
    from detectors.card import ModelCard

PRESETS = ("binary", "rating", "diagnostic")
PRESET_DIR = Path(__file__).resolve().parent / "presets"
MAX_TEMPLATE_BYTES = 64 * 1024
Format = Literal["binary", "rating", "diagnostic"]


class PromptTemplate(BaseModel):
    """One template as written; ``path`` is the file it was read from (None: not a file of the user's)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    format: Format
    system: str = ""
    user: str = Field(min_length=1)
    aspects: dict[str, str] | None = Field(None, description="diagnostic: each aspect's name and what it looks at")
    path: Path | None = Field(None, exclude=True)

    @model_validator(mode="after")
    def _aspects(self) -> PromptTemplate:
        if (self.format == "diagnostic") != bool(self.aspects):
            raise ValueError("aspects: a diagnostic template names its aspects, and only a diagnostic one")
        if self.aspects and "verdict" in {a.lower() for a in self.aspects}:
            raise ValueError("aspects: 'verdict' is the reply's verdict, not an aspect")
        return self

    @property
    def sha256(self) -> str:
        """Of the template's content (not of its file's comments or layout)."""
        return hashlib.sha256(json.dumps(self.model_dump(), sort_keys=True).encode()).hexdigest()

    def answer(self) -> str:
        """The shape of the reply this format asks for, as the prompt's ``{answer}`` shows it."""
        if self.format == "binary":
            return '{"verdict": "generated"} or {"verdict": "real"}'
        if self.format == "rating":
            return '{"rating": N} with N from 0 to 100'
        shape = ", ".join(f'"{a}": N' for a in self.aspects or {})
        return "{" + shape + ', "verdict": "generated" or "real"}'

    def texts(self, frames: int) -> tuple[str, str]:
        """(system, user) with the placeholders filled."""
        aspects = "; ".join(f"{name} ({what})" for name, what in (self.aspects or {}).items())
        fill = {"{frames}": str(frames), "{aspects}": aspects, "{answer}": self.answer()}
        out = []
        for text in (self.system, self.user):
            for key, value in fill.items():
                text = text.replace(key, value)
            out.append(text)
        return out[0], out[1]

    def schema(self) -> dict:
        """The JSON schema of the reply (a ``response_format`` of type ``json_schema``)."""
        verdict = {"type": "string", "enum": ["generated", "real"]}
        rating = {"type": "integer", "minimum": 0, "maximum": 100}
        if self.format == "binary":
            props = {"verdict": verdict}
        elif self.format == "rating":
            props = {"rating": rating}
        else:
            props = {**dict.fromkeys(self.aspects or {}, rating), "verdict": verdict}
        return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def load_template(prompt: str, card_dir: Path | None = None) -> PromptTemplate:
    """A preset by name, else the template file ``prompt`` names, in the card's folder (``card_dir``) and never
    outside it. Raises :class:`CardError` naming what is wrong."""
    if prompt in PRESETS:
        return _read(PRESET_DIR / f"{prompt}.yaml", preset=True)
    if card_dir is None:
        raise CardError(f"chat.prompt {prompt!r}: not a preset ({', '.join(PRESETS)}) and no card folder to read it in")
    base = card_dir.resolve()
    path = (base / prompt).resolve()
    if not path.is_relative_to(base):
        raise CardError(f"chat.prompt {prompt!r}: a template file sits in the card's folder ({base}), not outside it")
    return _read(path, preset=False)


def _read(path: Path, preset: bool) -> PromptTemplate:
    try:
        with path.open("rb") as f:
            data = f.read(MAX_TEMPLATE_BYTES + 1)
        if len(data) > MAX_TEMPLATE_BYTES:
            raise CardError(f"prompt template {path}: larger than {MAX_TEMPLATE_BYTES} bytes")
        raw = yaml.safe_load(data.decode())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise CardError(f"cannot read prompt template {path}: {one_line(exc)}") from exc
    try:
        return PromptTemplate.model_validate(
            {**(raw if isinstance(raw, dict) else {}), "path": None if preset else path}
        )
    except ValidationError as exc:
        raise CardError(describe(exc, f"prompt template {path}", PromptTemplate)) from exc


def preset_text(name: str) -> str:
    """A preset's file as shipped (``lastmile detectors prompt NAME`` prints it, to copy and change)."""
    if name not in PRESETS:
        raise CardError(f"no preset {name!r}: the presets are {', '.join(PRESETS)}")
    return (PRESET_DIR / f"{name}.yaml").read_text()


def request_sha256(card: ModelCard, template: PromptTemplate) -> str:
    """What names a chat detector's requests, as a graph's sha256 names a tensor model's: the model, the template's
    content (``template``, the one its ``chat.prompt`` names), the sampling and every setting that changes a reply
    (not the endpoint, the key or the retries)."""
    spec = card.chat
    if spec is None:
        raise CardError(f"{card.name}: not a chat detector")
    fields = spec.model_dump(
        include={"model", "max_tokens", "temperature", "seed", "structured", "logprobs", "image_format", "jpeg_quality"}
    )
    named = {**fields, "template": template.sha256, "sampling": card.sampling.model_dump(mode="json")}
    return hashlib.sha256(json.dumps(named, sort_keys=True).encode()).hexdigest()
