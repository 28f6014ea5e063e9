"""Real object stores for the tests: moto's S3 server (``moto[server]``), Azurite (Microsoft's Azure Blob emulator,
installed from npm into ``.cache/azurite`` by tests/run.sh) and gcp-storage-emulator (the GCS JSON API, from PyPI),
each started on a free loopback port and stopped with the test; and a proxy in front of any of them that answers
``503 SlowDown`` first, or lies in its HEAD answers, and counts the body bytes it passes on."""

from __future__ import annotations

import contextlib
import http.client
import http.server
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.tools import IN_CI

REPO = Path(__file__).resolve().parents[2]
# Azurite's well-known development account (its documentation's own key): a credential all the same, so the
# planted-secret tests look for it too
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
S3_ENV = {"AWS_ACCESS_KEY_ID": "AKIATESTING", "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, process: subprocess.Popen, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        assert process.poll() is None, f"{what} exited with {process.returncode}"
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except urllib.error.HTTPError:
            return  # (it answered)
        except OSError:
            assert time.monotonic() < deadline, f"{what} did not answer at {url}"
            time.sleep(0.1)  # the polling interval of a start-up, not a synchronisation


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def moto_s3(log: Path, **env: str) -> Iterator[str]:
    """moto's S3 server: its endpoint URL. ``env``: moto's own settings (``INITIAL_NO_AUTH_ACTION_COUNT=0``
    makes it check credentials)."""
    port = free_port()
    cmd = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    with log.open("wb") as out:
        process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env})
    try:
        _wait_http(f"http://127.0.0.1:{port}/moto-api/", process, "moto's S3 server")
        yield f"http://127.0.0.1:{port}"
    finally:
        _stop(process)


def azurite_binary() -> str:
    """Azurite's blob server: .cache/azurite (tests/run.sh installs it) or PATH; a skip here, a failure in CI."""
    import pytest

    local = REPO / ".cache/azurite/node_modules/.bin/azurite-blob"
    found = str(local) if local.exists() else shutil.which("azurite-blob")
    if found is None:
        if IN_CI:
            pytest.fail("Azurite is required in CI (tests/run.sh installs it with npm into .cache/azurite)")
        pytest.skip("Azurite not installed (tests/run.sh installs it with npm into .cache/azurite)")
    return found


@contextlib.contextmanager
def azurite(folder: Path) -> Iterator[str]:
    """Azurite's blob service: the connection string of its development account."""
    port = free_port()
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [azurite_binary(), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", str(folder)]
    cmd += ["--skipApiVersionCheck", "--loose", "--silent", "--disableProductStyleUrl"]
    with (folder / "azurite.log").open("wb") as out:
        process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_http(f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}?comp=list", process, "Azurite")
        yield azurite_connection(f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}")
    finally:
        _stop(process)


@contextlib.contextmanager
def gcs_emulator(log: Path) -> Iterator[str]:
    """gcp-storage-emulator (a server of the GCS JSON API, from PyPI), in memory: its URL, for
    ``STORAGE_EMULATOR_HOST``."""
    port = free_port()
    cmd = [sys.executable, "-m", "gcp_storage_emulator", "start", "--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as out:
        process = subprocess.Popen([*cmd, "--in-memory"], stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_http(f"http://127.0.0.1:{port}/storage/v1/b", process, "the GCS emulator")
        yield f"http://127.0.0.1:{port}"
    finally:
        _stop(process)


def azurite_connection(endpoint: str, key: str = AZURITE_KEY) -> str:
    return f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={key};BlobEndpoint={endpoint};"


@contextlib.contextmanager
def serving(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    """An HTTP server of the test's own on a free loopback port, on a thread, stopped on exit: its URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)


@dataclass
class Proxy:
    """An HTTP proxy to ``upstream`` (``http://host:port``) on a thread: the first ``fail`` requests get
    ``503 SlowDown``; ``head_length`` replaces the size a HEAD answer gives; ``body_bytes`` counts what it passed
    on of GET answers' bodies."""

    upstream: str
    fail: int = 0
    head_length: int | None = None
    body_bytes: int = 0
    requests: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._serving = serving(_handler(self))
        self.url = ""

    def __enter__(self) -> Proxy:
        self.url = self._serving.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._serving.__exit__(None, None, None)

    def take(self, method: str) -> bool:
        """Record a request; whether it is answered 503."""
        with self._lock:
            self.requests.append(method)
            if self.fail > 0:
                self.fail -= 1
                return True
            return False

    def count(self, n: int) -> None:
        with self._lock:
            self.body_bytes += n


def _handler(proxy: Proxy) -> type[http.server.BaseHTTPRequestHandler]:
    host, port = proxy.upstream.removeprefix("http://").split(":")

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            if proxy.take(self.command):
                self.send_response(503, "Slow Down")
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(SLOW_DOWN)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(SLOW_DOWN)
                return
            conn = http.client.HTTPConnection(host, int(port), timeout=60)
            conn.request(self.command, self.path, body=body, headers=dict(self.headers))
            resp = conn.getresponse()
            self.send_response(resp.status, resp.reason)
            for k, v in resp.getheaders():
                if k.lower() == "content-length" and self.command == "HEAD" and proxy.head_length is not None:
                    v = str(proxy.head_length)
                if k.lower() not in ("transfer-encoding", "connection"):
                    self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                try:
                    while chunk := resp.read(1 << 16):
                        proxy.count(len(chunk))
                        self.wfile.write(chunk)
                except OSError:  # the client closed the connection (it read what it needed)
                    pass
            conn.close()

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _any

    return Handler
