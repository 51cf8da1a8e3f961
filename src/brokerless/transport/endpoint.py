"""Endpoint strings: ``transport://address``."""

from __future__ import annotations

from dataclasses import dataclass

from ..errno import EINVAL, EPROTONOSUPPORT
from ..error import ZMQError

#: Transports libzmq knows; the ones brokerless does not serve yet fail with EPROTONOSUPPORT
#: when used, with a message that says so.
KNOWN_TRANSPORTS = frozenset({"inproc", "ipc", "tcp", "pgm", "epgm", "tipc", "vmci", "udp", "ws"})


@dataclass(frozen=True, slots=True)
class Endpoint:
    transport: str
    address: str

    @property
    def uri(self) -> str:
        return f"{self.transport}://{self.address}"


def parse(addr: str) -> Endpoint:
    """Split and check an endpoint; EINVAL names a malformed one, EPROTONOSUPPORT a transport."""
    if isinstance(addr, bytes):
        addr = addr.decode()
    if not isinstance(addr, str):
        raise TypeError(f"an endpoint is a str such as 'inproc://name', not {type(addr).__name__}")
    transport, sep, address = addr.partition("://")
    if not sep or not transport:
        raise ZMQError(
            EINVAL, f"Invalid argument: malformed endpoint {addr!r}: expected transport://address"
        )
    if transport not in KNOWN_TRANSPORTS:
        raise ZMQError(
            EPROTONOSUPPORT, f"Protocol not supported: unknown transport {transport!r} in {addr!r}"
        )
    if not address:
        raise ZMQError(EINVAL, f"Invalid argument: endpoint {addr!r} has no address")
    return Endpoint(transport, address)
