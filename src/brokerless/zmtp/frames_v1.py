"""ZMTP 1.0 framing (RFC 13): a length that counts the flags octet, the flags, the body.

Theory of operation
-------------------
A frame is ``length flags body``.  ``length`` is one octet (1 to 254) or ``0xFF`` followed by 8
big-endian octets, and it counts the flags octet: a body of n octets has length n + 1, and a
length of 0 is malformed (libzmq refuses it).  Only bit 0 of the flags means anything (MORE); the
other bits are reserved and ignored, as libzmq ignores them.  There are no commands.

The connection's first frame is the peer's identity, whose flags "SHALL not be validated"
(RFC 13): the decoder takes it as a message of its own whatever they say.

:class:`V1FrameDecoder` keeps the contract of :class:`.frames.FrameDecoder`, whose input
handling it shares: whole messages only, limits checked from the header, a frame buffered as its
octets arrive and never allocated from the size its header claims.  Only old peers speak this
framing, so it has no fast path.
"""

from __future__ import annotations

from typing import Any

from .errors import ProtocolError
from .frames import MORE, FrameDecoder, _too_large

_LONG_LENGTH = 0xFF


def frame_header_v1(size: int, more: bool = False) -> bytes:
    """The header of a frame with a body of ``size`` octets."""
    flags = MORE if more else 0
    if size < _LONG_LENGTH - 1:
        return bytes((size + 1, flags))
    return b"\xff" + (size + 1).to_bytes(8, "big") + bytes((flags,))


def encode_message_v1(out: list[Any], msg: Any) -> None:
    """Append the ZMTP 1.0 frames of ``msg`` (a part, or a list of parts) to ``out``."""
    if msg.__class__ is list:
        last = len(msg) - 1
        for i, part in enumerate(msg):
            out.append(frame_header_v1(len(part), i < last))
            out.append(part)
        return
    out.append(frame_header_v1(len(msg)))
    out.append(msg)


class V1FrameDecoder(FrameDecoder):
    """Byte stream in, whole messages out (the peer's identity first); see the module
    docstring."""

    __slots__ = ("_identity",)

    def __init__(self, max_msg_size: int = -1) -> None:
        super().__init__(max_msg_size)
        self._identity = True  # the next frame is the peer's identity

    def save(self) -> Any:
        return super().save(), self._identity

    def restore(self, saved: Any) -> None:
        super().restore(saved[0])
        self._identity = saved[1]

    def feed(self, data: bytes | bytearray | memoryview) -> list[Any]:
        out = super().feed(data)
        self.large = False  # (what it took for a long frame's flags is a 1.0 length octet)
        return out

    def _frame_missing(self, tail: bytes) -> int:
        length, head = tail[0], 1
        if length == _LONG_LENGTH:
            if len(tail) < 9:
                return -1
            length, head = int.from_bytes(tail[1:9], "big"), 9
        return head + length - len(tail)

    def _plain(self, first: bytes) -> bool:
        return False  # (a 1.0 frame is decoded whole by ``_decode``, once it is all in)

    def _decode(self, view: Any, out: list[Any]) -> int:
        parts = self._parts
        limit = self._limit
        append = out.append
        pos, end = 0, len(view)
        while pos < end:
            length = view[pos]
            start = pos + 1  # the flags octet
            if length == _LONG_LENGTH:
                if end - pos < 9:
                    break
                length = int.from_bytes(view[pos + 1 : pos + 9], "big")
                start = pos + 9
            if length == 0:
                raise ProtocolError("ZMTP 1.0 frame of length 0 (the length counts the flags)")
            if length - 1 > limit:
                raise _too_large(length - 1, self.max_msg_size)
            stop = start + length
            if stop > end:
                break
            more = view[start] & MORE  # the other flag bits are ignored
            body = bytes(view[start + 1 : stop])
            pos = stop
            if self._identity:
                self._identity = False
                append(body)
                continue
            if parts is None:
                parts = [body]
            else:
                parts.append(body)
            if not more:
                append(parts if len(parts) > 1 else body)
                parts = None
        self._parts = parts
        return pos


__all__ = ["V1FrameDecoder", "encode_message_v1", "frame_header_v1"]
