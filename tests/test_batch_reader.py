"""The reader that fetches on its own sockets (gateway/bus/batch_reader.py) and parses record batches itself
(gateway/bus/batches.py): the same records as kafka-python's decoder and fetcher, byte for byte, on every batch
form (headers with null values, null keys and values, compressed, log-append time, control batches, a reply cut
mid-batch, a corrupt batch), an oversize batch by reference, and a lost connection costing no record."""

from __future__ import annotations

import selectors
import struct
import time

import pytest
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

from gateway import bus
from gateway.bus import batch_reader, batches, fetch_link
from gateway.bus import links as bus_links
from gateway.bus.bulk import Loader
from gateway.core.config import KafkaSettings
from tests.streaming import require_broker

GZIP, CONTROL, LOG_APPEND_TIME = 1, 0x20, 0x08
T0 = 1_700_000_000_000


def _batch(base: int, records: list[tuple], compression: int = 0, attributes: int = 0) -> bytes:
    """A batch from kafka-python's own encoder (offsets from ``base``), with extra attribute bits set afterwards
    (its CRC then recomputed)."""
    builder = DefaultRecordBatchBuilder(2, compression, False, -1, -1, -1, 1 << 24)
    for i, (key, value, headers) in enumerate(records):
        builder.append(i, T0 + 7 * i, key, value, headers)
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base)
    if attributes:
        (old,) = struct.unpack_from(">h", data, 21)
        struct.pack_into(">h", data, 21, old | attributes)
        from crc32c import crc32c

        struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def _theirs(data: bytes, start: int = 0) -> list[tuple]:
    out, records = [], MemoryRecords(data)
    while (b := records.next_batch()) is not None:
        if not b.is_control_batch:
            out += [(m.offset, m.timestamp, m.key, m.value, tuple(m.headers)) for m in b if m.offset >= start]
    return out


def _ours(data: bytes, start: int = 0) -> list[tuple]:
    parsed = batches.parse("t", 3, data, start)
    assert all(r.topic == "t" and r.partition == 3 for r in parsed.records)
    return [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in parsed.records]


RECORDS = [
    (b"k", b"v" * 300, []),
    (None, b"no key", [("x-null", None), ("x", b"1"), ("\u00e9t\u00e9", b"")]),
    (b"tombstone", None, []),
    (b"", b"", [("h", b"x" * 200)]),
    (b"long", b"y" * 70_000, []),  # three-byte varints
]


def test_every_batch_form_parses_as_kafka_pythons_decoder_reads_it():
    plain = _batch(0, RECORDS)
    gzip = _batch(len(RECORDS), RECORDS, compression=GZIP)
    appended = _batch(2 * len(RECORDS), RECORDS[:2], attributes=LOG_APPEND_TIME)
    data = plain + gzip + appended
    assert _ours(data) == _theirs(data) and len(_ours(data)) == 2 * len(RECORDS) + 2
    assert {t for _, t, *_ in _ours(appended)} == {T0 + 7}  # log-append time: the batch's max timestamp
    for start in (0, 3, len(RECORDS) + 2, 2 * len(RECORDS) + 1):  # a fetch from mid-batch
        assert _ours(data, start) == _theirs(data, start)
    assert batches.parse("t", 3, data, 0).next_offset == 2 * len(RECORDS) + 2


def test_a_control_batch_is_passed_and_a_batch_cut_short_is_left_for_the_next_fetch():
    marker = _batch(5, [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", [])], attributes=CONTROL)
    data = _batch(0, RECORDS) + marker
    parsed = batches.parse("t", 3, data, 0)
    assert [r.offset for r in parsed.records] == list(range(5)) and parsed.next_offset == 6
    cut = batches.parse("t", 3, data + _batch(6, RECORDS)[:-10], 0)
    assert cut.next_offset == 6 and len(cut.records) == 5


def test_a_corrupt_batch_is_refused_record_by_record_and_the_next_one_read():
    bad = bytearray(_batch(0, RECORDS[:3]))
    bad[-5] ^= 0xFF  # a byte of the last record: the CRC no longer matches
    parsed = batches.parse("t", 3, bytes(bad) + _batch(3, RECORDS[:2]), 1)
    assert [type(r).__name__ for r in parsed.records] == ["UnreadableRecord"] * 2 + ["Record"] * 2
    assert [r.offset for r in parsed.records] == [1, 2, 3, 4] and "CRC-32C" in parsed.records[0].reason
    assert parsed.next_offset == 5


def test_a_record_overrunning_its_batch_is_refused_even_with_a_good_crc():
    data = bytearray(_batch(0, RECORDS[:1]))
    (count,) = struct.unpack_from(">i", data, 57)
    struct.pack_into(">i", data, 57, count + 1)  # says two records, holds one
    from crc32c import crc32c

    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    (record,) = batches.parse("t", 3, bytes(data), 0).records
    assert isinstance(record, bus.UnreadableRecord)


# -- against the real broker --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def broker():
    require_broker()
    with bus.start_broker() as b:
        yield b


def _topic(broker, name: str, **extra) -> KafkaSettings:
    k = KafkaSettings(bootstrap=broker.bootstrap, input_topic=name, **extra)
    bus.ensure_topics(k, partitions=2)
    return k


def _read_all(reader, k: KafkaSettings, n: int, timeout_s: float = 30) -> list:
    parts = [bus.Partition(k.input_topic, p) for p in (0, 1)]
    reader.assign(parts)
    reader.seek_to_beginning(*parts)
    got, deadline = [], time.monotonic() + timeout_s
    while len(got) < n and time.monotonic() < deadline:
        got += reader.poll(500, 97)
    assert {p: reader.position(p) for p in parts} == reader.end_offsets(parts)
    reader.close()
    return got


def test_the_reader_hands_out_what_kafka_pythons_fetcher_does(broker):
    k = _topic(broker, "same-records")
    with Loader(k.bootstrap) as loader:  # plain, compressed and log-append-time batches on both partitions
        for p in (0, 1):
            for _ in range(3):
                loader.append(k.input_topic, p, _batch(0, RECORDS))
                loader.append(k.input_topic, p, _batch(0, RECORDS, compression=GZIP))
    producer = bus.producer(k)
    for i in range(200):
        producer.send_and_wait(k.input_topic, b"%d" % i, key=b"k", partition=i % 2, headers=[("n", b"%d" % i)])
    producer.close()
    n = 2 * 6 * len(RECORDS) + 200
    ours = _read_all(bus.reader(k), k, n)
    theirs = _read_all(bus.client_reader(k), k, n)
    assert isinstance(bus.reader(k), bus.BatchReader)
    assert len(ours) == n and sorted(ours, key=_key) == sorted(theirs, key=_key)


def _key(r) -> tuple:
    return (r.partition, r.offset)


def test_an_oversize_batch_comes_by_reference_and_the_records_after_it_are_read(broker):
    k = _topic(broker, "over", max_message_bytes=64 * 1024)
    with Loader(k.bootstrap) as loader:
        loader.append(k.input_topic, 0, _batch(0, [(b"a", b"small", [])]))
        loader.append(k.input_topic, 0, _batch(0, [(b"b", b"x" * 200_000, []), (b"c", b"y" * 200_000, [])]))
        loader.append(k.input_topic, 0, _batch(0, [(b"d", b"after", [])]))
    got = _read_all(bus.reader(k), k, 4)
    assert [type(r).__name__ for r in got] == ["Record", "OversizeRecord", "OversizeRecord", "Record"]
    assert [r.offset for r in got] == [0, 1, 2, 3] and got[-1].value == b"after"
    assert got[1].size > 400_000 and got[1].limit == 64 * 1024


def test_a_connection_lost_mid_stream_loses_and_repeats_no_record(broker, monkeypatch):
    monkeypatch.setattr(batch_reader, "REDIAL_S", 0.05)
    k = _topic(broker, "cut")
    with Loader(k.bootstrap, batch_bytes=4096) as loader:
        loader.load(k.input_topic, ((i % 2, b"k", b"%d" % i + b"z" * 500) for i in range(3000)), T0)
    reader = bus.reader(k)
    parts = [bus.Partition(k.input_topic, p) for p in (0, 1)]
    reader.assign(parts)
    reader.seek_to_beginning(*parts)
    got, cuts, deadline = [], 0, time.monotonic() + 60
    while len(got) < 3000 and time.monotonic() < deadline:
        got += reader.poll(500, 50)
        links = [link for link in reader._links.by_address.values() if link.asked]
        if links and cuts < 5:  # hang up while a fetch is in flight, as a restarted broker would
            links[0].sock.shutdown(2)
            cuts += 1
    reader.close()
    assert cuts == 5
    assert sorted(_key(r) for r in got) == [(p, o) for p in (0, 1) for o in range(1500)]


def _garbled(reply: bytes, how: str) -> bytes:
    if how == "another request's":
        return struct.pack(">i", struct.unpack_from(">i", reply)[0] ^ 0x55) + reply[4:]
    if how == "cut short":  # a record set's size now overruns the reply
        return reply[: len(reply) // 2]
    if how == "bad topic name":  # the first topic's name length
        return reply[:12] + struct.pack(">h", -7) + reply[14:]
    return reply[:8] + struct.pack(">i", 1 << 30)  # "no topics": a topic count with nothing behind it


def test_a_garbled_fetch_reply_drops_its_connection_and_loses_or_repeats_no_record(broker, monkeypatch):
    """A reply to another request (its correlation id), or one whose lengths overrun it, never raises out of poll
    (a struct.error there had stopped the monitor's reader): the link is dropped and its partitions fetched again
    from where they were."""
    monkeypatch.setattr(batch_reader, "REDIAL_S", 0.05)
    k = _topic(broker, "garbled")
    with Loader(k.bootstrap, batch_bytes=4096) as loader:
        loader.load(k.input_topic, ((i % 2, b"k", b"%d" % i + b"z" * 300) for i in range(2000)), T0)
    ways = ["another request's", "cut short", "bad topic name", "no topics"]
    garbled: list[str] = []
    read = fetch_link.Link.read

    def garbling_read(self, limit):
        reply = read(self, limit)
        if reply is not None and len(garbled) < len(ways) and len(reply) > 64:
            garbled.append(ways[len(garbled)])
            return _garbled(reply, garbled[-1])
        return reply

    monkeypatch.setattr(fetch_link.Link, "read", garbling_read)
    reader, parts = bus.reader(k), [bus.Partition(k.input_topic, p) for p in (0, 1)]
    reader.assign(parts)
    reader.seek_to_beginning(*parts)
    got, deadline = [], time.monotonic() + 60  # (not _read_all: Tansu reports the end of a partition whose last
    while len(got) < 2000 and time.monotonic() < deadline:  # batch holds several records as that batch's base + 1)
        got += reader.poll(500, 97)
    reader.close()
    assert garbled == ways
    assert sorted(_key(r) for r in got) == [(p, o) for p in (0, 1) for o in range(1000)]


def test_every_garbling_is_refused_by_the_reply_parser():
    topic = b"t"
    record_set = _batch(0, RECORDS)
    reply = (
        struct.pack(">iii", 7, 0, 1)
        + struct.pack(">h", len(topic))
        + topic
        + struct.pack(">i", 1)
        + struct.pack(">ihqqi", 0, 0, 10, 10, 0)
        + struct.pack(">i", len(record_set))
        + record_set
    )
    ((p, error, data),) = fetch_link.reply_partitions(reply, 7)
    assert (p, error, data) == (bus.Partition("t", 0), 0, record_set)
    for how in ("another request's", "cut short", "bad topic name", "no topics"):
        with pytest.raises(fetch_link.MalformedReply):
            fetch_link.reply_partitions(_garbled(reply, how), 7)
    topic_entry = reply[12:]  # name, one partition and its record set: named twice, its records would come twice
    twice = struct.pack(">iii", 7, 0, 2) + topic_entry + topic_entry
    with pytest.raises(fetch_link.MalformedReply, match="twice"):
        fetch_link.reply_partitions(twice, 7)


def test_a_reply_arriving_in_pieces_is_read_whole_and_one_over_its_bound_is_refused_unread():
    """The link reads the length prefix, then the body into a buffer of that size, wherever the pieces split
    (the prefix itself in two); a closed connection mid-reply and an oversize or undersize length are errors."""
    import select
    import socket

    server = socket.create_server(("127.0.0.1", 0))
    body = struct.pack(">iii", 7, 0, 0) + bytes(range(256)) * 40
    framed = struct.pack(">i", len(body)) + body
    with server:
        link = fetch_link.Link(server.getsockname(), None, 5.0, _looked_up(server.getsockname()))
        peer, _ = server.accept()
        with peer:
            for piece in (framed[:2], framed[2:5], framed[5:4000]):
                peer.sendall(piece)  # the next piece goes only once this one is read
                select.select([link.sock], [], [], 5)
                assert link.read(1 << 20) is None  # nothing handed out before the reply is whole
            peer.sendall(framed[4000:])
            assert _read_until(link, 1 << 20) == body
            peer.sendall(framed)
            with pytest.raises(fetch_link.ReplyTooLarge, match=f"{len(framed)} bytes"):
                _read_until(link, len(framed) - 1)
            link.close()
        for length, error in ((8, fetch_link.MalformedReply), (None, ConnectionError)):
            link = fetch_link.Link(server.getsockname(), None, 5.0, _looked_up(server.getsockname()))
            peer, _ = server.accept()
            with peer:
                peer.sendall(struct.pack(">i", length) if length is not None else framed[:100])
                if length is None:
                    peer.shutdown(socket.SHUT_WR)  # the broker goes away mid-reply
                with pytest.raises(error):
                    _read_until(link, 1 << 20)
            link.close()


def _read_until(link: fetch_link.Link, limit: int, timeout_s: float = 5.0) -> bytearray:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (reply := link.read(limit)) is not None:
            return reply
    raise AssertionError("no reply and no error")


def test_a_broker_that_never_accepts_the_connection_blocks_no_poll_and_is_dialled_again(broker, monkeypatch, caplog):
    """Partition 0's leader is an address whose accept queue is full (its SYNs go unanswered, as a black-holed
    broker's): the reader reads every record of partition 1 meanwhile, each poll within its own timeout (a
    connect used to block a poll for up to probe_timeout_ms), then drops the connection that was never made."""
    import socket

    k = _topic(broker, "holed", probe_timeout_ms=3000)
    with Loader(k.bootstrap) as loader:
        loader.load(k.input_topic, ((1, b"k", b"%d" % i) for i in range(500)), T0)
    hole = socket.create_server(("127.0.0.1", 0), backlog=0)
    filler = socket.create_connection(hole.getsockname())  # takes the one place in its accept queue
    port = hole.getsockname()[1]
    with socket.socket() as probe:  # Linux leaves a SYN past a full accept queue unanswered; not every kernel does
        probe.settimeout(0.5)
        if probe.connect_ex(("127.0.0.1", port)) == 0:
            pytest.skip("this kernel completes a connect past a full accept queue: no black hole to test with")
    real = batch_reader.leader_address
    monkeypatch.setattr(batch_reader, "REDIAL_S", 0.05)
    monkeypatch.setattr(batch_reader, "leader_address",
                        lambda c, p: hole.getsockname() if p.partition == 0 else real(c, p))  # fmt: skip
    reader, parts = bus.reader(k), [bus.Partition(k.input_topic, p) for p in (0, 1)]
    reader.assign(parts)
    reader.seek_to_beginning(*parts)
    got, slowest, deadline = [], 0.0, time.monotonic() + 20
    with hole, filler, caplog.at_level("WARNING", logger="lastmile.bus"):
        while (len(got) < 500 or "no connection in 3 s" not in caplog.text) and time.monotonic() < deadline:
            began = time.monotonic()
            got += reader.poll(100, 97)
            slowest = max(slowest, time.monotonic() - began)
        reader.close()
    assert sorted(_key(r) for r in got) == [(1, o) for o in range(500)]
    assert f"broker 127.0.0.1:{port}: no connection in 3 s" in caplog.text
    assert slowest < 1.5  # a poll of 100 ms never waited out a 3 s connect


def _looked_up(address: tuple[str, int]):
    """The addresses a reader's :class:`~gateway.bus.links.Lookup` gives a link, for a numeric ``address``."""
    return bus_links.Lookup(address).answer(5.0)


def _held_name(name: str, to: str, release, asked: list[str]):
    """getaddrinfo, but ``name`` (not a numeric address) answers as ``to`` only once ``release`` is set (a resolver
    that does not answer meanwhile); each lookup of it is appended to ``asked``."""
    import socket

    real = socket.getaddrinfo

    def resolver(host, port, *args, **kwargs):
        if host != name:
            return real(host, port, *args, **kwargs)
        if kwargs.get("flags", 0) & socket.AI_NUMERICHOST:
            raise socket.gaierror(socket.EAI_NONAME, "not a numeric address")
        asked.append(host)
        release.wait(60)
        return real(to, port, *args, **kwargs)

    return resolver


def test_a_broker_whose_name_lookup_hangs_blocks_no_poll_and_is_dialled_once_it_answers(broker, monkeypatch, caplog):
    """Partition 0's leader has a name whose lookup hangs (a resolver that does not answer): the reader reads every
    record of partition 1 meanwhile, each poll within its own timeout (getaddrinfo used to run inside the poll),
    says the name had no answer in time, looks it up on one thread however often it redials, and once the
    lookup answers reads partition 0 too."""
    import threading

    k = _topic(broker, "hung-name", probe_timeout_ms=2000)
    with Loader(k.bootstrap) as loader:
        loader.load(k.input_topic, ((p, b"k", b"%d" % i) for p in (0, 1) for i in range(300)), T0)
    real_leader, answer = batch_reader.leader_address, threading.Event()
    host, port = k.bootstrap.rsplit(":", 1)
    leader, hung = (host, int(port)), ("broker.hung.test", int(port))  # one broker: every partition's leader
    lookups: list[str] = []
    monkeypatch.setattr(bus_links.socket, "getaddrinfo", _held_name("broker.hung.test", leader[0], answer, lookups))
    monkeypatch.setattr(batch_reader, "REDIAL_S", 0.05)
    monkeypatch.setattr(batch_reader, "leader_address",
                        lambda c, p: hung if p.partition == 0 else real_leader(c, p))  # fmt: skip
    reader, parts = bus.reader(k), [bus.Partition(k.input_topic, p) for p in (0, 1)]
    reader.assign(parts)
    reader.seek_to_beginning(*parts)
    got, slowest, deadline = [], 0.0, time.monotonic() + 30
    with caplog.at_level("WARNING", logger="lastmile.bus"):
        while len(got) < 600 and time.monotonic() < deadline:
            if "in 2 s (its name lookup is not answered)" in caplog.text and not answer.is_set():
                assert sorted(_key(r) for r in got) == [(1, o) for o in range(300)]
                answer.set()
            began = time.monotonic()
            got += reader.poll(100, 97)
            slowest = max(slowest, time.monotonic() - began)
        reader.close()
    assert answer.is_set(), "the lookup's timeout was never reported"
    assert sorted(_key(r) for r in got) == [(p, o) for p in (0, 1) for o in range(300)]
    assert lookups == ["broker.hung.test"]  # one lookup, though the broker was dialled again every 50 ms
    assert slowest < 1.5  # a poll of 100 ms never waited for the lookup


def _tls_server(tmp_path):
    """A TLS context for a server on 127.0.0.1 (a self-signed certificate) and a client context trusting it."""
    import ssl
    import subprocess

    from tests.conftest import require_tool

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([require_tool("openssl"), "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)  # fmt: skip
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    return server, ssl.create_default_context(cafile=str(cert))


def _connect(link: fetch_link.Link, timeout_s: float = 10.0) -> None:
    """Carry the link on as a reader does: wait for what it wants, advance, until it is ready."""
    import select

    deadline = time.monotonic() + timeout_s
    while link.advance() and time.monotonic() < deadline:
        readable = link.wants == selectors.EVENT_READ
        select.select([link.sock] if readable else [], [] if readable else [link.sock], [], 0.1)
    assert not link.wants, "not connected"


def test_a_tls_link_connects_and_handshakes_without_blocking_and_reads_a_reply(tmp_path):
    import socket
    import threading

    server_tls, client_tls = _tls_server(tmp_path)
    body = struct.pack(">iii", 9, 0, 0) + b"r" * 5000
    listener = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with server_tls.wrap_socket(conn, server_side=True) as tls:
            size = struct.unpack(">i", tls.recv(4))[0]
            got.append(tls.recv(size))
            tls.sendall(struct.pack(">i", len(body)) + body)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    with listener:
        link = fetch_link.Link(listener.getsockname(), client_tls, 5.0, _looked_up(listener.getsockname()))
        assert link.wants  # a connect in progress, not a blocking one
        _connect(link)
        request = fetch_link.fetch_request(9, {bus.Partition("t", 0): 0})
        link.send(request, {bus.Partition("t", 0): (0, 0)})
        assert _read_until(link, 1 << 20) == body and got == [request[4:]]
        link.close()
    thread.join(10)


@pytest.mark.parametrize("selector", ["DefaultSelector", "SelectSelector"])
def test_links_try_each_address_of_a_name_and_carry_tls_through_their_selector(tmp_path, monkeypatch, selector):
    """The broker's name gives a refused address first, then the TLS server's (a dual-stack name whose first
    address does not listen): the links move to the next address and then wrap the socket for TLS, each a new
    socket under the selector (epoll's and the portable one), and a fetch goes through."""
    import socket
    import threading

    server_tls, client_tls = _tls_server(tmp_path)
    body = struct.pack(">iii", 3, 0, 0) + b"t" * 3000
    listener = socket.create_server(("127.0.0.1", 0))
    with socket.create_server(("127.0.0.1", 0)) as closed:
        refused = closed.getsockname()
    lookup = socket.getaddrinfo

    def two_addresses(host, port, *args, **kwargs):
        first, second = lookup(*refused, *args, **kwargs), lookup(host, port, *args, **kwargs)
        return first + second

    def serve() -> None:
        conn, _ = listener.accept()
        with server_tls.wrap_socket(conn, server_side=True) as tls:
            size = struct.unpack(">i", tls.recv(4))[0]
            tls.recv(size)
            tls.sendall(struct.pack(">i", len(body)) + body)

    monkeypatch.setattr(fetch_link.socket, "getaddrinfo", two_addresses)
    monkeypatch.setattr(bus_links.selectors, "DefaultSelector", getattr(selectors, selector))
    threading.Thread(target=serve, daemon=True).start()
    links, address, deadline = bus_links.Links(client_tls, 5.0, 0.05), listener.getsockname(), time.monotonic() + 10
    with listener:
        while (link := links.idle(address)) is None and time.monotonic() < deadline:
            for ready in links.ready(links.busy(), 0.1):
                links.advance(ready)
        assert link is not None and link.sock.getpeername() == address
        link.send(fetch_link.fetch_request(3, {bus.Partition("t", 0): 0}), {bus.Partition("t", 0): (0, 0)})
        reply = None
        while reply is None and time.monotonic() < deadline:
            for ready in links.ready(links.busy(), 0.1):
                reply = links.by_address[ready].read(1 << 20)
        assert reply == body
        links.close()


def test_a_tls_handshake_that_never_answers_blocks_nothing_and_is_overdue(tmp_path):
    """A server that accepts the TCP connection and then says nothing: the handshake waits for it to read, each
    advance returns at once, and after the link's timeout it is overdue (the reader drops and redials it)."""
    import select
    import socket

    _, client_tls = _tls_server(tmp_path)
    with socket.create_server(("127.0.0.1", 0)) as silent:
        link = fetch_link.Link(silent.getsockname(), client_tls, 2.0, _looked_up(silent.getsockname()))
        deadline = time.monotonic() + 10
        while link.overdue(30.0) is None and time.monotonic() < deadline:
            began = time.monotonic()
            assert link.advance() in (selectors.EVENT_READ, selectors.EVENT_WRITE)
            assert time.monotonic() - began < 1.5  # never the handshake's own wait (the link's 2 s)
            select.select([link.sock], [], [], 0.05)  # as the reader's selector waits
        assert link.overdue(30.0) == "no connection in 2 s"
        link.close()


def _load(k: KafkaSettings, offsets: range) -> None:
    with Loader(k.bootstrap) as loader:
        loader.load(k.input_topic, ((0, b"k", b"%d" % i) for i in offsets), T0)


def _reading_from(broker, name: str, offset: int) -> tuple[KafkaSettings, bus.BatchReader, bus.Partition]:
    """A topic whose partition 0 holds 100 records, and a reader assigned to it, sought to ``offset``."""
    k = _topic(broker, name)
    _load(k, range(100))
    reader, p = bus.reader(k), bus.Partition(k.input_topic, 0)
    reader.assign([p])
    reader.seek(p, offset)
    return k, reader, p


def test_a_seek_drops_what_was_fetched_before_it(broker):
    _, reader, p = _reading_from(broker, "seek", 0)
    first = reader.poll(5000, 10)
    reader.seek(p, 90)
    rest = []
    while len(rest) < 10:
        rest += reader.poll(5000, 10)
    reader.close()
    assert [r.offset for r in first] == list(range(10)) and [r.offset for r in rest] == list(range(90, 100))


def test_a_reply_fetched_before_a_partition_was_unassigned_is_dropped_when_it_is_assigned_again(broker):
    k, reader, p = _reading_from(broker, "reassign", 90)
    assert reader.poll(0, 10) == []  # the fetch from 90 is sent, its reply not yet read
    reader.assign([])
    reader.assign([p])  # again, not sought: from where the client's reset policy puts it (the end, "latest")
    start = reader.position(p)
    _load(k, range(100, 110))
    got, deadline = [], time.monotonic() + 30
    while not (got and got[-1].offset == 109) and time.monotonic() < deadline:
        got += reader.poll(500, 50)
    reader.close()
    assert start != 90 and [r.offset for r in got] == list(range(start, 110))


def test_a_batch_over_the_limit_comes_by_reference_as_the_consumer_hands_it_out():
    data = _batch(0, RECORDS[:1]) + _batch(1, RECORDS[3:5]) + _batch(3, RECORDS[:1])
    parsed = batches.parse("t", 3, data, 0, limit=65_536)
    assert [type(r).__name__ for r in parsed.records] == ["Record", "OversizeRecord", "OversizeRecord", "Record"]
    assert parsed.records[1].size == len(_batch(1, RECORDS[3:5])) and parsed.records[1].limit == 65_536


def test_behind_sasl_the_reader_is_kafka_pythons(monkeypatch):
    made = []
    monkeypatch.setattr(batch_reader, "client_reader", lambda settings: made.append(settings) or "client's")
    k = KafkaSettings(bootstrap="127.0.0.1:9", input_topic="t", security_protocol="SASL_SSL", sasl_mechanism="PLAIN")
    assert bus.reader(k) == "client's" and made == [k]


def test_old_formats_go_to_kafka_pythons_decoder_and_broken_headers_cost_one_offset():
    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    for magic in (0, 1):  # message sets of the formats before batches: read, not skipped or multiplied
        builder = LegacyRecordBatchBuilder(magic, 0, 1 << 20)
        for i in range(3):
            builder.append(7 + i, T0 if magic else None, b"k%d" % i, b"v%d" % i)
        data = bytes(builder.build())
        parsed = batches.parse("t", 3, data, 7)
        assert [(r.offset, r.value) for r in parsed.records] == [(7, b"v0"), (8, b"v1"), (9, b"v2")]
        assert parsed.next_offset == 10
    good = _batch(0, RECORDS[:2])
    broken = bytearray(good)
    struct.pack_into(">i", broken, 23, 3_000_000)  # a last-offset delta no batch this long can hold (CRC fails)
    parsed = batches.parse("t", 3, bytes(broken), 0)
    assert [type(r).__name__ for r in parsed.records] == ["UnreadableRecord"] and parsed.next_offset == 1
    negative = bytearray(good)
    struct.pack_into(">i", negative, 8, -12)  # a negative length: the parse stops, it does not spin
    assert batches.parse("t", 3, bytes(negative), 0).next_offset == 0


def test_an_answered_lookup_is_not_busy_and_one_answered_long_ago_is_looked_up_again(monkeypatch):
    """A lookup that answered for a broker not dialled since kept the reader's selector waiting as if busy, and
    its addresses were used however old (a name whose addresses had changed)."""
    import socket
    import threading

    answered, release, asked = threading.Event(), threading.Event(), []
    monkeypatch.setattr(bus_links.socket, "getaddrinfo", _held_name("broker.later.test", "127.0.0.1", release, asked))
    listener = socket.create_server(("127.0.0.1", 0))
    links = bus_links.Links(None, 5.0, 0.05)
    links._wake = answered.set  # (the wake the selector gets, seen here)
    address = ("broker.later.test", listener.getsockname()[1])
    assert links.idle(address) is None and links.busy() == [address]  # looked up
    release.set()
    assert answered.wait(10)
    assert links.busy() == []  # answered: nothing to wait for until it is dialled
    lookup = links._lookups[address]
    assert not lookup.stale(5.0)
    lookup.answered_at -= 10  # answered ten seconds ago, past the connect timeout
    assert lookup.stale(5.0)
    answered.clear()
    links.idle(address)  # (None while it is looked up again; the link, if that answered at once)
    assert answered.wait(10) and asked == ["broker.later.test"] * 2
    links.close()
    listener.close()


def test_a_lookup_answering_after_its_links_closed_ends_quietly(monkeypatch):
    """A lookup thread wakes the selector of links that may be closed by then (a reader stopped while a name was
    looked up): its wake must neither raise in that thread nor reach a socket that took the closed one's number."""
    import socket
    import threading

    release, asked, raised = threading.Event(), [], []
    monkeypatch.setattr(bus_links.socket, "getaddrinfo", _held_name("broker.late.test", "127.0.0.1", release, asked))
    monkeypatch.setattr(threading, "excepthook", raised.append)
    links = bus_links.Links(None, 5.0, 0.05)
    assert links.idle(("broker.late.test", 9)) is None and asked == ["broker.late.test"]
    (thread,) = [t for t in threading.enumerate() if t.name == "lookup broker.late.test"]
    links.close()
    taken = socket.socketpair()  # may reuse the closed pair's numbers
    for end in taken:
        end.setblocking(False)
    release.set()
    thread.join(10)
    assert not thread.is_alive() and raised == []
    for end in taken:
        with pytest.raises(BlockingIOError):  # nothing sent to either end
            end.recv(1)
    for end in taken:
        end.close()
