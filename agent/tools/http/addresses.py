"""The address a request connects to: the host resolved once, every address checked against
the special ranges (unless HARNESS_HTTP_ALLOW_NETWORKS lists them), and the connection pinned
to the address that passed (PinnedTransport: no second lookup, no DNS rebinding)."""

from __future__ import annotations

import ipaddress
import socket

import httpcore
import httpx
from django.conf import settings

from tasks.tools.registry import PermanentToolError, TransientToolError


def _special(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return (
        address.is_loopback
        or address.is_private
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or not address.is_global
    )


def address_check(host: str, port: int) -> str:
    """Resolve `host` once and return the address to connect to: the first one that is public
    or inside HARNESS_HTTP_ALLOW_NETWORKS. Raises PermanentToolError when none is (a name
    resolving to a private address is refused even if it also has public ones), and
    TransientToolError when the name does not resolve."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise TransientToolError(f"cannot resolve {host!r}: {exc}") from None
    allowed_networks = [
        ipaddress.ip_network(n, strict=False) for n in settings.HARNESS_HTTP_ALLOW_NETWORKS
    ]
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    refused = [
        a for a in addresses if _special(a) and not any(a in net for net in allowed_networks)
    ]
    if refused or not addresses:
        raise PermanentToolError(
            f"{host!r} resolves to {', '.join(map(str, refused or addresses))}: a loopback, "
            "private or link-local address is not reachable unless HARNESS_HTTP_ALLOW_NETWORKS "
            "lists it"
        )
    return str(addresses[0])


class _PinnedBackend(httpcore.SyncBackend):
    """Connects to the address that was checked, whatever the URL's host resolves to now."""

    def __init__(self, address: str) -> None:
        self.address = address

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        return super().connect_tcp(self.address, port, timeout, local_address, socket_options)


class PinnedTransport(httpx.HTTPTransport):
    def __init__(self, address: str) -> None:
        super().__init__(trust_env=False)
        # httpx has no public hook for the network backend; the pool it builds is replaced by
        # one with the same TLS context and the pinned backend (Host header and SNI come from
        # the request URL, so they stay the name the operator allowed).
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            network_backend=_PinnedBackend(address),
        )
