"""URLs as the allow-list checks them and as the connection uses them: one parse (:func:`parse_source_url`) gives
the scheme, host, port and target. A user part, a control character, an unparseable port or host is refused before
any DNS lookup. Hosts compare case-insensitively without a trailing dot; IP literals (decimal, hex, octal, short
IPv4, IPv6, IPv4-mapped IPv6) as addresses (:func:`canonical_host`)."""

from __future__ import annotations

import ipaddress
import re
import string
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from gateway.core.sources.errors import SourceError, show

DEFAULT_PORTS = {"http": 80, "https": 443}
SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")  # RFC 3986: a letter, then letters, digits, + - .
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_LABEL = r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?"  # ASCII, no hyphen at either end (IDNs: their xn-- form)
_NAME = re.compile(rf"{_LABEL}(\.{_LABEL})*")
_NUMBER = re.compile(r"[0-9]+|0x[0-9a-f]*")  # a last label like this makes the host an IPv4 address (WHATWG)

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def scheme_of(uri: str) -> str:
    """``uri``'s scheme in lowercase (``"http"``, ``"file"``), or ``""`` for a plain path."""
    match = SCHEME.match(uri)
    return match.group(1).lower() if match else ""


def is_web_url(uri: str) -> bool:
    """Whether ``uri`` is an ``http(s)://`` URL (fetched from an allow-listed host, never a file)."""
    return scheme_of(uri) in DEFAULT_PORTS


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
    if CONTROL.search(uri) or " " in uri:
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


def port_number(text: str) -> int | None:
    """``text`` as a TCP port (1 to 65535, plain ASCII digits, at most five), or None: the one rule for a URL's
    port and an allow-list entry's."""
    if text.isascii() and text.isdigit() and len(text) <= 5 and 0 < int(text) <= 65535:
        return int(text)
    return None


def _port(text: str, uri: str) -> int:
    port = port_number(text)
    if port is None:
        raise SourceError(f"unparseable port {show(text, 20)} in URL {show(uri)}")
    return port


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
