"""What a connection reports besides messages: the handshake's end and the peer's heartbeats."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..constants import SocketType
from .greeting import Protocol


@dataclass(frozen=True, slots=True)
class Ready:
    """The handshake is complete.  ``metadata`` holds the peer's properties by lower-cased
    name; ``properties`` what the connection's messages carry, as libzmq spells them: what the
    ZAP handler said (``User-Id``, its metadata), then the peer's own properties (which cannot
    replace those).  ``protocol`` is what the peer speaks: a ZMTP 2.0 / 1.0 peer sends no READY
    and is not asked about, so it has no metadata nor properties, ``minor_version`` is 0, and a
    ZMTP 1.0 one has no ``socket_type`` (it announces none)."""

    socket_type: SocketType | None
    routing_id: bytes
    metadata: dict[str, bytes]
    minor_version: int
    protocol: Protocol = Protocol.ZMTP_3
    properties: dict[str, bytes] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class Ping:
    """The peer pinged; a PONG is already queued.  ``ttl`` is in tenths of a second."""

    ttl: int
    context: bytes


@dataclass(frozen=True, slots=True)
class Pong:
    context: bytes
