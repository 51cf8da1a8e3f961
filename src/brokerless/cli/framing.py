"""How messages look on stdin and stdout: lines, or raw ZMTP frames.

*Lines* (the default): one message per line; a line's fields, split at the delimiter (a tab
unless ``-d`` says otherwise; ``-d ''``: never split), are the message's frames.  A message
received is written the same way, its frames joined by the delimiter.  For ROUTER the first
field is the routing id in hex (it is binary), so that a reply line can name its peer.

*Raw* (``--raw``): a byte stream of messages in ZMTP 3's frame encoding -- a flags octet (MORE
for every frame but a message's last, LONG for a body of 256 octets or more), the size in one
or eight octets (network order), then the body -- so any bytes pass unchanged, and a file of
messages written by one command is read back by another.  Command frames are refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..zmtp.encoder import encode_message
from ..zmtp.errors import ProtocolError
from ..zmtp.frames import FrameDecoder

Message = list[bytes]


class FramingError(ValueError):
    """Input that is not a message in the chosen framing; ``complete`` holds the messages
    that came whole before the fault (they are still sent)."""

    def __init__(self, text: str, complete: list[Message] | None = None) -> None:
        super().__init__(text)
        self.complete = complete or []


class Framing(Protocol):
    def decode(self, data: bytes) -> list[Message]:
        """The messages ``data`` completes (what is left waits for the next call)."""
        ...

    def finish(self) -> list[Message]:
        """End of input: the last messages, if any; raises FramingError on a cut message."""
        ...

    def encode(self, message: Message) -> bytes: ...


class Lines:
    """One message per line (see the module doc); ``hex_first``: the first field is hex."""

    def __init__(self, delimiter: bytes = b"\t", *, hex_first: bool = False) -> None:
        self.delimiter = delimiter
        self.hex_first = hex_first
        self._partial = b""

    def decode(self, data: bytes) -> list[Message]:
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        messages: list[Message] = []
        for line in lines:
            try:
                messages.append(self._message(line))
            except FramingError as exc:
                exc.complete = messages
                raise
        return messages

    def finish(self) -> list[Message]:
        partial, self._partial = self._partial, b""
        return [self._message(partial)] if partial else []

    def _message(self, line: bytes) -> Message:
        line = line.removesuffix(b"\r")
        frames = line.split(self.delimiter) if self.delimiter else [line]
        if self.hex_first:
            try:
                frames[0] = bytes.fromhex(frames[0].decode("ascii"))
            except ValueError:
                raise FramingError(
                    f"{frames[0][:40]!r} is not a routing id in hex (a ROUTER's lines start "
                    "with the peer's routing id, as it prints them)"
                ) from None
        return frames

    def encode(self, message: Message) -> bytes:
        frames = [bytes(f) for f in message]
        if self.hex_first and frames:
            frames[0] = frames[0].hex().encode()
        return self.delimiter.join(frames) + b"\n"


class Raw:
    """Messages as ZMTP frames (see the module doc)."""

    def __init__(self) -> None:
        self._decoder = FrameDecoder()

    def decode(self, data: bytes) -> list[Message]:
        decoder = self._decoder
        try:
            decoded = decoder.feed(data)
        except ProtocolError as exc:
            whole = _messages(exc.messages)
            raise FramingError(f"raw input is not ZMTP frames: {exc}", whole) from None
        messages = _messages(decoded)
        if len(messages) < len(decoded):
            raise FramingError(
                "raw input holds a ZMTP command frame: only messages are sent", messages
            )
        return messages

    def finish(self) -> list[Message]:
        if self._decoder.buffered:
            raise FramingError("raw input ends in the middle of a frame")
        return []

    def encode(self, message: Message) -> bytes:
        out: list[bytes] = []
        encode_message(out, [bytes(f) for f in message])
        return b"".join(out)


def _messages(decoded: Sequence[object]) -> list[Message]:
    """The messages ``FrameDecoder.feed`` returned, up to its first command."""
    messages: list[Message] = []
    for item in decoded:
        if isinstance(item, bytes):
            messages.append([item])
        elif isinstance(item, list):
            messages.append(item)
        else:
            break
    return messages
