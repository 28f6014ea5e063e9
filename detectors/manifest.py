"""Manifests of labelled videos (PROTOCOL.md's JSONL: one video a line), shared by the corpus generator, the
detector build and the replay.

``{video_id, uri, label: real|generated, source, anchor_id, category?, sha256?}``; a real anchor has
``source: "real"`` and ``anchor_id == video_id``; every generated video points at a real anchor.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class ManifestRow(BaseModel):
    """One video of a manifest (PROTOCOL.md's JSONL format)."""

    model_config = ConfigDict(extra="allow")
    video_id: str
    uri: str
    label: str = Field(pattern="^(real|generated)$")
    source: str
    anchor_id: str
    category: str | None = None
    sha256: str | None = None


def read_manifest(path: Path) -> list[ManifestRow]:
    """Rows of a JSONL manifest; URIs stay as written (resolve relative ones against the manifest's folder)."""
    rows = [ManifestRow.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]
    ids = [r.video_id for r in rows]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: duplicate video_id values")
    anchors = {r.video_id for r in rows if r.label == "real"}
    orphans = sorted({r.anchor_id for r in rows if r.label == "generated"} - anchors)
    if orphans:
        raise ValueError(f"{path}: generated videos point at missing real anchors {orphans[:5]}")
    return rows
