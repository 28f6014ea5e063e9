"""The files a replay's manifest names, checked before any video is scored.

A manifest naming a file that is not there used to run to the end: each such video became ``SourceError`` rows,
the report a banner, and the replay exited 0, so a typo in a path passed a CI job. Now every row whose ``uri``
names a local file (a path, relative to the manifest's folder, or a ``file://`` URI) must name a regular file
this process can read, under the folders the replay reads (the manifest's and ``--file-root``'s), or the replay
stops before scoring with one line per such row (``--allow-missing`` keeps
the old way, for corpora known to be partial). So must every ``http(s)://`` URL name a host and port of the
replay's allow-list (``--http-allow-host``): checked as written, with no DNS lookup and no fetch (a download, and
an address a name resolves to, still fail per video)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from detectors.manifest import ManifestError, ManifestRow
from gateway.core.sources.allowlist import AllowList, allow_list, allowed_url
from gateway.core.sources.errors import SourceError
from gateway.core.sources.files import local_path, under_roots
from gateway.core.sources.stores import admit_object, is_object_uri
from gateway.core.sources.urls import is_web_url

SHOWN = 20  # missing files named one a line; past these, a count


class MissingFiles(ManifestError):
    """Rows of a manifest whose local file does not exist or cannot be read, or whose URL is off the allow-list
    (``problems``: one line each)."""

    def __init__(self, manifest: Path, total: int, problems: list[str]) -> None:
        self.problems = problems
        more = f"\n  ... and {len(problems) - SHOWN} more" if len(problems) > SHOWN else ""
        lines = "".join(f"\n  {p}" for p in problems[:SHOWN])
        super().__init__(
            f"{manifest}: {len(problems)} of {total} videos name a file that cannot be read or a URL off the "
            f"allow-list; nothing was scored (--allow-missing runs the others):{lines}{more}"
        )


def unreadable(
    manifest: Path,
    row: ManifestRow,
    roots: Sequence[Path],
    allow: AllowList | None = None,
    object_stores: Sequence[str] = (),
) -> str | None:
    """Why the file ``row`` names cannot be read by the replay (None: it can): outside ``roots`` (symlinks
    followed, as the read follows them), missing, not a regular file, or not readable; for a URL, a host or port
    that ``allow`` does not list; for an object, a prefix ``object_stores`` does not list."""
    where = f"video {row.video_id}: {row.uri}"
    if is_object_uri(row.uri):
        try:
            admit_object(row.uri, object_stores)
        except SourceError as exc:
            return f"{where}: {exc} (--object-store)"
        return None
    if is_web_url(row.uri):
        try:
            allowed_url(row.uri, allow or AllowList({}))
        except SourceError as exc:
            return f"{where}: {exc} (--http-allow-host)"
        return None
    try:
        path = local_path(row.uri, manifest.resolve().parent)
    except SourceError as exc:
        return f"{where}: {exc}"
    if not under_roots(path, roots):
        return f"{where}: outside the folders the replay reads ({path}; the manifest's folder and --file-root)"
    if not path.exists():
        return f"{where}: no such file ({path})"
    if not path.is_file():
        return f"{where}: not a regular file ({path})"
    if not os.access(path, os.R_OK):
        return f"{where}: not readable by this user ({path})"
    return None


def check_files(
    manifest: Path,
    rows: list[ManifestRow],
    roots: Sequence[Path],
    http_allow_hosts: Sequence[str] = (),
    object_stores: Sequence[str] = (),
) -> None:
    """Raises :class:`MissingFiles` naming every row whose local file the replay cannot read under ``roots``, or
    whose URL ``http_allow_hosts`` does not admit."""
    allow = allow_list(http_allow_hosts)
    problems = [p for p in (unreadable(manifest, r, roots, allow, object_stores) for r in rows) if p is not None]
    if problems:
        raise MissingFiles(manifest, len(rows), problems)
