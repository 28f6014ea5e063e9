"""Where video bytes come from, confined and bounded: files under configured roots, and ``http(s)://`` only to
allow-listed hosts. Secure by default: with no roots no file is read at all, and no host is reached without an
allow-list.

- Files: the path (a manifest's relative path against ``base``, or a ``file://`` URI) is resolved (symlinks
  followed) and must lie under one of ``roots``; only a regular file is read (not ``/dev/zero``, a FIFO or a
  directory), and never more than ``max_bytes``, whatever ``stat`` says.
- HTTP(S): the host, and the host of every redirect, must be on the allow-list; connect and read time out,
  the whole download has a deadline, and the body is read in chunks up to ``max_bytes``.
"""

from __future__ import annotations

import os
import stat
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

from transforms.errors import LimitExceeded, VideoError

CHUNK = 1 << 20


class SourceError(VideoError):
    """The video's bytes could not be fetched (missing file, a path outside the allowed roots, a bad URI)."""

    reason = "source_error"


def fetch(
    uri: str,
    base: Path | None = None,
    roots: Sequence[Path] = (),
    max_bytes: int | None = None,
    http_allow_hosts: Sequence[str] = (),
    http_timeout_s: float = 10.0,
    http_total_s: float = 120.0,
) -> bytes:
    """Bytes of ``uri``: a path (relative to ``base``) or ``file://`` URI under ``roots``, or an ``http(s)://`` URI
    whose host is in ``http_allow_hosts``. Raises :class:`SourceError` or :class:`LimitExceeded`."""
    parsed = urlparse(uri)
    if parsed.scheme in ("http", "https"):
        return _fetch_http(uri, http_allow_hosts, max_bytes, http_timeout_s, http_total_s)
    if parsed.scheme in ("", "file"):
        path = Path(unquote(parsed.path)) if parsed.scheme == "file" else Path(uri)
        return _read_file(path if path.is_absolute() else (base or Path.cwd()) / path, roots, max_bytes)
    raise SourceError(f"unsupported URI scheme {parsed.scheme!r} in {uri!r}")


def _read_file(path: Path, roots: Sequence[Path], max_bytes: int | None) -> bytes:
    if not roots:
        raise SourceError(f"file reads are disabled (no file roots configured): {path}")
    resolved = path.resolve()  # symlinks followed, `..` removed: the real target is what must be confined
    if not any(resolved.is_relative_to(Path(r).resolve()) for r in roots):
        raise SourceError(f"{path} is outside the allowed roots")
    try:
        fd = os.open(resolved, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror or exc}") from exc
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise SourceError(f"{path} is not a regular file")
    with os.fdopen(fd, "rb") as f:
        if max_bytes is not None and info.st_size > max_bytes:
            raise LimitExceeded(f"{path} is {info.st_size} bytes; the limit is {max_bytes}")
        return _read_bounded(f, max_bytes, str(path))


def _read_bounded(stream, max_bytes: int | None, what: str, deadline: float | None = None) -> bytes:
    """Read ``stream`` to its end in chunks, failing as soon as it passes ``max_bytes`` or ``deadline``."""
    parts, size = [], 0
    while chunk := stream.read(CHUNK):
        size += len(chunk)
        if max_bytes is not None and size > max_bytes:
            raise LimitExceeded(f"{what} exceeds the {max_bytes}-byte limit")
        if deadline is not None and time.monotonic() > deadline:
            raise SourceError(f"{what}: download took longer than its deadline")
        parts.append(chunk)
    return b"".join(parts)


class _ConfinedRedirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only to a host on the allow-list."""

    def __init__(self, allow: Sequence[str]) -> None:
        self.allow = set(allow)

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        target = urlparse(newurl)
        if target.scheme not in ("http", "https") or target.hostname not in self.allow:
            raise SourceError(f"redirect from {req.full_url} to {newurl} leaves the allow-list")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _fetch_http(uri: str, allow: Sequence[str], max_bytes: int | None, timeout_s: float, total_s: float) -> bytes:
    host = urlparse(uri).hostname or ""
    if host not in allow:
        raise SourceError(f"host {host!r} is not in the allow-list")
    opener = urllib.request.build_opener(_ConfinedRedirects(allow))
    deadline = time.monotonic() + total_s
    try:
        with opener.open(uri, timeout=timeout_s) as resp:
            length = resp.headers.get("Content-Length")
            if max_bytes is not None and length and length.isdigit() and int(length) > max_bytes:
                raise LimitExceeded(f"{uri} is {length} bytes; the limit is {max_bytes}")
            return _read_bounded(resp, max_bytes, uri, deadline)
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise SourceError(f"cannot fetch {uri}: {exc}") from exc
