"""The allow-list of ``http(s)://`` sources: which host and port a URL may name, and which special addresses a
name may resolve to.

Entries (``sources.http_allow_hosts``, a replay's ``http_allow_hosts``):

- ``media.example`` or ``203.0.114.7``: that host on ports 80 and 443 only (an allowed host's other ports, an
  admin console say, are not one URL away);
- ``media.example:8080``, ``[2001:db8::7]:8443``: that host on that port only;
- ``10.20.0.0/16``, ``fd00::/8``: a network that names may resolve into (private, loopback and the other ranges
  :mod:`.addresses` refuses otherwise); it admits no URL host by itself.

An address entry (``127.0.0.1``, ``[::1]:8080``) also lets a name resolve to that address: a test config that
lists ``127.0.0.1:PORT`` reaches a local server, and nothing else local.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from gateway.core.sources.errors import SourceError, show
from gateway.core.sources.urls import Address, SourceURL, canonical_host, parse_source_url, port_number

BARE_PORTS = frozenset({80, 443})  # the ports a host listed without one may be reached on

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Host = str | Address


@dataclass(frozen=True)
class AllowList:
    """Parsed entries: ``ports`` maps each host to the ports it may be reached on; ``networks`` holds the CIDR
    entries and one network per address entry (the addresses a name may resolve to although they are special)."""

    ports: dict[Host, frozenset[int]]
    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> AllowList:
        ports: dict[Host, set[int]] = {}
        networks: list[Network] = []
        for entry in entries:
            if "/" in entry:
                networks.append(_network(entry))
                continue
            host, port = _host_port(entry)
            ports.setdefault(host, set()).update(BARE_PORTS if port is None else {port})
            if not isinstance(host, str):
                networks.append(ipaddress.ip_network(host))
        return cls({h: frozenset(p) for h, p in ports.items()}, tuple(networks))

    def admit(self, url: SourceURL) -> SourceURL:
        """``url``, if its host is listed for its port; else :class:`SourceError` saying which is missing."""
        allowed = self.ports.get(url.host)
        if allowed is None:
            raise SourceError(f"host {str(url.host)!r} is not in the allow-list")
        if url.port not in allowed:
            listed = ", ".join(map(str, sorted(allowed)))
            raise SourceError(
                f"port {url.port} of host {str(url.host)!r} is not in the allow-list (listed: {listed}; an entry "
                f"without a port allows 80 and 443; write '{url.netloc}' to allow this one)"
            )
        return url

    def names(self, address: Address) -> bool:
        """Whether an entry names ``address`` or a network holding it (so it may be reached although special)."""
        return any(address in n for n in self.networks)  # (an address is in no network of the other version)


def allow_list(entries: Iterable[str] | AllowList) -> AllowList:
    """``entries`` as an :class:`AllowList` (one already parsed is returned as it is)."""
    return entries if isinstance(entries, AllowList) else AllowList.parse(entries)


def _host_port(entry: str) -> tuple[Host, int | None]:
    text, port = entry, None
    if entry.startswith("[") and "]:" in entry:  # [v6]:port
        text, _, port_text = entry.rpartition(":")
        port = _port(port_text, entry)
    elif entry.count(":") == 1:  # name:port or v4:port (a bare IPv6 address has two colons or more)
        text, _, port_text = entry.partition(":")
        port = _port(port_text, entry)
    elif ":" in entry and not entry.startswith("["):
        text = f"[{entry}]"
    try:
        return canonical_host(text), port
    except SourceError as exc:
        raise SourceError(f"allow-list entry {show(entry, 60)} is no host name or IP address ({exc})") from exc


def _port(text: str, entry: str) -> int:
    port = port_number(text)
    if port is None:
        raise SourceError(f"allow-list entry {show(entry, 60)} has no valid port after its ':' (1 to 65535)")
    return port


def _network(entry: str) -> Network:
    text = entry.replace("[", "").replace("]", "")
    try:
        return ipaddress.ip_network(text, strict=True)
    except ValueError as exc:
        raise SourceError(f"allow-list entry {show(entry, 60)} is no network in CIDR notation ({exc})") from exc


def allowed_url(uri: str, allow: Iterable[str] | AllowList) -> SourceURL:
    """``uri`` parsed (:func:`~.urls.parse_source_url`), refused unless its host and port are in ``allow``; no DNS,
    no network (the addresses are checked when it is fetched)."""
    return allow_list(allow).admit(parse_source_url(uri))
