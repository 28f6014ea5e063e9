"""Where video bytes come from, confined and bounded: files under configured roots, and ``http(s)://`` only to
allow-listed hosts. Secure by default: with no roots no file is read, and no host is reached without an allow-list.

- Files: the path (a manifest's relative path against ``base``, or a ``file://`` URI with no host but localhost) is
  resolved (symlinks followed) and must lie under one of ``roots``; only a regular file is read (not a FIFO,
  ``/dev/zero`` or a directory), and never more than ``max_bytes``, whatever ``stat`` says.
- HTTP(S): one parse (:func:`parse_source_url`) gives the scheme, host, port and target that the allow-list checks
  *and* the connection uses, on the first request and on every redirect. A user part, a control character, an
  unparseable port or host is refused before any DNS lookup. Hosts compare case-insensitively without a trailing
  dot; IP literals (decimal, hex, octal, short IPv4, IPv6, IPv4-mapped IPv6) as addresses. Reads time out, a
  download ends at its deadline however slowly a server drips, the body is read in chunks up to ``max_bytes``; no proxy.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import os
import re
import socket
import ssl
import stat
import string
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote, urljoin, urlparse, urlsplit

from transforms.errors import LimitExceeded, VideoError

CHUNK = 1 << 20
MAX_REDIRECTS = 10
DEFAULT_PORTS = {"http": 80, "https": 443}
REDIRECTS = frozenset({301, 302, 303, 307, 308})
HEADERS = {"User-Agent": "lastmile-gateway", "Accept-Encoding": "identity", "Connection": "close"}
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_LABEL = r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?"  # ASCII, no hyphen at either end (IDNs: their xn-- form)
_NAME = re.compile(rf"{_LABEL}(\.{_LABEL})*")
_NUMBER = re.compile(r"[0-9]+|0x[0-9a-f]*")  # a last label like this makes the host an IPv4 address (WHATWG)

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class SourceError(VideoError):
    """The video's bytes could not be fetched (missing file, a path outside the allowed roots, a bad URI)."""

    reason = "source_error"


def show(text: str, limit: int = 200) -> str:
    """``text`` quoted for an error message, cut to ``limit`` characters (a URI may be long)."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


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
    whose host is in ``http_allow_hosts``; else :class:`SourceError` (or :class:`LimitExceeded`)."""
    if _CONTROL.search(uri):
        raise SourceError(f"control character in URI {show(uri)}")
    match = _SCHEME.match(uri)
    scheme = match.group(1).lower() if match else ""
    if scheme in DEFAULT_PORTS:
        return _fetch_http(uri, http_allow_hosts, max_bytes, http_timeout_s, http_total_s)
    if scheme in ("", "file"):
        try:
            parts = urlparse(uri) if scheme == "file" else None
        except ValueError as exc:
            raise SourceError(f"unparseable URI {show(uri)}: {exc}") from exc
        name = unquote(parts.path) if parts else uri
        if parts and _CONTROL.search(name):  # %00 and the like, once percent-decoded (the URI was checked)
            raise SourceError(f"control character in the path of {show(uri)}")
        if parts and parts.netloc not in ("", "localhost"):  # file://videos/a.mp4 is /a.mp4 on host "videos"
            raise SourceError(f"file URI {show(uri)} names host {parts.netloc!r} (a local file: file:///PATH)")
        path = Path(name)
        return _read_file(path if path.is_absolute() else (base or Path.cwd()) / path, roots, max_bytes)
    raise SourceError(f"unsupported URI scheme {scheme!r} in {show(uri)}")


# -- files -----------------------------------------------------------------------------------------------------
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
        return _read_bounded(f.read, max_bytes, str(path))


def _read_bounded(read, max_bytes: int | None, what: str, deadline: float | None = None) -> bytes:
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


# -- URLs ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SourceURL:
    """An ``http(s)://`` URL as checked and as fetched: ``host`` is a lowercase name without its trailing dot or
    an address, ``target`` the path and query the request line asks for (the fragment is never sent)."""

    scheme: str
    host: str | Address
    port: int
    target: str

    @property
    def connect_host(self) -> str:
        return str(self.host)

    @property
    def netloc(self) -> str:
        """The ``Host`` header: the host (an IPv6 address in brackets), with the port unless it is the default."""
        host = f"[{self.host}]" if isinstance(self.host, ipaddress.IPv6Address) else str(self.host)
        return host if self.port == DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.scheme}://{self.netloc}{self.target}"


def parse_source_url(uri: str) -> SourceURL:
    """The one parse of an ``http(s)://`` URL; :class:`SourceError` for a URL with a user part, whitespace or a
    control character, an unparseable host or port, or another scheme. No DNS, no network."""
    if _CONTROL.search(uri) or " " in uri:
        raise SourceError(f"whitespace or control character in URL {show(uri)}")
    try:
        parts = urlsplit(uri)
    except ValueError as exc:
        raise SourceError(f"unparseable URL {show(uri)}: {exc}") from exc
    if parts.scheme not in DEFAULT_PORTS:
        raise SourceError(f"unsupported URI scheme {parts.scheme!r} in {show(uri)}")
    authority = parts.netloc
    if "@" in authority:
        raise SourceError(f"URL {show(uri)} has a user part (refused: its host is what follows the '@')")
    if authority.startswith("["):
        end = authority.find("]") + 1
        host_text, rest = (authority[:end], authority[end:]) if end else (authority, "")
    else:
        host_text, colon, port_text = authority.partition(":")
        rest = colon + port_text
    if rest and not rest.startswith(":"):
        raise SourceError(f"unparseable host in URL {show(uri)}")
    port = _port(rest[1:], uri) if rest[1:] else DEFAULT_PORTS[parts.scheme]
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    # non-ASCII characters of the path are sent percent-encoded (as browsers do); existing escapes stay
    return SourceURL(parts.scheme, canonical_host(host_text), port, quote(target, safe=string.punctuation))


def _port(text: str, uri: str) -> int:
    if not (text.isascii() and text.isdigit() and len(text) <= 5 and 0 < int(text) <= 65535):
        raise SourceError(f"unparseable port {show(text, 20)} in URL {show(uri)}")
    return int(text)


def canonical_host(text: str) -> str | Address:
    """A host as the allow-list and the connection see it: an address (IPv4 in any numeric spelling WHATWG URL
    parsing and ``inet_aton`` accept, IPv6 in brackets, IPv4-mapped IPv6 as IPv4), or a lowercase ASCII name
    without its trailing dot. :class:`SourceError` otherwise, also for a number-like host that is no address."""
    if text.startswith("[") and text.endswith("]") and "%" not in text:  # no IPv6 zone id
        try:
            address = ipaddress.IPv6Address(text[1:-1])
        except ValueError as exc:
            raise SourceError(f"invalid IPv6 address {show(text, 60)}") from exc
        return address if address.ipv4_mapped is None else address.ipv4_mapped
    name = text.lower() if text.isascii() else ""  # (non-ASCII first: "\u212a".lower() is "k")
    name = name[:-1] if name.endswith(".") else name
    if len(name) > 253 or not _NAME.fullmatch(name):
        raise SourceError(f"invalid host {show(text, 60)}")
    if _NUMBER.fullmatch(name.rsplit(".", 1)[-1]):
        return _ipv4(name, text)
    return name


def _ipv4(name: str, text: str) -> ipaddress.IPv4Address:
    """The WHATWG IPv4 parser: 1 to 4 parts, each decimal, ``0x`` hex or ``0``-prefixed octal; the last part
    fills the remaining bytes (``127.1``, ``2130706433``, ``0x7f.0.0.1``, ``017700000001``)."""
    numbers = []
    for part in name.split("."):
        if part.startswith("0x"):
            digits, base, allowed = part[2:], 16, string.hexdigits
        elif len(part) > 1 and part.startswith("0"):
            digits, base, allowed = part[1:], 8, string.octdigits
        else:
            digits, base, allowed = part, 10, string.digits
        if not all(c in allowed for c in digits):
            raise SourceError(f"host {show(text, 60)} looks like a number but is no IPv4 address")
        numbers.append(int(digits, base) if digits else 0)
    *head, last = numbers
    if len(numbers) > 4 or any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        raise SourceError(f"host {show(text, 60)} looks like a number but is no IPv4 address")
    return ipaddress.IPv4Address(last + sum(n << (8 * (3 - i)) for i, n in enumerate(head)))


def allow_set(hosts: Sequence[str]) -> frozenset[str | Address]:
    """The allow-list's entries in the form :func:`canonical_host` gives (a bare IPv6 address is accepted too)."""
    return frozenset(_allow_entry(h) for h in hosts)


def _allow_entry(entry: str) -> str | Address:
    try:
        return canonical_host(f"[{entry}]" if ":" in entry and not entry.startswith("[") else entry)
    except SourceError as exc:
        raise SourceError(f"allow-list entry {show(entry, 60)} is no host name or IP address ({exc})") from exc


# -- HTTP ------------------------------------------------------------------------------------------------------
def allowed_url(uri: str, allow: Sequence[str]) -> SourceURL:
    """``uri`` parsed (:func:`parse_source_url`), refused unless its host is in ``allow``; no DNS, no network."""
    if (url := parse_source_url(uri)).host not in allow_set(allow):
        raise SourceError(f"host {str(url.host)!r} is not in the allow-list")
    return url


def _fetch_http(uri: str, allow: Sequence[str], max_bytes: int | None, timeout_s: float, total_s: float) -> bytes:
    allowed, url = allow_set(allow), allowed_url(uri, allow)
    deadline = time.monotonic() + total_s
    for _ in range(MAX_REDIRECTS + 1):
        location = _get(url, max_bytes, min(timeout_s, max(deadline - time.monotonic(), 0.001)), deadline)
        if isinstance(location, bytes):
            return location
        try:
            target = parse_source_url(urljoin(str(url), location))
        except (SourceError, ValueError) as exc:
            raise SourceError(f"redirect from {show(str(url))} refused: {exc}") from exc
        if target.host not in allowed:
            raise SourceError(f"redirect from {show(str(url))} to {show(str(target))} leaves the allow-list")
        url = target
    raise SourceError(f"more than {MAX_REDIRECTS} redirects from {show(uri)}")


def _get(url: SourceURL, max_bytes: int | None, timeout_s: float, deadline: float) -> bytes | str:
    """One request to exactly ``url``'s host and port: the body, or the ``Location`` of a redirect. Each read
    waits at most ``timeout_s``; at ``deadline`` the socket is shut down (:func:`_cut`), whatever it waits for."""
    if url.scheme == "https":  # (the TLS handshake as a whole is bounded by the timeout: at most the time left)
        tls = ssl.create_default_context()
        conn = http.client.HTTPSConnection(url.connect_host, url.port, timeout=timeout_s, context=tls)
    else:
        conn = http.client.HTTPConnection(url.connect_host, url.port, timeout=timeout_s)
    cut = threading.Timer(max(deadline - time.monotonic(), 0.0), _cut, (conn,))
    cut.start()
    try:
        conn.request("GET", url.target, headers={"Host": url.netloc, **HEADERS})
        resp = conn.getresponse()
        location = resp.getheader("Location")
        if resp.status in REDIRECTS and location:
            return location
        if resp.status != 200:
            raise SourceError(f"cannot fetch {show(str(url))}: HTTP {resp.status} {resp.reason}")
        length = resp.getheader("Content-Length")
        if max_bytes is not None and length and length.isdigit() and int(length) > max_bytes:
            raise LimitExceeded(f"{show(str(url))} is {length} bytes; the limit is {max_bytes}")
        body = _read_bounded(resp.read1, max_bytes, show(str(url)), deadline)
        if resp.length:  # the connection ended before the length the server declared: no video, a part of one
            raise http.client.IncompleteRead(body, resp.length)
        return body
    except (http.client.HTTPException, OSError, ValueError) as exc:
        if time.monotonic() >= deadline:
            raise SourceError(f"{show(str(url))}: download took longer than its deadline") from exc
        raise SourceError(f"cannot fetch {show(str(url))}: {exc or type(exc).__name__}") from exc
    finally:
        cut.cancel()
        cut.join()  # the cut never runs once the connection is closed (its socket's number may be reused)
        conn.close()


def _cut(conn: http.client.HTTPConnection) -> None:
    """Shut the connection's socket (the plain socket's call, below TLS): a blocked read returns at once."""
    with contextlib.suppress(OSError, TypeError):
        socket.socket.shutdown(conn.sock, socket.SHUT_RDWR)
