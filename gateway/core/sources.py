"""Where video bytes come from: a manifest's relative path, ``file://`` under allowed roots, or inline."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from transforms.errors import LimitExceeded, VideoError


class SourceError(VideoError):
    """The video's bytes could not be fetched (missing file, a path outside the allowed roots, a bad URI)."""

    reason = "source_error"


def fetch(
    uri: str,
    base: Path | None = None,
    roots: list[Path] | None = None,
    max_bytes: int | None = None,
    http_allow_hosts: list[str] | None = None,
    http_timeout_s: float = 10.0,
) -> bytes:
    """Bytes of ``uri``: a path relative to ``base`` or a ``file://`` URI, confined to ``roots`` when given, or an
    ``http(s)://`` URI whose host is in ``http_allow_hosts`` (never any other host)."""
    parsed = urlparse(uri)
    if parsed.scheme in ("http", "https"):
        return _fetch_http(uri, parsed.hostname or "", http_allow_hosts or [], max_bytes, http_timeout_s)
    if parsed.scheme in ("", "file"):
        path = Path(unquote(parsed.path)) if parsed.scheme == "file" else Path(uri)
        if not path.is_absolute():
            path = (base or Path.cwd()) / path
        path = path.resolve()
        if roots and not any(path.is_relative_to(r.resolve()) for r in roots):
            raise SourceError(f"{path} is outside the allowed roots")
        try:
            size = path.stat().st_size
            if max_bytes is not None and size > max_bytes:
                raise LimitExceeded(f"{path} is {size} bytes; the limit is {max_bytes}")
            return path.read_bytes()
        except OSError as exc:
            raise SourceError(f"cannot read {path}: {exc.strerror or exc}") from exc
    raise SourceError(f"unsupported URI scheme {parsed.scheme!r} in {uri!r}")


def _fetch_http(uri: str, host: str, allow: list[str], max_bytes: int | None, timeout_s: float) -> bytes:
    import urllib.error
    import urllib.request

    if host not in allow:
        raise SourceError(f"host {host!r} is not in the allow-list")
    try:
        with urllib.request.urlopen(uri, timeout=timeout_s) as resp:
            length = resp.headers.get("Content-Length")
            if max_bytes is not None and length and int(length) > max_bytes:
                raise LimitExceeded(f"{uri} is {length} bytes; the limit is {max_bytes}")
            data = resp.read(max_bytes + 1 if max_bytes is not None else -1)
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise SourceError(f"cannot fetch {uri}: {exc}") from exc
    if max_bytes is not None and len(data) > max_bytes:
        raise LimitExceeded(f"{uri} exceeds the {max_bytes}-byte limit")
    return data
