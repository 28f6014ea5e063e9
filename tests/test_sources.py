"""Fetching video bytes: file roots, and http(s) only to allow-listed hosts, with the size limit (loopback server)."""

from __future__ import annotations

import http.server
import socketserver
import threading
import time
from functools import partial
from pathlib import Path

import pytest

from gateway.core.sources import SourceError, fetch
from transforms.errors import LimitExceeded


class _Hostile(http.server.BaseHTTPRequestHandler):
    """Redirects /hop to another host name of this same server, and streams /endless without a length."""

    def do_GET(self):
        port = self.server.server_address[1]
        if self.path == "/hop":
            self.send_response(302)
            self.send_header("Location", f"http://localhost:{port}/clip.mp4")
            self.end_headers()
        elif self.path == "/stay":
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{port}/clip.mp4")
            self.end_headers()
        elif self.path == "/clip.mp4":
            self.send_response(200)
            self.send_header("Content-Length", "5")
            self.end_headers()
            self.wfile.write(b"video")
        else:  # /endless: no Content-Length, more bytes than any limit
            self.send_response(200)
            self.end_headers()
            try:
                for _ in range(64):
                    self.wfile.write(b"z" * 65536)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client stopped reading at its limit, as it should

    def log_message(self, *args):
        return


def _listed(root: str) -> list[str]:
    """The allow-list entry of a local test server: its address and port (a bare host allows 80 and 443 only)."""
    return [root.split("://", 1)[1]]


@pytest.fixture
def hostile():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def http_root(tmp_path):
    (tmp_path / "clip.mp4").write_bytes(b"x" * 5000)
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_file_uri_naming_a_host_is_refused_not_read_as_a_path_on_this_one(tmp_path):
    """`file://videos/x/a.mp4` is `/x/a.mp4` on host `videos` (RFC 8089), not `videos/x/a.mp4` here: it was read as
    `/x/a.mp4` on this machine without a word."""
    (tmp_path / "a.mp4").write_bytes(b"v")
    assert fetch(f"file://localhost{tmp_path}/a.mp4", roots=[tmp_path]) == b"v"
    with pytest.raises(SourceError, match=r"names host 'videos' \(a local file: file:///PATH\)"):
        fetch(f"file://videos{tmp_path}/a.mp4", roots=[tmp_path])


def test_http_fetch_needs_the_host_on_the_allow_list(http_root):
    assert fetch(f"{http_root}/clip.mp4", http_allow_hosts=_listed(http_root)) == b"x" * 5000
    with pytest.raises(SourceError, match="not in the allow-list"):
        fetch(f"{http_root}/clip.mp4", http_allow_hosts=["cdn.example.internal"])
    with pytest.raises(SourceError, match="not in the allow-list"):
        fetch(f"{http_root}/clip.mp4")  # no allow-list: no host at all


def test_http_fetch_enforces_the_size_limit_and_reports_failures(http_root):
    with pytest.raises(LimitExceeded, match="limit is 1000"):
        fetch(f"{http_root}/clip.mp4", http_allow_hosts=_listed(http_root), max_bytes=1000)
    with pytest.raises(SourceError, match="cannot fetch"):
        fetch(f"{http_root}/missing.mp4", http_allow_hosts=_listed(http_root))


def test_file_uris_are_confined_to_their_roots(tmp_path):
    inside, outside = tmp_path / "in", tmp_path / "out"
    inside.mkdir()
    outside.mkdir()
    (inside / "a.mp4").write_bytes(b"a")
    (outside / "b.mp4").write_bytes(b"b")
    assert fetch((inside / "a.mp4").as_uri(), roots=[inside]) == b"a"
    with pytest.raises(SourceError, match="outside the allowed roots"):
        fetch((outside / "b.mp4").as_uri(), roots=[inside])
    with pytest.raises(SourceError, match="outside the allowed roots"):
        fetch((inside / ".." / "out" / "b.mp4").as_uri(), roots=[inside])  # no escape through ..
    with pytest.raises(LimitExceeded):
        fetch((inside / "a.mp4").as_uri(), roots=[inside], max_bytes=0)
    with pytest.raises(SourceError, match="unsupported URI scheme"):
        fetch("ftp://host/v.mp4")


@pytest.mark.parametrize("escaped", ["%00", "%0a", "%1b", "%7f"])
def test_a_percent_encoded_control_character_in_a_file_uri_is_a_source_error(tmp_path, escaped):
    """A NUL once decoded used to escape as a ValueError ("embedded null byte"): an unexpected worker error, run
    three times and dead-lettered as JobError, instead of the message's own error at once."""
    (tmp_path / "a.mp4").write_bytes(b"a")
    with pytest.raises(SourceError, match="control character in the path of"):
        fetch(f"{tmp_path.as_uri()}/a{escaped}.mp4", roots=[tmp_path])
    assert fetch(f"{tmp_path.as_uri()}/%61.mp4", roots=[tmp_path]) == b"a"  # other escapes are decoded


def test_no_file_is_read_without_configured_roots(tmp_path):
    (tmp_path / "a.mp4").write_bytes(b"a")
    with pytest.raises(SourceError, match="file reads are disabled"):
        fetch((tmp_path / "a.mp4").as_uri())
    with pytest.raises(SourceError, match="file reads are disabled"):
        fetch("/etc/passwd")


def test_only_regular_files_and_never_past_the_limit(tmp_path):
    with pytest.raises(SourceError, match="not a regular file"):
        fetch("file:///dev/zero", roots=[Path("/dev")], max_bytes=1000)  # stat says 0 bytes: read nothing
    (tmp_path / "dir.mp4").mkdir()
    with pytest.raises(SourceError, match="not a regular file"):
        fetch((tmp_path / "dir.mp4").as_uri(), roots=[tmp_path])


def test_a_symlink_out_of_the_root_is_refused(tmp_path):
    inside, outside = tmp_path / "in", tmp_path / "out"
    inside.mkdir()
    outside.mkdir()
    (outside / "secret.mp4").write_bytes(b"s")
    (inside / "link.mp4").symlink_to(outside / "secret.mp4")
    (inside / "ok.mp4").symlink_to(inside / "real.mp4")
    (inside / "real.mp4").write_bytes(b"r")
    with pytest.raises(SourceError, match="outside the allowed roots"):
        fetch((inside / "link.mp4").as_uri(), roots=[inside])
    assert fetch((inside / "ok.mp4").as_uri(), roots=[inside]) == b"r"  # a link that stays inside is fine


def test_redirects_stay_on_the_allow_list_and_streams_are_capped(hostile):
    with pytest.raises(SourceError, match="leaves the allow-list"):
        fetch(f"{hostile}/hop", http_allow_hosts=_listed(hostile))
    assert fetch(f"{hostile}/stay", http_allow_hosts=_listed(hostile)) == b"video"
    with pytest.raises(LimitExceeded, match="100000-byte limit"):
        fetch(f"{hostile}/endless", http_allow_hosts=_listed(hostile), max_bytes=100_000)


# -- deadlines and broken bodies (issue 27) ----------------------------------------------------------------------
DRIP_S, DRIP_FOR_S = 0.2, 12.0  # a byte every 0.2 s (well inside each read's 5 s timeout), for at most 12 s
TOTAL_S = 2.0  # the download's deadline in these tests
OK_200 = b"HTTP/1.1 200 OK\r\n"
_RAW = {  # path: (sent at once, then sent a byte at a time, every DRIP_S), then the connection closes
    "/status": (b"", OK_200 + b"Content-Length: 5\r\n\r\nvideo"),
    "/headers": (OK_200, b"X-Pad: " + b"a" * 1000),
    "/body": (OK_200 + b"Content-Length: 1000\r\n\r\n", b"v" * 1000),
    "/chunked": (OK_200 + b"Transfer-Encoding: chunked\r\n\r\n", b"1\r\nv\r\n" * 200),
    "tls": (b"\x16\x03\x03\x40\x00", b"\x00" * 1000),  # a TLS handshake record of 16 KiB, never finished
    "/bad-chunk": (OK_200 + b"Transfer-Encoding: chunked\r\n\r\nzz\r\nvideo\r\n0\r\n\r\n", b""),
    "/cut-chunk": (OK_200 + b"Transfer-Encoding: chunked\r\n\r\n10\r\nvid", b""),
    "/cut-length": (OK_200 + b"Content-Length: 100\r\n\r\nvideo", b""),
}


class _Raw(socketserver.BaseRequestHandler):
    """Answers with raw bytes: a TLS ClientHello gets the "tls" answer, an HTTP request its path's."""

    def handle(self):
        request = self.request.recv(65536)
        path = "tls" if request.startswith(b"\x16") else request.split(b" ")[1].decode()
        at_once, dripped = _RAW[path]
        end = time.monotonic() + DRIP_FOR_S
        try:
            self.request.sendall(at_once)
            for byte in dripped:
                if self.server.stop.wait(DRIP_S) or time.monotonic() > end:
                    return
                self.request.sendall(bytes([byte]))
        except OSError:
            return  # the client gave up, as it should


@pytest.fixture
def raw():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Raw)
    server.daemon_threads, server.stop = True, threading.Event()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.stop.set()
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("path", ["/status", "/headers", "/body", "/chunked", "tls"])
def test_a_dripping_server_is_cut_at_the_total_deadline(raw, path):
    url = f"https://127.0.0.1:{raw}/v" if path == "tls" else f"http://127.0.0.1:{raw}{path}"
    t0 = time.monotonic()
    with pytest.raises(SourceError, match="took longer than its deadline"):
        fetch(url, http_allow_hosts=[f"127.0.0.1:{raw}"], http_timeout_s=5.0, http_total_s=TOTAL_S)
    elapsed = time.monotonic() - t0
    assert TOTAL_S <= elapsed <= TOTAL_S + 1, elapsed  # cut on the wall clock, not at a read's timeout


@pytest.mark.parametrize("path", ["/bad-chunk", "/cut-chunk", "/cut-length"])
def test_a_broken_or_short_body_is_a_source_error(raw, path):
    with pytest.raises(SourceError, match=r"cannot fetch .*IncompleteRead"):
        fetch(f"http://127.0.0.1:{raw}{path}", http_allow_hosts=[f"127.0.0.1:{raw}"])


@pytest.mark.parametrize(
    "url, reason",
    [
        ("http://127.0.0.1/v.mp4\r\nX-Injected: 1", "control character"),
        ("http://127.0.0.1/v\n.mp4", "control character"),
        ("http://127.0.0.1/v.mp4\r", "control character"),
        ("http://user:pass@127.0.0.1/v.mp4", "user part"),
        ("http://user:pass@localhost/v.mp4", "user part"),
        ("https://user@127.0.0.1/v.mp4", "user part"),
    ],
)
def test_a_url_with_cr_lf_or_a_user_part_without_a_port_is_a_source_error(url, reason):
    with pytest.raises(SourceError, match=reason):
        fetch(url, http_allow_hosts=["127.0.0.1", "localhost"])
