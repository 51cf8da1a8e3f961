"""ZMTP 3 framing: a flags octet, a 1- or 8-octet size, the body.

Theory of operation
-------------------
The decoder takes whatever bytes the transport read and returns every *whole* message they
complete, in the form pipes carry (``bytes`` for one part, a ``list`` for a multipart message),
plus :class:`~.commands.Command` objects for command frames.  Partial frames and the parts of an
unfinished multipart message wait inside the decoder, so a message is delivered all or nothing.
It never trusts the peer: reserved flag bits, a MORE flag on a command, or a frame larger than
``max_msg_size`` raise :class:`ProtocolError` before anything is buffered for it.

The encoder appends headers and bodies to a list of buffers that the transport writes with one
``sendmsg``/``join`` for a whole batch; bodies are never copied.
"""

from __future__ import annotations

from typing import Any

from .commands import Command, parse_command
from .errors import MessageTooLarge, ProtocolError

MORE = 0x01
LONG = 0x02
COMMAND = 0x04
_RESERVED = 0xF8

_MAX_SIZE = (1 << 63) - 1

# Headers of short frames, built once: the hot path only indexes these tables.
_LAST = [bytes((0, n)) for n in range(256)]
_NOT_LAST = [bytes((MORE, n)) for n in range(256)]


def frame_header(size: int, more: bool = False, command: bool = False) -> bytes:
    flags = (MORE if more else 0) | (COMMAND if command else 0)
    if size < 256:
        return bytes((flags, size))
    return bytes((flags | LONG,)) + size.to_bytes(8, "big")


def encode_command(body: bytes) -> bytes:
    return frame_header(len(body), command=True) + body


def encode_message(out: list, msg: Any) -> None:
    """Append the frames of ``msg`` (a part, or a list of parts) to the buffer list ``out``."""
    if msg.__class__ is list:
        last = len(msg) - 1
        for i, part in enumerate(msg):
            n = len(part)
            if n < 256:
                out.append(_NOT_LAST[n] if i < last else _LAST[n])
            else:
                out.append(frame_header(n, more=i < last))
            out.append(part)
        return
    n = len(msg)
    out.append(_LAST[n] if n < 256 else frame_header(n))
    out.append(msg)


class FrameDecoder:
    """Byte stream in, whole messages and commands out."""

    __slots__ = ("_buf", "_parts", "max_msg_size")

    def __init__(self, max_msg_size: int = -1) -> None:
        self._buf = bytearray()
        self._parts: list | None = None
        self.max_msg_size = max_msg_size

    @property
    def buffered(self) -> int:
        """Octets held for an unfinished frame."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list:
        """Decode ``data``; returns the messages and commands it completes, in order."""
        buf = self._buf
        if buf:
            buf += data
            view = buf
        else:
            view = data
        out: list = []
        try:
            pos = self._decode(view, out)
        except ProtocolError as exc:
            exc.messages = out
            raise
        end = len(view)
        if pos < end:
            if view is buf:
                del buf[:pos]
            else:
                buf += view[pos:]
        elif buf:
            buf.clear()
        return out

    def _decode(self, view: Any, out: list) -> int:
        """Decode every whole frame of ``view`` into ``out``; returns the octets consumed."""
        parts = self._parts
        limit = self.max_msg_size
        pos, end = 0, len(view)
        while end - pos >= 2:
            flags = view[pos]
            if flags & LONG:
                if end - pos < 9:
                    break
                size = int.from_bytes(view[pos + 1 : pos + 9], "big")
                start = pos + 9
            else:
                size = view[pos + 1]
                start = pos + 2
            if flags & _RESERVED:
                raise ProtocolError(f"frame with reserved flag bits set (flags {flags:#04x})")
            if size > _MAX_SIZE or (limit >= 0 and size > limit):
                raise MessageTooLarge(f"frame of {size} octets exceeds MAXMSGSIZE {limit}")
            stop = start + size
            if stop > end:
                break
            body = bytes(view[start:stop])
            pos = stop
            if flags & COMMAND:
                if flags & MORE:
                    raise ProtocolError("command frame with the MORE flag set")
                out.append(parse_command(body))
            elif flags & MORE:
                if parts is None:
                    parts = [body]
                else:
                    parts.append(body)
            elif parts is None:
                out.append(body)
            else:
                parts.append(body)
                out.append(parts)
                parts = None
        self._parts = parts
        return pos


__all__ = [
    "COMMAND",
    "LONG",
    "MORE",
    "Command",
    "FrameDecoder",
    "encode_command",
    "encode_message",
    "frame_header",
]
