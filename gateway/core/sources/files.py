"""Local files as a source: the one rule for what a path or ``file://`` URI names (:func:`local_path`, used by the
gateway's fetch and by ``lastmile send`` alike), and a confined, bounded read of it (:func:`read_file`)."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import unquote_to_bytes, urlparse

from gateway.core.sources.errors import SourceError, show
from gateway.core.sources.urls import CONTROL, scheme_of
from transforms.errors import LimitExceeded

CHUNK = 1 << 20
LOCAL_HOSTS = ("", "localhost")  # file:///a.mp4 and file://localhost/a.mp4; file://videos/a.mp4 is another host's


def local_path(uri: str, base: Path) -> Path:
    """The file a path or ``file://`` URI names, a relative path taken under ``base``; :class:`SourceError` for a
    control character (also once percent-decoded), a ``file://`` URI naming another host, or another scheme."""
    if CONTROL.search(uri):
        raise SourceError(f"control character in URI {show(uri)}")
    scheme = scheme_of(uri)
    if scheme not in ("", "file"):
        bare = not uri[len(scheme) + 1 :].startswith("//")  # c:/a.mp4, clip:1.mp4: paths that look like a scheme
        hint = " (a path whose first part holds a ':': write ./PATH)" if bare else ""
        raise SourceError(f"unsupported URI scheme {scheme!r} in {show(uri)}{hint}")
    if not scheme:
        path = Path(uri)
    else:
        try:
            parts = urlparse(uri)
        except ValueError as exc:
            raise SourceError(f"unparseable URI {show(uri)}: {exc}") from exc
        if parts.netloc not in LOCAL_HOSTS:  # RFC 8089: file://videos/a.mp4 is /a.mp4 on host "videos"
            raise SourceError(f"file URI {show(uri)} names host {parts.netloc!r} (a local file: file:///PATH)")
        path = Path(os.fsdecode(unquote_to_bytes(parts.path)))  # %FF is the byte a folder's name holds, as_uri's way
        if CONTROL.search(str(path)):  # %00 and the like, once percent-decoded
            raise SourceError(f"control character in the path of {show(uri)}")
    return path if path.is_absolute() else base / path


def under_roots(path: Path, roots: Sequence[Path]) -> bool:
    """Whether ``path`` resolves (symlinks followed, ``..`` removed) under one of ``roots``: the one confinement
    rule, for the read itself and for the checks made before it (a replay's manifest)."""
    resolved = path.resolve()
    return any(resolved.is_relative_to(Path(r).resolve()) for r in roots)


def read_file(path: Path, roots: Sequence[Path], max_bytes: int | None) -> bytes:
    """``path``'s bytes if it resolves (symlinks followed) under one of ``roots`` and is a regular file (not a
    FIFO, ``/dev/zero`` or a folder); never more than ``max_bytes``, whatever ``stat`` says."""
    if not roots:
        raise SourceError(f"file reads are disabled (no file roots configured): {path}")
    resolved = path.resolve()  # symlinks followed, `..` removed: the real target is what must be confined
    if not under_roots(resolved, roots):
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
        return read_bounded(f.read, max_bytes, str(path))


def read_bounded(
    read: Callable[[int], bytes], max_bytes: int | None, what: str, deadline: float | None = None
) -> bytes:
    """Read with ``read(n)`` to the end in chunks, failing as soon as it passes ``max_bytes`` or ``deadline``."""
    parts, size = [], 0
    while True:
        chunk = read(CHUNK)
        if deadline is not None and time.monotonic() > deadline:
            raise SourceError(f"{what}: download took longer than its deadline")
        if not chunk:
            return b"".join(parts)
        size += len(chunk)
        if max_bytes is not None and size > max_bytes:
            raise LimitExceeded(f"{what} exceeds the {max_bytes}-byte limit")
        parts.append(chunk)
