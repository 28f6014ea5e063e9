"""Where video bytes come from, confined and bounded: files under configured roots, ``http(s)://`` only to
allow-listed hosts, ``s3://`` and ``az://`` only under listed prefixes. Secure by default: with no roots no file is
read, no host is reached without an allow-list, no object without a prefix.

- Files (:mod:`.files`): the path (a manifest's relative path against ``base``, or a ``file://`` URI with no host
  but localhost) is resolved (symlinks followed) and must lie under one of ``roots``; only a regular file is read
  (not a FIFO, ``/dev/zero`` or a directory), and never more than ``max_bytes``, whatever ``stat`` says.
- URLs (:mod:`.urls`): one parse gives the scheme, host, port and target that the allow-list (:mod:`.allowlist`:
  hosts with their ports, networks) checks *and* the connection uses (:mod:`.downloads`), on the first request and
  on every redirect. A name is resolved once and every address checked (:mod:`.addresses`: loopback, private,
  link-local and other special ranges refused unless listed); the connection goes to an address checked.
- Object stores (:mod:`.stores`): S3 and Azure Blob through their SDKs and credential chains, the size asked
  before the download; a store that does not answer is :class:`SourceUnavailable`, never the video's fault.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from gateway.core.sources.allowlist import AllowList, allow_list, allowed_url
from gateway.core.sources.downloads import download
from gateway.core.sources.errors import ContentMismatch, SourceError, SourceUnavailable, show
from gateway.core.sources.files import local_path, read_file
from gateway.core.sources.stores import StoreSettings, admit_object, is_object_uri, read_object
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
    "SourceUnavailable",
    "StoreSettings",
    "admit_object",
    "admit_remote",
    "allow_list",
    "allowed_url",
    "canonical_host",
    "check_digest",
    "fetch",
    "is_object_uri",
    "is_remote",
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
    object_stores: Sequence[str] = (),
    stores: StoreSettings | None = None,
) -> bytes:
    """Bytes of ``uri``: a path (relative to ``base``) or ``file://`` URI under ``roots``, an ``http(s)://`` URI
    whose host and port are in ``http_allow_hosts`` (:mod:`.allowlist`), or an ``s3://``/``az://`` URI under
    ``object_stores`` (:mod:`.stores`); else :class:`SourceError` (or :class:`LimitExceeded`, or
    :class:`SourceUnavailable` for a store that did not answer)."""
    if is_web_url(uri):
        return download(uri, http_allow_hosts, max_bytes, http_timeout_s, http_total_s, http_redirect_to_http)
    if is_object_uri(uri):
        settings = stores or StoreSettings(timeout_s=http_timeout_s, total_s=http_total_s)
        return read_object(uri, object_stores, settings, max_bytes)
    return read_file(local_path(uri, base or Path.cwd()), roots, max_bytes)


def is_remote(uri: str) -> bool:
    """Whether ``uri`` is read over the network (``http(s)://``, ``s3://``, ``az://``), not from a file."""
    return is_web_url(uri) or is_object_uri(uri)


def admit_remote(uri: str, http_allow_hosts: Sequence[str], object_stores: Sequence[str]) -> None:
    """Nothing, if the remote ``uri`` is one the gateway may read (its host, or its prefix, is listed); else
    :class:`SourceError` naming the setting. No network: the checks a sender or a replay makes before sending."""
    if is_object_uri(uri):
        admit_object(uri, object_stores)
    else:
        allowed_url(uri, http_allow_hosts)


def check_digest(data: bytes, expected: str | None) -> None:
    """Nothing, if ``expected`` is None or the sha256 of ``data`` (before any decode: a video changed since its
    sender hashed it is not scored as if it were that one); else :class:`ContentMismatch`."""
    if expected is None:
        return
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected.lower():  # (hex digits in either case name the same digest)
        raise ContentMismatch(digest, expected)
