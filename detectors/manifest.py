"""Manifests of labelled videos (JSONL: one video a line), shared by the corpus generator, the detector
build, the replay, ``lastmile send`` and the canaries. The format is documented in ``docs/replay.md``, with
``examples/manifest.jsonl`` as a working example.

``{video_id, uri, label: real|generated, source, anchor_id, category?, sha256?}``; a real anchor has
``source: "real"`` and ``anchor_id == video_id``; every generated video points at a real anchor of the manifest.
A row that breaks a rule raises :class:`ManifestError` naming the file, the line and the key.
"""

from __future__ import annotations

from difflib import get_close_matches
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from transforms.support.config_errors import ConfigError, describe


class ManifestError(ConfigError):
    """A manifest that cannot be read as written: the message names the file, the line and the key."""


Sha256 = Annotated[str, Field(pattern="^[0-9a-fA-F]{64}$"), AfterValidator(str.lower)]
"""A file's SHA-256 as 64 hex digits (``sha256sum``'s form; capitals read as the same digits)."""


class ManifestRow(BaseModel):
    """One video of a manifest (PROTOCOL.md's JSONL format)."""

    model_config = ConfigDict(extra="allow")
    video_id: str = Field(min_length=1)  # (an empty id or URI passed, and the URI became the manifest's folder)
    uri: str = Field(min_length=1)
    label: str = Field(pattern="^(real|generated)$")
    source: str = Field(min_length=1)
    anchor_id: str = Field(min_length=1)
    category: str | None = None
    sha256: Sha256 | None = None  # the file's: its replay and its sends check the bytes read against it


def read_manifest(path: Path) -> list[ManifestRow]:
    """Rows of a JSONL manifest; URIs stay as written (resolve relative ones against the manifest's folder)."""
    try:
        lines = Path(path).read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: cannot read: {exc}") from exc
    rows, seen = [], {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        row = _row(path, number, line)
        if row.video_id in seen:
            raise ManifestError(f"{path}:{number}: video_id: {row.video_id!r} is already on line {seen[row.video_id]}")
        seen[row.video_id] = number
        rows.append(row)
    if not rows:
        raise ManifestError(f"{path}: no rows (one JSON object a line: {ROW_KEYS})")
    anchors = {r.video_id for r in rows if r.label == "real"}
    for r in rows:
        if r.anchor_id not in anchors:
            raise ManifestError(
                f"{path}:{seen[r.video_id]}: anchor_id: {r.anchor_id!r} is not the video_id of a real video of this "
                "manifest (every generated video points at its real anchor)"
            )
    return rows


ROW_KEYS = "video_id, uri, label (real|generated), source, anchor_id; optional category, sha256, corpus"
READ_EXTRA = ("corpus",)  # keys beyond ManifestRow's fields that lastmile reads (the proxy corpus's mark)


def unread_keys_notice(path: Path, rows: list[ManifestRow]) -> str | None:
    """What a command says of keys no part of lastmile reads (kept as a user's own columns, but a misspelt
    ``sha256`` or ``category`` would pass unseen): each with the known key it is closest to, if any. None if none."""
    unread = sorted({key for r in rows for key in (r.model_extra or {}) if key not in READ_EXTRA})
    if not unread:
        return None
    known = [*ManifestRow.model_fields, *READ_EXTRA]
    said = [key + "".join(f" (did you mean {m!r}?)" for m in get_close_matches(key, known, n=1)) for key in unread]
    return f"{path}: keys that lastmile does not read, ignored: {', '.join(said)}"


def _row(path: Path, number: int, line: str) -> ManifestRow:
    try:
        row = ManifestRow.model_validate_json(line)
    except ValidationError as exc:
        if exc.errors()[0]["type"] == "json_invalid":
            raise ManifestError(f"{path}:{number}: not a JSON object ({exc.errors()[0]['msg']})") from exc
        raise ManifestError(describe(exc, f"{path}:{number}", ManifestRow)) from exc
    if row.label == "real" and (row.source != "real" or row.anchor_id != row.video_id):
        key = "source" if row.source != "real" else "anchor_id"
        raise ManifestError(
            f"{path}:{number}: {key}: a real video has source 'real' and anchor_id equal to its video_id "
            f"(got source {row.source!r}, anchor_id {row.anchor_id!r})"
        )
    if row.label == "generated" and row.source in ("real", ""):
        raise ManifestError(
            f"{path}:{number}: source: a generated video names the generator it comes from, not {row.source!r} "
            "(metrics are paired per source)"
        )
    return row
