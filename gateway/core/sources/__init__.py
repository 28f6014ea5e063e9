"""Where video bytes come from, confined and bounded: files under configured roots, and ``http(s)://`` only to
allow-listed hosts. Secure by default: with no roots no file is read, and no host is reached without an allow-list.

- Files (:mod:`.files`): the path (a manifest's relative path against ``base``, or a ``file://`` URI with no host
  but localhost) is resolved (symlinks followed) and must lie under one of ``roots``; only a regular file is read
  (not a FIFO, ``/dev/zero`` or a directory), and never more than ``max_bytes``, whatever ``stat`` says.
- URLs (:mod:`.urls`): one parse gives the scheme, host, port and target that the allow-list (:mod:`.allowlist`:
  hosts with their ports, networks) checks *and* the connection uses (:mod:`.downloads`), on the first request and
  on every redirect. A name is resolved once and every address checked (:mod:`.addresses`: loopback, private,
  link-local and other special ranges refused unless listed); the connection goes to an address checked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from gateway.core.sources.allowlist import AllowList, allow_list, allowed_url
from gateway.core.sources.downloads import download
from gateway.core.sources.errors import ContentMismatch, SourceError, show
from gateway.core.sources.files import local_path, read_file
from gateway.core.sources.urls import (
    DEFAULT_PORTS,
    SourceURL,
    canonical_host,
    is_web_url,
    parse_source_url,
)

__all__ = [
    "DEFAULT_PORTS",
    "AllowList",
    "ContentMismatch",
    "SourceError",
    "SourceURL",
    "allow_list",
    "allowed_url",
    "canonical_host",
    "check_digest",
    "fetch",
    "is_web_url",
    "local_path",
    "parse_source_url",
    "show",
]


def fetch(
    uri: str,
    base: Path | None = None,
    roots: Sequence[Path] = (),
    max_bytes: int | None = None,
    http_allow_hosts: Sequence[str] = (),
    http_timeout_s: float = 10.0,
    http_total_s: float = 120.0,
    http_redirect_to_http: bool = False,
) -> bytes:
    """Bytes of ``uri``: a path (relative to ``base``) or ``file://`` URI under ``roots``, or an ``http(s)://`` URI
    whose host and port are in ``http_allow_hosts`` (:mod:`.allowlist`); else :class:`SourceError` (or
    :class:`LimitExceeded`)."""
    if is_web_url(uri):
        return download(uri, http_allow_hosts, max_bytes, http_timeout_s, http_total_s, http_redirect_to_http)
    return read_file(local_path(uri, base or Path.cwd()), roots, max_bytes)


def check_digest(data: bytes, expected: str | None) -> None:
    """Nothing, if ``expected`` is None or the sha256 of ``data`` (before any decode: a video changed since its
    sender hashed it is not scored as if it were that one); else :class:`ContentMismatch`."""
    if expected is None:
        return
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected.lower():  # (hex digits in either case name the same digest)
        raise ContentMismatch(digest, expected)
