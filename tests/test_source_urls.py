"""Source URLs are parsed once, and that parse is what the allow-list checks and what the fetch connects to: a user
part, a control character, a bad port or a numeric spelling of a loopback address never reaches DNS or the server.
Video messages have bounded string fields and unique keys; the rest is dead-lettered (real broker) and no score
event outgrows its bound."""

from __future__ import annotations

import http.server
import ipaddress
import json
import socket
import threading

import pytest

from gateway import bus
from gateway.core.config import SourceSettings
from gateway.core.messages import (
    InvalidMessage,
    VideoEvent,
    inline_headers,
    parse_video_message,
    score_event_bound,
)
from gateway.core.sources import SourceError, fetch, parse_source_url
from tests.support.gateway import _config
from tests.support.media import make_clip
from tests.support.streaming import read_topics, start_gateway

LOOPBACK = ipaddress.IPv4Address("127.0.0.1")
NAMES_ONLY = ["localhost", "allowed.example"]


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.hosts.append(self.headers["Host"])
        port = self.server.server_address[1]
        if self.path in ("/to-user-part", "/relative"):
            self.send_response(302)
            where = f"http://allowed.example@127.0.0.1:{port}/clip.mp4" if self.path == "/to-user-part" else "clip.mp4"
            self.send_header("Location", where)
            self.end_headers()
        elif self.path == "/clip.mp4":
            self.send_response(200)
            self.send_header("Content-Length", "5")
            self.end_headers()
            self.wfile.write(b"video")
        else:
            self.send_error(404)

    def log_message(self, *args):
        return


class _Recording(http.server.ThreadingHTTPServer):
    """A loopback server that records every connection it accepts (in order, on its one accepting thread) and the
    Host header of every request."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.connections: list[tuple] = []
        self.hosts: list[str] = []

    def verify_request(self, request, client_address) -> bool:
        self.connections.append(client_address)
        return True


@pytest.fixture
def server():
    srv = _Recording()
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


class _Resolver:
    """Stands in for ``socket.getaddrinfo`` in this (the fetching) thread and the fetch's lookup thread: every
    lookup is recorded, and one of a host not permitted fails the test (an AssertionError, which the lookup thread
    hands back to the fetch as it is and no fetch code catches). Another thread's
    lookup (a Kafka client an earlier test left redialling its stopped broker) is not the fetch's: passed on."""

    def __init__(self, real) -> None:
        self.real, self.asked, self.permitted = real, [], set()
        self.thread = threading.get_ident()

    def __call__(self, host, port, *args, **kwargs):
        fetching = threading.get_ident() == self.thread or threading.current_thread().name == "lastmile-dns"
        if not fetching:  # (the fetch looks names up on a thread of its own, to bound the wait)
            return self.real(host, port, *args, **kwargs)
        self.asked.append(host)
        assert host in self.permitted, f"unexpected address lookup of {host!r}"
        return self.real(host, port, *args, **kwargs)


@pytest.fixture
def resolver(monkeypatch) -> _Resolver:
    fake = _Resolver(socket.getaddrinfo)
    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return fake


def _control(server, resolver) -> None:
    """One allowed fetch after the refused ones. The server accepts connections in order, so once this one is
    answered, any connection a refused fetch had opened would already be in ``server.connections``."""
    port = server.server_address[1]
    assert fetch(f"http://127.0.0.1:{port}/clip.mp4", http_allow_hosts=[f"127.0.0.1:{port}"]) == b"video"


def test_a_user_part_or_a_malformed_url_is_refused_before_any_lookup_or_connection(server, resolver):
    port = server.server_address[1]
    refused = {
        f"http://allowed.example@127.0.0.1:{port}/x.mp4": "user part",
        f"http://allowed.example:{port}@127.0.0.1:{port}/x.mp4": "user part",
        f"http://127.0.0.1:{port}@allowed.example/x.mp4": "user part",
        f"http://allowed.example\\@127.0.0.1:{port}/x.mp4": "user part",
        f"http://allowed.example\n@127.0.0.1:{port}/x.mp4": "control character",
        f"http://127.0.0.1:{port}/x\r\nHost: allowed.example": "control character",
        f"http://allowed.example:{port}x/x.mp4": "unparseable port",
        "http://allowed.example:99999/x.mp4": "unparseable port",
        "http://allowed.example:0/x.mp4": "unparseable port",
        f"http://allowed.example:{port}:1/x.mp4": "unparseable port",
        "http://allowed.example:+80/x.mp4": "unparseable port",
        "http:///x.mp4": "invalid host",
        "http://[::1/x.mp4": "unparseable URL",
    }
    both = ["allowed.example", f"allowed.example:{port}", f"127.0.0.1:{port}"]
    for allow in (["allowed.example"], both):  # even with both hosts on the list
        for url, reason in refused.items():
            with pytest.raises(SourceError, match=reason):
                fetch(url, http_allow_hosts=allow)
    assert resolver.asked == []
    _control(server, resolver)
    assert len(server.connections) == 1 and server.hosts == [f"127.0.0.1:{port}"]


def test_an_allowed_host_redirecting_to_a_user_part_url_is_refused_at_the_redirect(server, resolver):
    port = server.server_address[1]
    # the first hop is allowed and made (to the address itself: no lookup); the redirect must go nowhere
    with pytest.raises(SourceError, match=r"redirect from .* refused: .*user part"):
        fetch(f"http://127.0.0.1:{port}/to-user-part", http_allow_hosts=[f"127.0.0.1:{port}", "allowed.example"])
    assert resolver.asked == []  # never "allowed.example@127.0.0.1", never "allowed.example"
    _control(server, resolver)
    assert len(server.connections) == 2 and server.hosts == [f"127.0.0.1:{port}"] * 2
    assert fetch(f"http://127.0.0.1:{port}/relative", http_allow_hosts=[f"127.0.0.1:{port}"]) == b"video"


LOOPBACK_SPELLINGS = [
    "2130706433",
    "0x7f000001",
    "0X7F000001",
    "0x7f.0.0.1",
    "017700000001",
    "0177.0.0.01",
    "127.1",
    "127.0.0.1.",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[::1]",
]


def test_numeric_spellings_of_loopback_never_pass_a_list_of_names(server, resolver):
    port = server.server_address[1]
    for host in [*LOOPBACK_SPELLINGS, "127.0.0.1"]:
        url = f"http://{host}:{port}/clip.mp4"
        assert parse_source_url(url).host in (LOOPBACK, ipaddress.IPv6Address("::1")), host  # an address
        with pytest.raises(SourceError, match="not in the allow-list"):
            fetch(url, http_allow_hosts=NAMES_ONLY)
    assert resolver.asked == []
    _control(server, resolver)
    assert len(server.connections) == 1


def test_numeric_spellings_match_an_address_entry_and_connect_to_that_address(server, resolver):
    port = server.server_address[1]
    spellings = [h for h in LOOPBACK_SPELLINGS if h != "[::1]"]
    for host in spellings:
        assert fetch(f"http://{host}:{port}/clip.mp4", http_allow_hosts=[f"0x7f.1:{port}"]) == b"video", host
    assert resolver.asked == []  # connected to the parsed address, never looked up
    assert len(server.connections) == len(spellings)
    assert server.hosts == [f"127.0.0.1:{port}"] * len(spellings)  # and said so in the Host header


@pytest.mark.parametrize("host", ["256.0.0.1", "1.2.3.4.5", "08", "0x100000000", "4294967296", "foo.123", "1.0xg.1"])
def test_a_number_like_host_that_is_no_address_is_refused(host):
    with pytest.raises(SourceError, match="no IPv4 address"):
        parse_source_url(f"http://{host}/v.mp4")
    with pytest.raises(ValueError, match="no IPv4 address"):
        SourceSettings(http_allow_hosts=[host])


def test_host_names_compare_without_case_or_trailing_dot(server):
    port = server.server_address[1]
    loopback = ["127.0.0.0/8", "::1/128"]  # the name resolves to loopback: refused unless a network names it
    for allow in ([f"LOCALHOST:{port}", *loopback], [f"localhost.:{port}", *loopback]):
        for host in ("localhost", "localhost.", "LocalHost"):
            assert fetch(f"http://{host}:{port}/clip.mp4", http_allow_hosts=allow) == b"video"
    assert server.hosts == [f"localhost:{port}"] * 6
    with pytest.raises(SourceError, match="not in the allow-list"):
        fetch(f"http://localhost.example:{port}/clip.mp4", http_allow_hosts=[f"localhost:{port}", *loopback])


def test_https_connects_to_the_parsed_host_and_reports_a_failed_handshake(server, resolver):
    port = server.server_address[1]
    with pytest.raises(SourceError, match="cannot fetch"):  # the server speaks plain HTTP: no TLS handshake
        fetch(f"https://0x7f000001:{port}/clip.mp4", http_allow_hosts=[f"127.0.0.1:{port}"])
    assert resolver.asked == [] and len(server.connections) == 1


def test_the_parse_is_what_the_request_uses():
    url = parse_source_url("HTTP://Media.Example.:8080/a/vid\u00e9%20x.mp4?sig=1#frag")
    assert (url.scheme, url.host, url.port) == ("http", "media.example", 8080)
    assert url.target == "/a/vid%C3%A9%20x.mp4?sig=1" and url.netloc == "media.example:8080"
    six = parse_source_url("https://[0:0::1]/v")
    assert (six.connect_host, six.port, six.netloc, str(six)) == ("::1", 443, "[::1]", "https://[::1]/v")


# -- video messages ----------------------------------------------------------------------------------------------
def test_a_key_or_header_given_twice_is_refused():
    for value in (
        b'{"video_id": "a", "uri": "u", "video_id": "b"}',
        b'{"video_id": "a", "uri": "u", "video\\u005fid": "b"}',
    ):
        with pytest.raises(InvalidMessage, match="duplicate key 'video_id'"):
            parse_video_message(value, None)
    headers = [*inline_headers(VideoEvent(video_id="a")), ("lastmile-video-id", b"b")]
    with pytest.raises(InvalidMessage, match="'lastmile-video-id' given twice"):
        parse_video_message(b"bytes", headers)


@pytest.mark.parametrize("field", ["source", "anchor_id", "tenant", "uri"])
def test_every_string_field_is_bounded_in_utf8_bytes(field):
    limit = 2000 if field == "uri" else 300
    at_bound = {"video_id": "v", "uri": "file:///v.mp4", field: "\u00e9" * (limit // 2)}  # 2 bytes each
    event, _ = parse_video_message(json.dumps(at_bound).encode(), None, max_field_bytes=300, max_uri_bytes=2000)
    assert getattr(event, field) == at_bound[field]
    over = {**at_bound, field: at_bound[field] + "x"}
    with pytest.raises(InvalidMessage, match=f"field '{field}' is longer than {limit} bytes"):
        parse_video_message(json.dumps(over).encode(), None, max_field_bytes=300, max_uri_bytes=2000)
    if field != "uri":  # an inline video's fields come as headers: the same bound
        headers = inline_headers(VideoEvent(video_id="v", **{field: over[field]}))
        with pytest.raises(InvalidMessage, match=f"field '{field}'"):
            parse_video_message(b"bytes", headers, max_field_bytes=300)


def test_video_id_is_bounded_by_both_its_schema_and_the_setting():
    with pytest.raises(InvalidMessage, match="video_id"):
        parse_video_message(json.dumps({"video_id": "v" * 257, "uri": "u"}).encode(), None)
    with pytest.raises(InvalidMessage, match="field 'video_id' is longer than 64 bytes"):
        parse_video_message(json.dumps({"video_id": "v" * 65, "uri": "u"}).encode(), None, max_field_bytes=64)


# -- through the real broker and gateway --------------------------------------------------------------------------


def test_overlong_fields_and_duplicate_keys_are_dead_lettered_and_score_events_stay_bounded(broker, tmp_path):
    cfg = _config(broker, tmp_path, "bounds", conditions="original", detectors="d3_px", workers=1)
    clip = tmp_path / "clip.mp4"
    clip.write_bytes(make_clip(tmp_path, "made.mp4"))
    n = cfg.messages.max_field_bytes
    # the worst case for the bound: every copied field at its limit, in characters JSON escapes to 6 bytes each
    worst = {"video_id": "w" + "\x01" * 255, "source": "\x02" * n, "anchor_id": "\x03" * n}
    good = VideoEvent(**worst, uri=clip.as_uri())
    failing = VideoEvent(**{**worst, "video_id": "f" + "\x01" * 255}, uri="file:///" + "x" * 8000)  # SourceError
    raw = {
        "10 MB source": json.dumps({"video_id": "big", "uri": clip.as_uri(), "source": "s" * 10_000_000}).encode(),
        "duplicate key": json.dumps({"video_id": "dup", "uri": clip.as_uri()}).encode()[:-1] + b', "video_id": "x"}',
    }
    producer = bus.producer(cfg.kafka)
    topic = cfg.kafka.input_topic
    for value in raw.values():
        producer.send(topic, value=value)
    overlong = inline_headers(VideoEvent(video_id="big-inline", source="s" * (n + 1)))
    producer.send(topic, key=b"big-inline", value=b"\x00" * 100, headers=overlong)
    for event in (good, failing):
        producer.send(topic, key=event.video_id.encode(), value=event.model_dump_json().encode())
    producer.flush()
    gw, thread = start_gateway(cfg)
    k = cfg.kafka
    got = read_topics(
        k.bootstrap, [k.output_topic, k.dlq], lambda g: len(g[k.dlq]) >= 4 and len(g[k.output_topic]) >= 2
    )
    gw.stop_event.set()
    thread.join(90)
    letters = [(m.value, dict(m.headers)) for m in got[k.dlq]]
    assert len(letters) == 4  # each once
    for value, reason in (
        (raw["10 MB source"], b"field 'source' is longer than 1024 bytes"),
        (raw["duplicate key"], b"duplicate key 'video_id'"),
        (b"\x00" * 100, b"field 'source' is longer than 1024 bytes"),
    ):
        (found,) = [h for v, h in letters if v == value]
        assert found["lastmile-error-class"] == b"InvalidMessage" and reason in found["lastmile-error-message"]
    assert [h["lastmile-error-class"] for _, h in letters].count(b"SourceError") == 1  # the failing one
    events = [json.loads(m.value) for m in got[k.output_topic]]
    assert {e["video_id"] for e in events} == {good.video_id, failing.video_id}  # none of the dead-lettered ones
    assert {e["error_class"] for e in events} == {None, "SourceError"}
    bound = score_event_bound(n)
    sizes = [len(m.value) for m in got[k.output_topic]]
    assert max(sizes) <= bound and min(sizes) > 6 * 2 * n, (sizes, bound)  # the worst case, and within its bound
