"""Traffic on an encrypting connection (CURVE, RFC 26): one MESSAGE command per frame.

Every frame of the traffic -- message parts and commands alike -- travels boxed in a MESSAGE
command carried by a data frame (or, from some peers, sent as a command), its flags inside the
box.  libzmq writes its own message flags there, where a command is 0x02 (on the wire, outside
any box, it is 0x04).  :class:`Boxes` turns messages into boxes and boxes back into messages
and commands for a :class:`~.connection.Connection` whose handshake is complete; the mechanism
(:meth:`~.mechanisms.base.Mechanism.encode_frame`, ``decode_frame``) does the cryptography.
"""

from __future__ import annotations

from typing import Any

from .commands import CANCEL, SUBSCRIBE, Command, command_body, parse_command
from .errors import MalformedCommand, ProtocolError, UnexpectedFrame
from .frames import add_part
from .mechanisms import Mechanism

BOX_MORE, BOX_COMMAND = 0x01, 0x02


class Boxes:
    """Boxing and unboxing of one connection's traffic (see the module docstring)."""

    __slots__ = ("_mechanism", "_parts", "_subscriptions_as_commands")

    def __init__(self, mechanism: Mechanism, subscriptions_as_commands: bool) -> None:
        self._mechanism = mechanism
        self._subscriptions_as_commands = subscriptions_as_commands
        self._parts: list[Any] | None = None  # an unfinished multipart message

    def encode(self, out: list[Any], msg: Any) -> None:
        """Append the boxes of ``msg`` (a part, a list of parts, or a subscription message a
        ZMTP 3.1 subscriber sends as a command) to the buffer list ``out``."""
        if msg.__class__ is list:
            last = len(msg) - 1
            for i, part in enumerate(msg):
                self.box(out, BOX_MORE if i < last else 0, part)
        elif self._subscriptions_as_commands and len(msg) and msg[0] < 2:
            name = SUBSCRIBE if msg[0] == 1 else CANCEL
            self.box(out, BOX_COMMAND, command_body(name, bytes(msg[1:])))
        else:
            self.box(out, 0, msg)

    def box(self, out: list[Any], flags: int, data: Any) -> None:
        if data.__class__ is not bytes:
            data = getattr(data, "buffer", data)  # a Frame: its buffer
        out.append(self._mechanism.encode_frame(flags, data))

    def open(self, items: list[Any]) -> tuple[list[Any], bool]:
        """Open MESSAGE frames into messages and commands; whether any is a command.  A fault
        raises with the messages opened before it."""
        decode = self._mechanism.decode_frame
        parts = self._parts
        out: list[Any] = []
        commands = False
        try:
            for item in items:
                if item.__class__ is bytes:
                    flags, data = decode(item)
                elif item.__class__ is Command and item.name == b"MESSAGE":  # sent as a command
                    flags, data = decode(b"\x07MESSAGE" + item.data)
                else:
                    raise UnexpectedFrame(
                        "unencrypted frame on a CURVE connection"
                        if item.__class__ is not Command
                        else f"unencrypted {item.name!r} command on a CURVE connection"
                    )
                if flags & BOX_COMMAND:
                    if flags & BOX_MORE or parts is not None:
                        raise MalformedCommand("command inside a multipart message")
                    out.append(parse_command(data))
                    commands = True
                else:
                    parts = add_part(out, parts, data, flags & BOX_MORE)
        except ProtocolError as exc:
            exc.messages = [item for item in out if item.__class__ is not Command]
            raise
        finally:
            self._parts = parts
        return out, commands

    def release(self) -> None:
        """The connection is over: drop an unfinished message."""
        self._parts = None

    def save(self) -> Any:
        """What :meth:`restore` needs to undo the ``open`` that follows (see
        ``FrameDecoder.save``): the unfinished message and the mechanism's received nonce."""
        parts = self._parts
        return None if parts is None else parts[:], self._mechanism.received_state()

    def restore(self, saved: Any) -> None:
        self._parts = saved[0]
        self._mechanism.restore_received(saved[1])
