"""``http(s)://`` downloads from allow-listed hosts: the parse the allow-list checked is the one connected to, on the
first request and on every redirect. Reads time out, a download ends at its deadline however slowly a server
drips, the body is read in chunks up to ``max_bytes``; no proxy."""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from urllib.parse import urljoin

from gateway.core.sources.errors import SourceError, show
from gateway.core.sources.files import read_bounded
from gateway.core.sources.urls import SourceURL, admit, allow_set, parse_source_url
from transforms.errors import LimitExceeded

MAX_REDIRECTS = 10
REDIRECTS = frozenset({301, 302, 303, 307, 308})
HEADERS = {"User-Agent": "lastmile-gateway", "Accept-Encoding": "identity", "Connection": "close"}


def download(uri: str, allow: Sequence[str], max_bytes: int | None, timeout_s: float, total_s: float) -> bytes:
    """The body of ``uri`` (and of its redirects, each to a host in ``allow``); else :class:`SourceError`."""
    allowed = allow_set(allow)
    url = admit(parse_source_url(uri), allowed)
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
