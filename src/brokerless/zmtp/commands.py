"""ZMTP command bodies: READY (metadata), ERROR, SUBSCRIBE, CANCEL, PING and PONG.

A command body is a length-prefixed name followed by data; this module builds and parses the
data.  Metadata (READY and the mechanisms' handshake commands) is a list of properties, each a
length-prefixed name and a 4-octet big-endian length-prefixed value.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import MalformedCommand, ProtocolError

READY = b"READY"
ERROR = b"ERROR"
SUBSCRIBE = b"SUBSCRIBE"
CANCEL = b"CANCEL"
PING = b"PING"
PONG = b"PONG"

MAX_PING_CONTEXT = 16


@dataclass(frozen=True, slots=True)
class Command:
    """A command frame: its name and data."""

    name: bytes
    data: bytes


def command_body(name: bytes, data: bytes = b"") -> bytes:
    return bytes((len(name),)) + name + data


#: How libzmq's PLAIN server spells ERROR: its C literal "\x05ERROR" reads as the octets
#: 0x5E "RROR" (a hex escape takes every hex digit after it), so its reason starts after five
#: octets.  libzmq's PLAIN client expects exactly this; accepting it lets a PLAIN client here
#: see libzmq's refusals as refusals (HANDSHAKE_FAILED_AUTH) rather than as garbage.
LIBZMQ_PLAIN_ERROR = b"\x5eRROR"


def parse_command(body: bytes) -> Command:
    if not body:
        raise MalformedCommand("empty command frame")
    if body.startswith(LIBZMQ_PLAIN_ERROR):
        return Command(ERROR, body[len(LIBZMQ_PLAIN_ERROR) :])
    n = body[0]
    if n == 0 or len(body) < 1 + n:
        raise MalformedCommand("malformed command name")
    name = body[1 : 1 + n]
    if not name.isalpha():
        raise MalformedCommand(f"malformed command name {name!r}")
    return Command(name, body[1 + n :])


def encode_metadata(properties: dict[str, bytes]) -> bytes:
    out = bytearray()
    for name, value in properties.items():
        key = name.encode("ascii")
        if not 0 < len(key) < 256:
            raise ValueError(f"metadata name {name!r} must be 1 to 255 characters")
        out += bytes((len(key),)) + key + len(value).to_bytes(4, "big") + value
    return bytes(out)


def parse_metadata(data: bytes) -> dict[str, bytes]:
    """Properties by name, as the peer spelled them (ZMTP names are case-insensitive, but
    libzmq's message properties are looked up as spelled: :func:`fold` gives the first)."""
    props: dict[str, bytes] = {}
    pos, end = 0, len(data)
    while pos < end:
        n = data[pos]
        if n == 0 or pos + 1 + n + 4 > end:
            raise ProtocolError("malformed metadata property")
        name = data[pos + 1 : pos + 1 + n]
        pos += 1 + n
        size = int.from_bytes(data[pos : pos + 4], "big")
        pos += 4
        if size > 0x7FFFFFFF or pos + size > end:
            raise ProtocolError("malformed metadata value size")
        try:
            key = name.decode("ascii")
        except UnicodeDecodeError:
            raise ProtocolError(f"malformed metadata name {name!r}") from None
        props[key] = data[pos : pos + size]
        pos += size
    return props


def fold(properties: dict[str, bytes]) -> dict[str, bytes]:
    """The properties by lower-cased name (for the case-insensitive ZMTP lookups)."""
    return {name.lower(): value for name, value in properties.items()}


def parse_ping(data: bytes) -> tuple[int, bytes]:
    """(TTL in tenths of a second, context) of a PING.  A context longer than RFC 37's 16
    octets is cut to its first 16, as libzmq answers it."""
    if len(data) < 2:
        raise MalformedCommand("malformed PING command")
    return int.from_bytes(data[:2], "big"), data[2 : 2 + MAX_PING_CONTEXT]


def ping_data(ttl_deciseconds: int, context: bytes = b"") -> bytes:
    return min(ttl_deciseconds, 0xFFFF).to_bytes(2, "big") + context[:MAX_PING_CONTEXT]


def parse_error(data: bytes) -> str:
    if not data or data[0] != len(data) - 1:
        return data.decode("ascii", "replace")
    return data[1:].decode("ascii", "replace")


def error_data(reason: str) -> bytes:
    text = reason.encode("ascii", "replace")[:255]
    return bytes((len(text),)) + text
