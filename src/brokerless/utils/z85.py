"""Z85 (ZeroMQ RFC 32): binary as printable text, 5 characters for every 4 octets.

pyzmq's ``zmq.utils.z85``: :func:`encode` takes a multiple of 4 octets and :func:`decode` a
multiple of 5 characters (``bytes`` or ASCII ``str``), both raising ``ValueError`` otherwise.  A
character outside the alphabet, or a group worth more than 32 bits, raises :class:`Z85Error`,
which is a ``ValueError`` and, as pyzmq's lookup error is, a ``KeyError``.
"""

from __future__ import annotations

Z85CHARS = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
#: Each character's value (-1: not in the alphabet).
_VALUES = [-1] * 256
for _i, _c in enumerate(Z85CHARS):
    _VALUES[_c] = _i
del _i, _c


class Z85Error(ValueError, KeyError):
    """Not Z85: a character outside the alphabet, or a group larger than 32 bits."""

    def __str__(self) -> str:  # KeyError would show the repr
        return str(self.args[0]) if self.args else ""


def encode(rawbytes: bytes | bytearray | memoryview) -> bytes:
    """Encode raw bytes (a multiple of 4 octets) into Z85."""
    data = bytes(rawbytes)
    if len(data) % 4:
        raise ValueError(f"length must be multiple of 4, not {len(data)}")
    out = bytearray()
    chars = Z85CHARS
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i : i + 4], "big")
        group = bytearray(5)
        for j in range(4, -1, -1):
            value, group[j] = divmod(value, 85)
            group[j] = chars[group[j]]
        out += group
    return bytes(out)


def decode(z85bytes: str | bytes | bytearray | memoryview) -> bytes:
    """Decode Z85 (a multiple of 5 characters; ``str`` must be ASCII) into raw bytes."""
    if isinstance(z85bytes, str):
        try:
            z85bytes = z85bytes.encode("ascii")
        except UnicodeEncodeError:
            raise ValueError("string argument should contain only ASCII characters") from None
    data = bytes(z85bytes)
    if len(data) % 5:
        raise ValueError(f"Z85 length must be multiple of 5, not {len(data)}")
    out = bytearray()
    values = _VALUES
    for i in range(0, len(data), 5):
        value = 0
        for c in data[i : i + 5]:
            digit = values[c]
            if digit < 0:
                raise Z85Error(f"{bytes((c,))!r} is not a Z85 character")
            value = value * 85 + digit
        if value > 0xFFFFFFFF:
            raise Z85Error(f"{data[i : i + 5]!r} is more than 32 bits: not Z85")
        out += value.to_bytes(4, "big")
    return bytes(out)
