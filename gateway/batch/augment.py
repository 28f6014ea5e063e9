"""``lastmile augment``: a manifest's videos rendered under the augmentation's drawn conditions, to disk, for teams that
render ahead of training.

Per epoch and video: ``NNNNNN.eE.mp4`` (the video's row number and the epoch), a JSON sidecar beside it (the draw
key, the condition and its spec hash, the input's and the variant's sha256, the row's label, source and anchor), and
a row in ``manifest.jsonl``, a manifest of its own that a replay or a training run reads (ids and anchors carry the
epoch: ``VIDEO.eE``). A video that cannot be read or decoded is named in ``failures.jsonl``; it never stops the
others.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from detectors.manifest import ManifestRow, read_manifest
from gateway.batch.manifest_files import MissingFiles, unreadable
from gateway.core.sources import check_digest
from gateway.core.sources.errors import SourceError
from gateway.core.sources.files import local_path, read_file
from gateway.core.sources.stores import is_object_uri
from gateway.core.sources.urls import is_web_url
from transforms.augment import AugmentConfig, Augmenter
from transforms.errors import VideoError

MANIFEST = "manifest.jsonl"
FAILURES = "failures.jsonl"


@dataclass
class AugmentRun:
    """What a run wrote: the variants, and the (video, epoch) pairs that failed with their reasons."""

    written: list[Path] = field(default_factory=list)
    failed: list[dict] = field(default_factory=list)
    drawn: dict[str, int] = field(default_factory=dict)


def augment_manifest(
    manifest: Path,
    out: Path,
    config: AugmentConfig,
    seed: int = 0,
    epochs: int = 1,
    file_roots: Sequence[Path] = (),
    log: Callable[[str], None] = lambda _: None,
) -> AugmentRun:
    """Render every video of ``manifest`` once per epoch under its drawn condition into ``out``. Every row must name
    a readable local file under the manifest's folder or ``file_roots`` (:class:`MissingFiles` before any work)."""
    rows = read_manifest(manifest)
    roots = [manifest.resolve().parent, *(Path(r).resolve() for r in file_roots)]
    problems = [p for r in rows if (p := _unreadable(manifest, r, roots)) is not None]
    if problems:
        raise MissingFiles(manifest, len(rows), problems)
    out.mkdir(parents=True, exist_ok=True)
    augmenter, run = Augmenter(config, seed), AugmentRun()
    with (out / MANIFEST).open("w") as listing, (out / FAILURES).open("w") as failures:
        for epoch in range(epochs):
            for index, row in enumerate(rows):
                entry = _one(augmenter, manifest, roots, row, index, epoch, out)
                if "error" in entry:
                    run.failed.append(entry)
                    failures.write(json.dumps(entry) + "\n")
                    log(f"{row.video_id} (epoch {epoch}): {entry['error']}: {entry['reason']}")
                    continue
                run.written.append(out / entry["uri"])
                run.drawn[entry["condition"]] = run.drawn.get(entry["condition"], 0) + 1
                listing.write(json.dumps(entry) + "\n")
    return run


def _unreadable(manifest: Path, row: ManifestRow, roots: Sequence[Path]) -> str | None:
    """Why ``row``'s file cannot be read here: augment reads local files only (a URL or an object is downloaded
    by the replay, with its allow-lists), under ``roots``."""
    if is_web_url(row.uri) or is_object_uri(row.uri):
        return f"video {row.video_id}: {row.uri}: augment reads local files only (download it first)"
    return unreadable(manifest, row, roots)


def _one(
    augmenter: Augmenter, manifest: Path, roots: Sequence[Path], row: ManifestRow, index: int, epoch: int, out: Path
) -> dict:
    """One video's variant for one epoch, written with its sidecar; its manifest row, or its failure."""
    try:
        # the sources' own bounded read under the roots, and their sha256 check, before any decode
        data = read_file(local_path(row.uri, manifest.resolve().parent), roots, augmenter.limits.max_bytes)
        check_digest(data, row.sha256)
        variant, drawn = augmenter.variant(data, index, epoch)
    except (SourceError, VideoError) as exc:
        return _failure(row, epoch, type(exc).__name__, str(exc))
    stem = f"{index:06d}.e{epoch}"
    (out / f"{stem}.mp4").write_bytes(variant.data)
    entry = {
        "video_id": f"{row.video_id}.e{epoch}",
        "uri": f"{stem}.mp4",
        "label": row.label,
        "source": row.source,
        "anchor_id": f"{row.anchor_id}.e{epoch}",
        "sha256": variant.meta.sha256,
        "condition": drawn.condition.name,
    }
    sidecar = {
        **entry,
        "from": {"video_id": row.video_id, "uri": row.uri, "sha256": variant.meta.input_sha256},
        "draw": {"seed": drawn.seed, "index": drawn.index, "epoch": drawn.epoch},
        "variant": variant.meta.model_dump(mode="json"),
    }
    (out / f"{stem}.json").write_text(json.dumps(sidecar, indent=2))
    return entry


def _failure(row: ManifestRow, epoch: int, error: str, reason: str) -> dict:
    return {"video_id": row.video_id, "uri": row.uri, "epoch": epoch, "error": error, "reason": reason}
