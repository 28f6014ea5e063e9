"""Egress as a security team asks (issue 53): the address fetched is the address checked. A name is looked up once
(a stub resolver at the ``getaddrinfo`` boundary stands in for DNS), every address it gives is checked, and the
connection goes to a checked address with the Host header, TLS SNI and certificate check on the name. A bare host
allows ports 80 and 443 only; a redirect from https to http is refused unless allowed."""

from __future__ import annotations

import http.server
import ipaddress
import socket
import ssl
import threading
import time

import pytest

from gateway.core.config import SourceSettings
from gateway.core.sources import SourceError, allowed_url, fetch
from gateway.core.sources import downloads as downloads_module
from gateway.core.sources.addresses import special
from tests.support.tls import make_certs


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.hosts.append(self.headers["Host"])
        if self.path == "/down":  # to the plain-HTTP server, same name: a redirect that drops TLS
            self.send_response(302)
            self.send_header("Location", f"http://media.example:{self.server.plain_port}/clip.mp4")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"video")

    def log_message(self, *args):
        return


class _Server(http.server.ThreadingHTTPServer):
    """A loopback server recording every connection it accepts, the Host headers and (over TLS) the SNI names."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.connections: list[tuple] = []
        self.hosts: list[str] = []
        self.sni: list[str | None] = []
        self.plain_port = 0
        if tls is not None:
            tls.sni_callback = lambda _sock, name, _ctx: self.sni.append(name)
            self.socket = tls.wrap_socket(self.socket, server_side=True)

    @property
    def port(self) -> int:
        return self.server_address[1]

    def verify_request(self, request, client_address) -> bool:
        self.connections.append(client_address)
        return True


def _serve(server: _Server):
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def server():
    srv = _serve(_Server())
    yield srv
    srv.shutdown()
    srv.server_close()


class _DNS:
    """``socket.getaddrinfo`` for names in ``answers`` (each a list of addresses, or a callable giving one per
    lookup); any other name fails as an unknown host. Every lookup is recorded; numeric hosts pass through."""

    def __init__(self, real) -> None:
        self.real, self.answers, self.asked = real, {}, []

    def __call__(self, host, port, *args, **kwargs):
        try:
            ipaddress.ip_address(str(host))
            return self.real(host, port, *args, **kwargs)
        except ValueError:
            pass
        self.asked.append(host)
        if host not in self.answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        answer = self.answers[host]
        addresses = answer() if callable(answer) else answer
        out = []
        for a in addresses:
            family = socket.AF_INET6 if ":" in a else socket.AF_INET
            sockaddr = (a, port, 0, 0) if family == socket.AF_INET6 else (a, port)
            out.append((family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", sockaddr))
        return out


@pytest.fixture
def dns(monkeypatch) -> _DNS:
    stub = _DNS(socket.getaddrinfo)
    monkeypatch.setattr(socket, "getaddrinfo", stub)
    return stub


@pytest.fixture
def no_connect(monkeypatch) -> list:
    """Records every connection the fetch would open (and opens none)."""
    attempts: list = []

    def refuse(addresses, port, timeout_s):
        attempts.append((addresses, port))
        raise OSError("connection refused by the test")

    monkeypatch.setattr(downloads_module, "connect", refuse)
    return attempts


SPECIAL_ANSWERS = {
    "loopback": ["127.0.0.1"],
    "link-local": ["169.254.169.254"],  # the cloud metadata service
    "private": ["10.1.2.3"],
    "carrier-grade NAT": ["100.64.0.1"],
    "unspecified": ["0.0.0.0"],
    "multicast": ["224.0.0.1"],
    "documentation": ["192.0.2.10"],
    "reserved": ["240.0.0.1"],
    "one of two": ["8.8.8.8", "127.0.0.1"],  # every address must pass, not only the first
    "IPv6 loopback": ["::1"],
    "IPv4-mapped": ["::ffff:169.254.169.254"],
    "NAT64": ["64:ff9b::a9fe:a9fe"],
    "6to4": ["2002:7f00:1::"],
    "IPv6 link-local": ["fe80::1"],
    "IPv6 unique local": ["fd00::1"],
}


@pytest.mark.parametrize("answer", SPECIAL_ANSWERS.values(), ids=SPECIAL_ANSWERS.keys())
def test_a_listed_name_resolving_to_a_special_address_is_refused_before_any_connection(answer, dns, no_connect):
    dns.answers["media.example"] = answer
    with pytest.raises(SourceError, match=r"'media.example' resolves to .*refused unless the allow-list names"):
        fetch("http://media.example/clip.mp4", http_allow_hosts=["media.example"])
    assert no_connect == [] and dns.asked == ["media.example"]


def test_loopback_and_metadata_answers_reach_no_server_and_a_listed_network_lets_one_through(server, dns):
    port = server.port
    for answer in (["127.0.0.1"], ["169.254.169.254"], ["::ffff:127.0.0.1"]):
        dns.answers["media.example"] = answer
        with pytest.raises(SourceError, match="resolves to"):
            fetch(f"http://media.example:{port}/clip.mp4", http_allow_hosts=[f"media.example:{port}"])
    assert server.connections == []  # the test server saw nothing
    dns.answers["media.example"] = ["127.0.0.1"]
    listed = [f"media.example:{port}", "127.0.0.0/8"]  # the operator says loopback is meant
    assert fetch(f"http://media.example:{port}/clip.mp4", http_allow_hosts=listed) == b"video"
    assert len(server.connections) == 1 and server.hosts == [f"media.example:{port}"]  # Host: the name


def test_a_name_is_looked_up_once_and_its_checked_address_connected_to_so_rebinding_reaches_nothing(server, dns):
    """A rebinding resolver answers a listed address first and the metadata address after: the fetch looks up
    once and connects to what it checked (http.client would have looked up again when connecting)."""
    answers = iter([["127.0.0.1"], ["169.254.169.254"]])
    dns.answers["media.example"] = lambda: next(answers)
    listed = [f"media.example:{server.port}", "127.0.0.1/32"]
    assert fetch(f"http://media.example:{server.port}/clip.mp4", http_allow_hosts=listed) == b"video"
    assert dns.asked == ["media.example"] and len(server.connections) == 1
    with pytest.raises(SourceError, match=r"resolves to 169\.254\.169\.254 \(link-local"):  # the next fetch's
        fetch(f"http://media.example:{server.port}/clip.mp4", http_allow_hosts=listed)
    assert len(server.connections) == 1


def test_a_lookup_that_does_not_answer_ends_at_the_timeout(dns, no_connect):
    release = threading.Event()
    dns.answers["slow.example"] = lambda: release.wait(30) and ["8.8.8.8"]
    t0 = time.monotonic()
    try:
        with pytest.raises(SourceError, match=r"lookup of host 'slow\.example' took longer than 0\.5 s"):
            fetch("http://slow.example/v.mp4", http_allow_hosts=["slow.example"], http_timeout_s=0.5)
    finally:
        release.set()
    assert time.monotonic() - t0 < 5 and no_connect == []


@pytest.mark.parametrize(
    "address",
    ["127.0.0.2", "169.254.169.254", "10.0.0.1", "172.16.0.1", "192.168.1.1", "100.100.100.200", "0.0.0.0",
     "255.255.255.255", "224.0.0.251", "198.51.100.1", "203.0.113.9", "198.18.0.1", "::", "::1", "fe80::1",
     "fc00::1", "ff02::1", "2001:db8::1", "::ffff:10.0.0.1", "64:ff9b::7f00:1", "2002:a9fe:a9fe::",
     "2001:0:4136:e378:8000:63bf:3fff:fdd2"],  # (the last: Teredo, whose client is 192.0.2.45)
)  # fmt: skip
def test_special_ranges_are_named_in_every_form(address):
    assert special(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111"])
def test_global_addresses_pass(address):
    assert special(ipaddress.ip_address(address)) is None


def test_a_bare_host_allows_ports_80_and_443_only(server, dns):
    assert allowed_url("http://media.example/v", ["media.example"]).port == 80
    assert allowed_url("https://media.example/v", ["media.example"]).port == 443
    with pytest.raises(SourceError, match=r"port 8080 of host 'media\.example' is not in the allow-list"):
        allowed_url("http://media.example:8080/v", ["media.example"])
    assert allowed_url("http://media.example:8080/v", ["media.example:8080"]).port == 8080
    with pytest.raises(SourceError, match=r"port 80 of host 'media\.example'"):  # a port entry is that port only
        allowed_url("http://media.example/v", ["media.example:8080"])
    assert allowed_url("https://[2001:db8::7]:8443/v", ["[2001:db8::7]:8443"]).port == 8443
    with pytest.raises(SourceError, match="port 8443"):
        allowed_url("https://[2001:db8::7]:8443/v", ["2001:db8::7"])
    # an allowed address on a port the list does not name: refused before any connection
    with pytest.raises(SourceError, match=f"port {server.port} of host '127.0.0.1'"):
        fetch(f"http://127.0.0.1:{server.port}/clip.mp4", http_allow_hosts=["127.0.0.1"])
    assert server.connections == [] and dns.asked == []


@pytest.mark.parametrize("entry", ["media.example:0", "media.example:70000", "media.example:x", "10.0.0.1/8", "a b"])
def test_a_malformed_entry_is_a_configuration_error(entry):
    with pytest.raises(ValueError, match="allow-list entry"):
        SourceSettings(http_allow_hosts=[entry])


@pytest.fixture
def tls_pair(tmp_path, dns, monkeypatch):
    """A TLS server with a certificate for media.example (signed by a CA made here and trusted by the fetch) and
    a plain-HTTP server; media.example and other.example resolve to loopback."""
    certs = make_certs(tmp_path / "certs", ["media.example"])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.cert, certs.key)
    secure, plain = _serve(_Server(context)), _serve(_Server())
    secure.plain_port = plain.port
    trusting = ssl.create_default_context

    monkeypatch.setattr(ssl, "create_default_context", lambda *a, **k: trusting(cafile=str(certs.ca)))
    dns.answers.update({"media.example": ["127.0.0.1"], "other.example": ["127.0.0.1"]})
    yield secure, plain
    for s in (secure, plain):
        s.shutdown()
        s.server_close()


def test_tls_goes_to_the_checked_address_with_sni_and_verification_on_the_name(tls_pair):
    secure, _ = tls_pair
    listed = [f"media.example:{secure.port}", f"other.example:{secure.port}", "127.0.0.1/32"]
    assert fetch(f"https://media.example:{secure.port}/clip.mp4", http_allow_hosts=listed) == b"video"
    assert secure.sni == ["media.example"] and secure.hosts == [f"media.example:{secure.port}"]
    with pytest.raises(SourceError, match="CERTIFICATE_VERIFY_FAILED"):  # the certificate is not other.example's
        fetch(f"https://other.example:{secure.port}/clip.mp4", http_allow_hosts=listed)
    assert secure.sni == ["media.example", "other.example"]


def test_a_redirect_from_https_to_http_is_refused_unless_allowed(tls_pair):
    secure, plain = tls_pair
    listed = [f"media.example:{secure.port}", f"media.example:{plain.port}", "127.0.0.1/32"]
    with pytest.raises(SourceError, match="refused: it drops TLS"):
        fetch(f"https://media.example:{secure.port}/down", http_allow_hosts=listed)
    assert plain.connections == []
    got = fetch(f"https://media.example:{secure.port}/down", http_allow_hosts=listed, http_redirect_to_http=True)
    assert got == b"video" and plain.hosts == [f"media.example:{plain.port}"]
    settings = SourceSettings(http_allow_hosts=listed)
    assert settings.http_redirect_to_http is False  # refused by default
