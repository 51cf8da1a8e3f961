"""The 64-octet ZMTP greeting (RFC 23 / RFC 37): signature, version, mechanism, as-server.

Layout: ``0xFF``, 8 octets of padding, ``0x7F`` (the signature), major and minor version, the
mechanism name null-padded to 20 octets, the as-server flag and 31 zero octets.  The padding is
not significant to ZMTP 3 peers, but libzmq reads its last bit to tell a ZMTP 1.0 peer, so it is
sent as the big-endian number 1, as libzmq does.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import HandshakeError

GREETING_SIZE = 64
SIGNATURE_SIZE = 10
VERSION_MAJOR = 3
VERSION_MINOR = 1


def build_greeting(mechanism: bytes, as_server: bool, minor: int = VERSION_MINOR) -> bytes:
    if len(mechanism) > 20:
        raise ValueError(f"mechanism name {mechanism!r} is longer than 20 octets")
    return (
        b"\xff" + (1).to_bytes(8, "big") + b"\x7f"
        + bytes((VERSION_MAJOR, minor))
        + mechanism.ljust(20, b"\x00")
        + (b"\x01" if as_server else b"\x00")
        + bytes(31)
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Greeting:
    major: int
    minor: int
    mechanism: bytes
    as_server: bool


def check_signature(data: bytes | bytearray) -> None:
    """Refuse a peer as soon as its first octets show it is not ZMTP 3 (1.0 and 2.0 are not
    spoken); ``data`` is what arrived of the greeting so far."""
    if not data:
        return
    if data[0] != 0xFF:
        raise HandshakeError("peer speaks ZMTP 1.0 (no greeting signature): not supported")
    if len(data) >= SIGNATURE_SIZE:
        if not data[9] & 0x01:  # ZMTP 1.0 peers with a long first frame look like this
            raise HandshakeError("peer speaks ZMTP 1.0: not supported")
        if data[9] != 0x7F:
            raise HandshakeError("malformed ZMTP greeting signature")
    if len(data) > SIGNATURE_SIZE and data[10] < VERSION_MAJOR:
        # the revision octet: 1 is ZMTP 2.0 (and 0 the ZMTP 1.0 framing)
        raise HandshakeError(
            f"peer speaks ZMTP {data[10] + 1}.0 (revision {data[10]}); ZMTP 3.0 or later is "
            "required"
        )


def parse_greeting(data: bytes | bytearray) -> Greeting:
    """Parse a whole greeting (the first 64 octets the peer sent)."""
    check_signature(data)
    mechanism = bytes(data[12:32]).rstrip(b"\x00")
    if not mechanism or any(c not in _MECHANISM_CHARS for c in mechanism):
        raise HandshakeError(f"malformed ZMTP mechanism name {bytes(data[12:32])!r}")
    return Greeting(data[10], data[11], mechanism, bool(data[32] & 1))


_MECHANISM_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.+")
