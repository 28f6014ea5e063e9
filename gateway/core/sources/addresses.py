"""Resolve once, check every address, connect to an address checked.

A name on the allow-list is resolved once per connection (``socket.getaddrinfo``, under the download's deadline),
and every address it gives must pass before any connection is made: an address in a range that is not meant to be
reached from a gateway fetching uploads (loopback, private, link-local with the cloud metadata service at
169.254.169.254, CGNAT, multicast, unspecified, reserved, documentation; in IPv4, IPv6, and IPv4 inside IPv6:
mapped, 6to4, Teredo, NAT64) is refused unless the allow-list names it or a network holding it. The connection
then goes to those addresses and no others (:mod:`.downloads`), so a name rebound between the check and the
connection reaches nothing new: there is no second lookup.
"""

from __future__ import annotations

import ipaddress
import socket
import threading

from gateway.core.sources.allowlist import AllowList
from gateway.core.sources.errors import SourceError
from gateway.core.sources.urls import Address, SourceURL

_net = ipaddress.ip_network
# (name, networks), checked in this order; anything else that Python does not call global is refused as well
SPECIAL = (
    ("unspecified", (_net("0.0.0.0/8"), _net("::/128"))),
    ("loopback", (_net("127.0.0.0/8"), _net("::1/128"))),
    ("link-local, where cloud metadata services answer", (_net("169.254.0.0/16"), _net("fe80::/10"))),
    ("private", (_net("10.0.0.0/8"), _net("172.16.0.0/12"), _net("192.168.0.0/16"), _net("fc00::/7"))),
    ("carrier-grade NAT", (_net("100.64.0.0/10"),)),
    ("multicast", (_net("224.0.0.0/4"), _net("ff00::/8"))),
    ("documentation", tuple(map(_net, ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")))),
    ("reserved", (_net("240.0.0.0/4"), _net("192.0.0.0/24"), _net("198.18.0.0/15"), _net("100::/64"))),
)
NAT64 = (_net("64:ff9b::/96"), _net("64:ff9b:1::/48"))  # an IPv4 address in the last 32 bits


def special(address: Address) -> str | None:
    """Why ``address`` is not an address a gateway should fetch from (a range's name), or None if it is global.
    An IPv6 address that carries an IPv4 one (mapped, 6to4, Teredo, NAT64) is judged by both."""
    for inner in _carried(address):
        why = special(inner)
        if why is not None:
            return f"{why}, inside {address}"
    for name, networks in SPECIAL:
        if any(address in n for n in networks):  # (an address is in no network of the other version)
            return name
    return None if address.is_global else "not globally routable"


def _carried(address: Address) -> list[ipaddress.IPv4Address]:
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    inner = [address.ipv4_mapped, address.sixtofour, address.teredo[1] if address.teredo else None]
    if any(address in n for n in NAT64):
        inner.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return [a for a in inner if a is not None]


def resolve(url: SourceURL, allow: AllowList, timeout_s: float) -> list[Address]:
    """The addresses to connect to for ``url``, each checked: its own address if the host is one, else what one
    lookup of the name gives within ``timeout_s``. :class:`SourceError` if the lookup fails or takes longer, or
    if any address is special (:func:`special`) and not named by ``allow``."""
    found = [url.host] if not isinstance(url.host, str) else _lookup(url.host, url.port, timeout_s)
    for address in found:
        why = special(address)
        if why is not None and not allow.names(address):
            raise SourceError(
                f"host {str(url.host)!r} resolves to {address} ({why}): refused unless the allow-list names that "
                "address or a network holding it"
            )
    return found


def _lookup(name: str, port: int, timeout_s: float) -> list[Address]:
    """``getaddrinfo`` for TCP, in order and without repeats, waited for at most ``timeout_s`` (it has no timeout
    of its own: a resolver that does not answer leaves a daemon thread behind until the system gives up)."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["found"] = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
        except OSError as exc:
            box["error"] = exc
        except BaseException as exc:  # (not a resolver's answer: handed back to the fetch as it is)
            box["raised"] = exc

    thread = threading.Thread(target=run, name="lastmile-dns", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise SourceError(f"the lookup of host {name!r} took longer than {timeout_s:.1f} s")
    if "raised" in box:
        raise box["raised"]  # type: ignore[misc]
    if "error" in box:
        raise SourceError(f"cannot resolve host {name!r}: {box['error']}")
    addresses: list[Address] = []
    for _family, _type, _proto, _canon, sockaddr in box["found"]:  # type: ignore[union-attr]
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])  # (an IPv6 scope id is not kept)
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise SourceError(f"host {name!r} resolves to no address")
    return addresses


def connect(addresses: list[Address], port: int, timeout_s: float) -> socket.socket:
    """A TCP connection to the first of ``addresses`` (all checked) that answers on ``port``; never a lookup."""
    error: OSError | None = None
    for address in addresses:
        family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout_s)
            sock.connect((str(address), port))  # a numeric address: parsed, not looked up
        except OSError as exc:
            sock.close()
            error = exc
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    raise error or OSError(f"no address to connect to on port {port}")
