"""The wire of a STREAM socket: raw bytes, no ZMTP.

Theory of operation
-------------------
:class:`RawConnection` stands in for the ZMTP :class:`~brokerless.zmtp.Connection` with the
same small sans-I/O interface, so the :class:`~.engine.Engine` drives it unchanged: it is in
TRAFFIC from the start (no greeting, no handshake), ``receive`` turns each read into
single-part messages of at most ``CHUNK`` octets, as libzmq does (copies: the engine's read
buffer is reused), ``encode_batch`` writes each
message's bytes as they are (large ones by reference, runs of small ones joined), and
``data_to_send`` never has anything of its own.

:class:`RawEngine` is the engine with the two things a raw connection adds, as libzmq's raw
engine does: it has no handshake timeout and no heartbeats, and with STREAM_NOTIFY set it shows
the socket the connection's life -- an empty message when it opens (after the session made or
found its pipe) and one when it ends while the pipe is still there (the peer closed, a reset,
...), queued past the HWM so it is never lost.  A connection the application closed (by sending
``[id, b""]``) or a socket that is closing has no pipe left: nothing is announced then.  The
monitor sees what libzmq's shows: CONNECTED / ACCEPTED when the connection opens (no
HANDSHAKE_SUCCEEDED: there is no handshake) and, when the peer ends it,
HANDSHAKE_FAILED_NO_DETAIL with the errno (EPIPE when it closed, ECONNRESET, ...) -- libzmq's
raw connection never leaves its handshake -- then DISCONNECTED.
"""

from __future__ import annotations

import socket as pysocket
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..constants import SocketOption, SocketType
from ..zmtp import Ready
from ..zmtp.connection import ERROR_STATE, TRAFFIC
from ..zmtp.encoder import encode_batch
from .engine import Engine

if TYPE_CHECKING:
    from ..io import IOThread
    from .engine_state import EngineOwner

_O = SocketOption

#: The most one received message holds (libzmq's in_batch_size): what a peer can make a STREAM
#: socket hold is RCVHWM messages of this size per connection.
CHUNK = 8192


class RawConnection:
    """A connection that carries bytes as they are; see the module docstring."""

    def __init__(self) -> None:
        self.state = TRAFFIC
        self.peer: Ready | None = None

    #: A raw peer has no heartbeats and no handshake (so nothing waits for ZAP).
    heartbeats = False
    zap_waiting = False
    has_output = False  # (nothing is queued but messages)
    large_frames = False  # (nor frames)
    direct_read = wait_read = read_limit = 0  # (every read goes into the buffer, whole)

    def opening(self) -> list[Any]:
        """What the engine delivers when the connection is made: the event that makes the
        session attach its pipe (a raw peer announces nothing: no type, no id)."""
        self.peer = Ready(SocketType.STREAM, b"", {}, 0)
        return [self.peer]

    def receive(self, data: bytes | bytearray | memoryview) -> tuple[list[Any], bool]:
        """Each read as messages of at most CHUNK octets; never an event."""
        if len(data) <= CHUNK:
            return [bytes(data)], False
        view = memoryview(data)
        return [bytes(view[i : i + CHUNK]) for i in range(0, len(view), CHUNK)], False

    def save_input(self) -> None:
        return None

    def restore_input(self, saved: None) -> None:
        pass

    def zap_reply(self, frames: list[bytes] | None) -> list[Any]:
        raise RuntimeError("a raw connection has no handshake to ask ZAP about")

    def send_ping(self, ttl_deciseconds: int, context: bytes = b"") -> None:
        raise RuntimeError("a raw connection has no heartbeats")

    def data_to_send(self) -> bytes:
        return b""

    def encode_batch(self, msgs: list[Any], zero_copy_min: int, as_buffer: Any = None) -> list[Any]:
        return encode_batch(msgs, zero_copy_min, as_buffer, _unframed)

    def close(self) -> None:
        """Nothing is buffered here; the state says the connection is over."""
        self.state = ERROR_STATE


def _unframed(out: list[Any], msg: Any) -> None:
    out.append(msg)


class RawEngine(Engine):
    """The engine of one STREAM connection; see the module docstring."""

    def __init__(
        self,
        io: IOThread,
        session: EngineOwner,
        sock: pysocket.socket,
        options: Mapping[SocketOption, Any],
    ) -> None:
        # No handshake to time out, no ZMTP heartbeats: a raw peer has neither.
        options = {**options, _O.HANDSHAKE_IVL: 0, _O.HEARTBEAT_IVL: 0}
        super().__init__(io, session, sock, RawConnection(), options)
        self._notify = bool(options[_O.STREAM_NOTIFY])

    conn: RawConnection
    handshakes = False

    def start(self) -> None:
        super().start()
        opening = self.conn.opening()
        self._deliver(opening, True)  # the session attaches (or finds) its pipe
        if self._notify and self.alive:
            self._announce()

    def close(self) -> None:
        if self.alive and self._notify:
            self._announce()  # before the session drops the pipe (see the module docstring)
        super().close()

    def _announce(self) -> None:
        """An empty message for the socket: the connection opened, or ended."""
        pipe = self.session.pipe
        if pipe is not None and not pipe.terminating:
            pipe.force_write(b"")
