"""Fetching video bytes: file roots, and http(s) only to allow-listed hosts, with the size limit (loopback server)."""

from __future__ import annotations

import http.server
import threading
from functools import partial

import pytest

from gateway.core.sources import SourceError, fetch
from transforms.errors import LimitExceeded


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
        fetch((inside / "a.mp4").as_uri(), max_bytes=0)
    with pytest.raises(SourceError, match="unsupported URI scheme"):
        fetch("ftp://host/v.mp4")
