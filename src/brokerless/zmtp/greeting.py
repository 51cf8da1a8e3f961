"""The ZMTP greeting, exchanged step by step as libzmq does, so that older peers are understood.

Theory of operation
-------------------
A ZMTP 3 greeting (RFC 23) is 64 octets: the signature (``0xFF``, 8 octets of padding, ``0x7F``),
the major and minor version, the mechanism name null-padded to 20 octets, the as-server flag and
31 octets of filler.  A ZMTP 2.0 greeting (RFC 15) is the same signature, the revision ``0x01``
and the socket type, 12 octets.  ZMTP 1.0 (RFC 13) has no greeting: its first frame is the
peer's identity.  To talk to all of them (RFC 23, "Backwards Interoperability"), ours goes out
in steps, each one once the peer's octets that decide it have arrived:

===============  ===================================  ==================  =========================
step             we have sent                         waiting for         then
===============  ===================================  ==================  =========================
``SIGNATURE``    the signature                        the peer's octets   major version 3 ->
                                                      1 to 10             ``REVISION``
``REVISION``     + the major version (3)              its 11th octet      revision 0-2: our socket
                                                                          type -> ``SOCKET_TYPE``;
                                                                          3 or more: the rest of
                                                                          ours -> ``REST``
``SOCKET_TYPE``  + our socket type                    its 12th octet      ``DONE``: ZMTP 1.0
                                                                          (revision 0) or 2.0
``REST``         + minor version, mechanism, ...      its 64th octet      ``DONE``: ZMTP 3.x
===============  ===================================  ==================  =========================

A first octet other than ``0xFF``, or a 10th octet whose bit 0 is clear, is the header of a
ZMTP 1.0 peer's identity frame: ``DONE`` at once, and what arrived is the start of its frame
stream.  Revision 2 was never assigned; RFC 23 counts it as ZMTP 2.0.

The signature's padding carries our routing id's length + 1 as 8 big-endian octets, as libzmq
sends it: a ZMTP 1.0 peer reads the signature as the header of our identity frame (that length,
flags ``0x7F``) and takes the routing id that follows as its body.  ZMTP 3 peers ignore the
padding (RFC 23).  ZMTP 1.0 and 2.0 have no security: a ``secure`` exchange (any mechanism but
NULL, or NULL asking ZAP: libzmq's "ZAP enabled") refuses such a peer as soon as it is
recognised, before anything else is sent to it (RFC 23; libzmq since CVE-2014-9721).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from .errors import HandshakeError, MechanismMismatch

SIGNATURE_SIZE = 10
LEGACY_GREETING_SIZE = 12  # ZMTP 2.0 (and 1.0 with a revision octet): signature, revision, type
GREETING_SIZE = 64
VERSION_MAJOR = 3
VERSION_MINOR = 1


class Protocol(Enum):
    """What a connection speaks once the greeting is in."""

    ZMTP_1_0 = "ZMTP/1.0"  # RFC 13 framing: no greeting, or one with revision 0
    ZMTP_2_0 = "ZMTP/2.0"  # RFC 15: revision 1 (or 2)
    ZMTP_3 = "ZMTP/3.x"  # RFC 23 / RFC 37: revision 3 or later


class Step(Enum):
    """Where the greeting exchange is (see the module docstring's table)."""

    SIGNATURE = 1
    REVISION = 2
    SOCKET_TYPE = 3
    REST = 4
    DONE = 5


#: How many of the peer's greeting octets each step waits for.
_NEEDED = {
    Step.SIGNATURE: SIGNATURE_SIZE,
    Step.REVISION: SIGNATURE_SIZE + 1,
    Step.SOCKET_TYPE: LEGACY_GREETING_SIZE,
    Step.REST: GREETING_SIZE,
}


@dataclass(frozen=True, slots=True)
class Greeting:
    """A ZMTP 3 peer's greeting."""

    major: int
    minor: int
    mechanism: bytes
    as_server: bool


def signature(routing_id_size: int) -> bytes:
    return b"\xff" + (routing_id_size + 1).to_bytes(8, "big") + b"\x7f"


def rest_of_greeting(mechanism: bytes, as_server: bool) -> bytes:
    """Octets 11 to 63 of a ZMTP 3.1 greeting: minor version, mechanism, as-server, filler."""
    if len(mechanism) > 20:
        raise ValueError(f"mechanism name {mechanism!r} is longer than 20 octets")
    return bytes((VERSION_MINOR,)) + mechanism.ljust(20, b"\x00") + bytes((as_server,)) + bytes(31)


class GreetingExchange:
    """One side's greeting exchange; see the module docstring.

    ``receive`` takes the peer's octets and appends what we send next to an output list; once
    ``step`` is ``DONE``, ``protocol`` says what the peer speaks, with ``peer`` (ZMTP 3),
    ``peer_socket_type`` (the socket type octet of a 2.0 or revision-0 peer) and ``unversioned``
    (a ZMTP 1.0 peer that sent no greeting) to go on with.  A ``secure`` exchange refuses
    ZMTP 1.0 and 2.0 peers.
    """

    def __init__(
        self,
        socket_type: int,
        routing_id: bytes,
        mechanism: bytes,
        as_server: bool,
        *,
        secure: bool = False,
    ) -> None:
        self.step = Step.SIGNATURE
        self.protocol: Protocol | None = None
        self.peer: Greeting | None = None
        self.peer_socket_type: int | None = None
        self.unversioned = False
        self.signature = signature(len(routing_id))
        self._socket_type = socket_type
        self._mechanism = mechanism
        self._as_server = as_server
        self._secure = secure
        self._in = bytearray()

    def receive(self, data: Any, out: list[Any]) -> Any:
        """Take greeting octets from ``data`` and append what to send to ``out``; returns what
        follows the greeting in ``data`` (all that arrived, greeting included, from an
        unversioned ZMTP 1.0 peer), empty until the greeting is done."""
        received = self._in
        pos, end = 0, len(data)
        while pos < end and self.step is not Step.DONE:
            take = _NEEDED[self.step] - len(received)
            received += data[pos : pos + take]
            pos += take
            if self.step is Step.SIGNATURE and self._sent_no_greeting():
                self._check_legacy(Protocol.ZMTP_1_0)
                self.unversioned = True
                self._done(Protocol.ZMTP_1_0)
                return bytes(received) + bytes(data[pos:])
            if len(received) == _NEEDED[self.step]:
                self._step_complete(out)
        return data[pos:] if self.step is Step.DONE else b""

    def _sent_no_greeting(self) -> bool:
        """Whether the octets in so far are a ZMTP 1.0 peer's identity frame header."""
        received = self._in
        return received[0] != 0xFF or (len(received) == SIGNATURE_SIZE and not received[9] & 1)

    def _step_complete(self, out: list[Any]) -> None:
        """Every octet the current step waits for is in: take the next step."""
        received = self._in
        step = self.step
        if step is Step.SIGNATURE:
            if received[9] != 0x7F:
                raise HandshakeError("malformed ZMTP greeting signature")
            out.append(bytes((VERSION_MAJOR,)))
            self.step = Step.REVISION
        elif step is Step.REVISION:
            if received[10] < VERSION_MAJOR:
                self._check_legacy(_legacy_protocol(received[10]))
                out.append(bytes((self._socket_type,)))
                self.step = Step.SOCKET_TYPE
            else:
                out.append(rest_of_greeting(self._mechanism, self._as_server))
                self.step = Step.REST
        elif step is Step.SOCKET_TYPE:
            self.peer_socket_type = received[11]
            self._done(_legacy_protocol(received[10]))
        else:
            self.peer = parse_greeting(received)
            self._done(Protocol.ZMTP_3)

    def _check_legacy(self, protocol: Protocol) -> None:
        if self._secure:
            raise MechanismMismatch(
                f"the peer speaks {protocol.value}, which has no security: the "
                f"{self._mechanism.decode()} mechanism cannot be used with it"
                + (" when it asks ZAP" if self._mechanism == b"NULL" else "")
            )

    def _done(self, protocol: Protocol) -> None:
        self.protocol = protocol
        self.step = Step.DONE


def _legacy_protocol(revision: int) -> Protocol:
    return Protocol.ZMTP_1_0 if revision == 0 else Protocol.ZMTP_2_0


def parse_greeting(data: bytes | bytearray) -> Greeting:
    """Parse a whole ZMTP 3 greeting (the first 64 octets the peer sent)."""
    mechanism = bytes(data[12:32]).rstrip(b"\x00")
    if not mechanism or any(c not in _MECHANISM_CHARS for c in mechanism):
        raise MechanismMismatch(f"malformed ZMTP mechanism name {bytes(data[12:32])!r}")
    return Greeting(data[10], data[11], mechanism, bool(data[32] & 1))


_MECHANISM_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.+")
