"""``http(s)://`` downloads from allow-listed hosts: the parse the allow-list checked is the one connected to, on the
first request and on every redirect, and the addresses checked (:mod:`.addresses`: one lookup, every address
checked) are the only ones connected to; the ``Host`` header, TLS SNI and certificate check stay on the name. A
redirect from https to http is refused unless allowed. Reads time out, a download ends at its deadline however
slowly a server drips, the body is read in chunks up to ``max_bytes``; no proxy."""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from urllib.parse import urljoin

from gateway.core.sources.addresses import connect, resolve
from gateway.core.sources.allowlist import AllowList, allow_list
from gateway.core.sources.errors import SourceError, show
from gateway.core.sources.files import read_bounded
from gateway.core.sources.urls import Address, SourceURL, parse_source_url
from transforms.errors import LimitExceeded

MAX_REDIRECTS = 10
REDIRECTS = frozenset({301, 302, 303, 307, 308})
HEADERS = {"User-Agent": "lastmile-gateway", "Accept-Encoding": "identity", "Connection": "close"}


def download(
    uri: str,
    allow: Sequence[str] | AllowList,
    max_bytes: int | None,
    timeout_s: float,
    total_s: float,
    redirect_to_http: bool = False,
) -> bytes:
    """The body of ``uri`` (and of its redirects, each to a host and port in ``allow``, each resolved and checked
    again); else :class:`SourceError`. ``redirect_to_http``: follow a redirect from https to http (drops TLS)."""
    allowed = allow_list(allow)
    url = allowed.admit(parse_source_url(uri))
    deadline = time.monotonic() + total_s
    for _ in range(MAX_REDIRECTS + 1):
        addresses = resolve(url, allowed, _left(timeout_s, deadline))
        location = _get(url, addresses, max_bytes, _left(timeout_s, deadline), deadline)
        if isinstance(location, bytes):
            return location
        try:
            target = parse_source_url(urljoin(str(url), location))
        except (SourceError, ValueError) as exc:
            raise SourceError(f"redirect from {show(str(url))} refused: {exc}") from exc
        try:
            allowed.admit(target)
        except SourceError as exc:
            why = f"redirect from {show(str(url))} to {show(str(target))} leaves the allow-list: {exc}"
            raise SourceError(why) from exc
        if url.scheme == "https" and target.scheme == "http" and not redirect_to_http:
            raise SourceError(
                f"redirect from {show(str(url))} to {show(str(target))} refused: it drops TLS "
                "(sources.http_redirect_to_http allows it)"
            )
        url = target
    raise SourceError(f"more than {MAX_REDIRECTS} redirects from {show(uri)}")


def _left(timeout_s: float, deadline: float) -> float:
    return min(timeout_s, max(deadline - time.monotonic(), 0.001))


class PinnedConnection(http.client.HTTPConnection):
    """An HTTP(S) connection to ``url``'s name that connects only to ``addresses`` (already checked): no lookup
    of its own. With ``tls``, the socket is wrapped with SNI and certificate verification on the name."""

    def __init__(self, url: SourceURL, addresses: list[Address], timeout_s: float, tls: ssl.SSLContext | None):
        super().__init__(url.connect_host, url.port, timeout=timeout_s)
        self._addresses, self._tls = addresses, tls

    def connect(self) -> None:
        self.sock = connect(self._addresses, self.port, self.timeout)
        if self._tls is not None:  # (the handshake as a whole is bounded by the timeout: at most the time left)
            self.sock = self._tls.wrap_socket(self.sock, server_hostname=self.host)


def _get(
    url: SourceURL, addresses: list[Address], max_bytes: int | None, timeout_s: float, deadline: float
) -> bytes | str:
    """One request to exactly ``url``'s port on one of ``addresses``: the body, or the ``Location`` of a redirect.
    Each read waits at most ``timeout_s``; at ``deadline`` the socket is shut down (:func:`_cut`), whatever it
    waits for."""
    tls = ssl.create_default_context() if url.scheme == "https" else None
    conn = PinnedConnection(url, addresses, timeout_s, tls)
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
        body = read_bounded(resp.read1, max_bytes, show(str(url)), deadline)
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
