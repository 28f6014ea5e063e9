"""A reader (no group, no commits: it assigns partitions and seeks) that fetches on sockets of its own and parses
the record batches itself (:mod:`gateway.bus.batches`); kafka-python's consumer still answers everything else
(partitions, offsets by time, end offsets, the leaders' addresses).

kafka-python's decoder was about half of the monitor's ingest (14 µs of Python per record). Here a Fetch (v4,
every assigned partition of one leader in one request) is kept in flight on each leader's socket while the
previous reply's records are handed out, so the broker works while the reader parses. A reply over its bound
(``FETCH_BYTES`` plus one batch of ``max_message_bytes``: a broker returns a first batch whole) is never read: the
connection is dropped and its partitions read a batch at a time apart (``DirectReader``), an oversize batch by
reference. A malformed reply (``MalformedReply``), or none in ``request_timeout_ms``, drops the connection; it is
redialled and its partitions fetched again from where they were; a partition whose fetch fails waits ``REDIAL_S``
and its leader is looked up again. A seek or an unassignment makes a reply in flight stale for that partition.
Plain TCP or TLS, connected without blocking a poll (a connection not made in ``probe_timeout_ms`` is dropped
and dialled again); behind SASL, :func:`reader` uses kafka-python's fetcher. Not yet handled: Apache Kafka returns
an empty record set for a partition whose next batch is over its share of a reply unless it comes first in it,
so such a partition advances only when those before it have nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from gateway.bus import clients
from gateway.bus.batches import parse
from gateway.bus.consumer import Consumer, client_reader
from gateway.bus.direct import DirectReader, Fetched, leader_address, tls_context
from gateway.bus.errors import BusError, mapped
from gateway.bus.fetch_link import FETCH_BYTES, ReplyPartition, ReplyTooLarge, fetch_request, reply_partitions
from gateway.bus.links import Links
from gateway.bus.records import Partition
from gateway.core.kafka_settings import KafkaSettings

log = logging.getLogger("lastmile.bus")
REDIAL_S = 1.0  # after a connection fails, its broker is not dialled again before this
OFFSET_OUT_OF_RANGE = 1
READ_AHEAD_RECORDS = 10_000  # a partition holding this many fetched records not yet handed out is not fetched
IDLE_WAIT_S = 0.05  # a poll with no fetch to wait on (nothing assigned, or every broker unreachable) waits this


class BatchReader(Consumer):
    def __init__(self, client: object, settings: KafkaSettings) -> None:
        super().__init__(client)
        self.settings, self._tls, self._direct = settings, tls_context(settings), DirectReader(settings)
        self._assigned: list[Partition] = []
        self._paused: set[Partition] = set()
        self._fetch_at: dict[Partition, int] = {}  # where the next fetch of each partition starts
        self._seeks: dict[Partition, int] = {}  # seeks so far: a reply to a fetch from before a seek is dropped
        self._buffers: dict[Partition, tuple[list[Fetched], int]] = {}  # records fetched, and how many handed out
        self._links = Links(self._tls, settings.probe_timeout_ms / 1000, REDIAL_S)
        self._retry_at: dict[Partition, float] = {}  # a partition whose fetch failed: not asked for before then
        self._correlation = 0

    # -- what is read ----------------------------------------------------------------------------------------
    def assign(self, partitions: Iterable[Partition]) -> None:
        parts = [Partition(*p) for p in partitions]
        super().assign(parts)  # kafka-python keeps the topics' metadata (the leaders) current
        keep = set(parts)
        for p in set(self._assigned) - keep:  # as after a seek, a reply in flight for it is stale
            self._seeks[p] = self._seeks.get(p, 0) + 1
        self._assigned = parts
        self._fetch_at = {p: offset for p, offset in self._fetch_at.items() if p in keep}
        self._buffers = {p: held for p, held in self._buffers.items() if p in keep}
        self._paused &= keep

    def assignment(self) -> set[Partition]:
        return set(self._assigned)

    def subscribe(self, topics: list[str], listener: object = None) -> None:
        raise BusError("a reader assigns its partitions; subscribe is for a group consumer")

    def commit(self, offsets: object) -> None:
        raise BusError("a reader commits nothing")

    def paused(self) -> set[Partition]:
        return set(self._paused)

    def pause(self, *partitions: Partition) -> None:
        self._paused |= set(partitions)

    def resume(self, *partitions: Partition) -> None:
        self._paused -= set(partitions)

    # -- positions -------------------------------------------------------------------------------------------
    def position(self, partition: Partition) -> int:
        """The offset after the last record handed out (past any batch that held none to hand out)."""
        records, taken = self._buffers.get(partition, ((), 0))
        return records[taken].offset if taken < len(records) else self._fetch_from(partition)

    def _fetch_from(self, partition: Partition) -> int:
        if partition not in self._fetch_at:
            self._fetch_at[partition] = super().position(partition)  # never sought: the client's reset policy
        return self._fetch_at[partition]

    def seek(self, partition: Partition, offset: int) -> None:
        self._fetch_at[partition] = offset
        self._seeks[partition] = self._seeks.get(partition, 0) + 1
        self._buffers.pop(partition, None)

    def seek_to_beginning(self, *partitions: Partition) -> None:
        parts = list(partitions or self._assigned)
        with mapped():
            starts = self._client.beginning_offsets([clients.to_client(p) for p in parts])
        for tp, offset in starts.items():
            self.seek(Partition(tp.topic, tp.partition), offset)

    def lag(self, topic: str, timeout_ms: int | None = None) -> int | None:
        mine = [p for p in self._assigned if p.topic == topic]
        if not mine:
            return None
        return sum(max(0, end - self.position(p)) for p, end in self.end_offsets(mine, timeout_ms).items())

    # -- flow --------------------------------------------------------------------------------------------------
    def poll(self, timeout_ms: int, max_records: int | None = None) -> list[Fetched]:
        """At most ``max_records`` records, in offset order per partition; fetches stay in flight meanwhile."""
        deadline = time.monotonic() + timeout_ms / 1000
        limit = max_records or self.settings.max_poll_records
        while True:
            self._send_fetches()
            out = self._take(limit)
            if out or time.monotonic() >= deadline:
                return out
            self._receive(deadline - time.monotonic())

    def _take(self, limit: int) -> list[Fetched]:
        out: list[Fetched] = []
        for p, (records, taken) in list(self._buffers.items()):
            if p in self._paused or taken >= len(records):
                continue
            chunk = records[taken : taken + limit - len(out)]
            out += chunk
            self._buffers[p] = (records, taken + len(chunk))
            if len(out) >= limit:
                break
        return out

    def _wanted(self) -> dict[tuple[str, int], list[Partition]]:
        """Per leader, its partitions to fetch: assigned, not paused, not in flight, not read far ahead (a fetch
        asks for every partition that may have records, or a broker holds it ``MAX_WAIT_MS`` for those at the end)."""
        skip = self._paused | self._waiting() | self._links.asked()
        by_leader: dict[tuple[str, int], list[Partition]] = {}
        for p in self._assigned:
            records, taken = self._buffers.get(p, ((), 0))
            if p in skip or len(records) - taken >= READ_AHEAD_RECORDS:
                continue
            try:
                address = leader_address(self._client, p)
            except BusError:
                self._refresh_metadata()
                continue
            by_leader.setdefault(address, []).append(p)
        return by_leader

    def _waiting(self) -> set[Partition]:
        now = time.monotonic()
        self._retry_at = {p: t for p, t in self._retry_at.items() if t > now}
        return set(self._retry_at)

    def _send_fetches(self) -> None:
        for address, parts in self._wanted().items():
            try:
                link = self._links.idle(address)
            except OSError as exc:
                self._fail(address, f"cannot connect: {exc}")
                continue
            if link is None:
                continue  # connecting, a fetch in flight, or its broker not to be dialled again yet
            asked = {p: (self._fetch_from(p), self._seeks.get(p, 0)) for p in parts}
            self._correlation = (self._correlation + 1) & 0x7FFF_FFFF  # an int32 on the wire
            try:
                link.send(fetch_request(self._correlation, {p: o for p, (o, _) in asked.items()}), asked)
            except OSError as exc:
                self._fail(address, f"cannot send a fetch: {exc}")

    def _receive(self, timeout_s: float) -> None:
        """Carry connecting links on, and take each whole reply on the sockets with a fetch in flight (waiting up to
        ``timeout_s``); drop a connection that is not made in time or whose reply is late, oversize or malformed."""
        busy = self._links.busy()
        if not busy:
            time.sleep(min(max(timeout_s, 0.0), IDLE_WAIT_S))
            return
        for address in self._links.ready(busy, timeout_s):
            link = self._links.by_address[address]
            asked, correlation = dict(link.asked), link.correlation
            try:
                if link.wants:
                    self._links.advance(address)
                    continue
                reply = link.read(self._reply_bound(len(asked)))
                parts = None if reply is None else reply_partitions(reply, correlation)
            except ReplyTooLarge as exc:
                self._fail(address, str(exc))
                self._read_apart(asked)
                continue
            except OSError as exc:  # MalformedReply too: nothing of it was kept, its partitions are asked again
                self._fail(address, f"{'cannot connect' if link.wants else 'fetch failed'}: {exc}")
                continue
            if parts is not None:
                self._take_reply(parts, asked)
        for address in [a for a in busy if a in self._links.by_address]:
            if why := self._links.by_address[address].overdue(self.settings.request_timeout_ms / 1000):
                self._fail(address, why)

    def _reply_bound(self, partitions: int) -> int:
        """A reply's records within the fetch size, plus one whole batch of the largest size accepted (a broker
        returns a first batch whole whatever the fetch size); beyond it, read apart, batch by batch."""
        return FETCH_BYTES + self.settings.max_message_bytes + partitions * clients.FETCH_HEADROOM_BYTES

    def _take_reply(self, parts: list[ReplyPartition], asked: dict[Partition, tuple[int, int]]) -> None:
        for p, error, data in parts:
            if p not in asked or asked[p][1] != self._seeks.get(p, 0):
                continue  # sought (or unassigned) since it was asked for: this reply is stale for it
            offset = asked[p][0]
            if error == OFFSET_OUT_OF_RANGE:
                self._out_of_range(p, offset)
            elif error:
                log.warning("fetch of %s/%s at %s: error code %s; asking again in %.0f s", *p, offset, error, REDIAL_S)
                self._retry_at[p] = time.monotonic() + REDIAL_S
                self._refresh_metadata()
            elif data:
                parsed = parse(p.topic, p.partition, data, offset, self.settings.max_message_bytes)
                if parsed.next_offset == offset:  # a batch bigger than the reply could hold: read it apart
                    self._read_apart({p: asked[p]})
                    continue
                self._keep(p, parsed.records)
                self._fetch_at[p] = parsed.next_offset

    def _read_apart(self, asked: dict[Partition, tuple[int, int]]) -> None:
        """One batch per partition, on a socket of its own (its records, or by reference when oversize)."""
        for p, (offset, seeks) in asked.items():
            if seeks != self._seeks.get(p, 0):
                continue
            batch = self._direct.batch(self._client, p, offset)
            if batch is not None and batch.last_offset >= offset:
                self._keep(p, self._direct.records(p, offset, batch))
                self._fetch_at[p] = batch.last_offset + 1

    def _keep(self, p: Partition, fetched: list[Fetched]) -> None:
        records, taken = self._buffers.get(p, ((), 0))
        self._buffers[p] = (list(records[taken:]) + fetched, 0)

    def _out_of_range(self, p: Partition, offset: int) -> None:
        """A position the log no longer (or not yet) holds: to its start if before it, else to its end (or on
        from it, if the log has grown to it meanwhile); asked again later if the broker does not answer."""
        try:
            with mapped():
                tp = clients.to_client(p)
                start = self._client.beginning_offsets([tp])[tp]
                end = self._client.end_offsets([tp])[tp]
        except BusError as exc:
            log.warning("%s/%s: offset %s out of range, and no offsets to reset to: %s", *p, offset, exc)
            self._retry_at[p] = time.monotonic() + REDIAL_S
            return
        to = start if offset < start else offset if offset <= end else end
        log.warning("%s/%s: offset %s is out of range [%s, %s]; reading on from %s", *p, offset, start, end, to)
        self.seek(p, to)

    def _fail(self, address: tuple[str, int], why: str) -> None:
        log.warning("broker %s:%s: %s; dialling again in %.0f s", *address, why, self._links.redial_s)
        self._links.hang_up(address)
        self._refresh_metadata()

    def _refresh_metadata(self) -> None:
        self._client._client.cluster.request_update()  # kafka-python's metadata, refreshed on its next request

    def close(self, autocommit: bool = False) -> None:
        self._links.close()
        super().close()


def reader(settings: KafkaSettings) -> Consumer:
    """No group and no commits: assign partitions and seek (the monitor rebuilds its windows on every start).
    Fetches on its own sockets, or, behind SASL, through kafka-python's fetcher."""
    if settings.security_protocol.startswith("SASL"):
        return client_reader(settings)
    with mapped():
        return BatchReader(clients.reader_client(settings), settings)
