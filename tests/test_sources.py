"""Fetching video bytes: file roots, and http(s) only to allow-listed hosts, with the size limit (loopback server)."""

from __future__ import annotations

import http.server
import threading
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


def test_http_fetch_needs_the_host_on_the_allow_list(http_root):
    assert fetch(f"{http_root}/clip.mp4", http_allow_hosts=["127.0.0.1"]) == b"x" * 5000
    with pytest.raises(SourceError, match="not in the allow-list"):
        fetch(f"{http_root}/clip.mp4", http_allow_hosts=["cdn.example.internal"])
    with pytest.raises(SourceError, match="not in the allow-list"):
        fetch(f"{http_root}/clip.mp4")  # no allow-list: no host at all


def test_http_fetch_enforces_the_size_limit_and_reports_failures(http_root):
    with pytest.raises(LimitExceeded, match="limit is 1000"):
        fetch(f"{http_root}/clip.mp4", http_allow_hosts=["127.0.0.1"], max_bytes=1000)
    with pytest.raises(SourceError, match="cannot fetch"):
        fetch(f"{http_root}/missing.mp4", http_allow_hosts=["127.0.0.1"])


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
        fetch(f"{hostile}/hop", http_allow_hosts=["127.0.0.1"])
    assert fetch(f"{hostile}/stay", http_allow_hosts=["127.0.0.1"]) == b"video"
    with pytest.raises(LimitExceeded, match="100000-byte limit"):
        fetch(f"{hostile}/endless", http_allow_hosts=["127.0.0.1"], max_bytes=100_000)
