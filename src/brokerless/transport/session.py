"""Sessions: the socket's peer for one network connection, living in an I/O thread.

Theory of operation
-------------------
A session owns the far end of one pipe to the socket and at most one :class:`Engine` at a time.
It is what makes a connection *disconnected-tolerant*:

* a **connecting** session is made by ``connect``; unless IMMEDIATE is set (or the socket is a
  ROUTER, which needs the peer's identity first) its pipe exists at once, so messages queue
  (within HWM) before the peer is there and while it is away; when its engine fails it keeps the
  pipe, hiccups it (the socket's pattern resends what the next connection needs from the start:
  a subscriber's subscriptions) and reconnects after RECONNECT_IVL, doubling up to
  RECONNECT_IVL_MAX;
* an **accepted** session is made per incoming connection and gets its pipe when the handshake
  completes; when its engine fails the pipe is closed and the session ends.

Stopping input (``Socket.stop_receiving``): a session stops reconnecting, lifts its pipe's
HWM towards the socket (nothing more can come in to fill it) and its engine stops reading,
after handing the pipe whatever it had decoded; the pipe and the connection stay (what the
socket sends still goes out) until the socket closes.

Closing: the socket terminates the pipe; the session sends what is still queued (reading to the
delimiter), then ends.  LINGER bounds that: 0 drops the rest at once, a positive value arms a
timer, -1 waits.  Every session registers with its context so ``term()`` can wait for them.
An ended session cancels its timers and drops its connector, so nothing it leaves behind points
back at it: it is freed as soon as the socket and the listener let go of it.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..constants import Event, SocketOption, SocketType
from ..mailbox import Command
from ..pipe import Pipe, pipepair
from ..security import as_server, mechanism
from ..zmtp import Connection, Ready

if TYPE_CHECKING:
    from ..io import IOThread, Timer
    from .engine import Engine
    from .port import SocketPort

_O = SocketOption


class Session:
    """See the module docstring."""

    def __init__(
        self,
        io: IOThread,
        socket: SocketPort,
        endpoint: str,
        *,
        connecting: bool,
        on_done: Callable[[Session], None] | None = None,
    ) -> None:
        self.io = io
        self.socket = socket
        self.endpoint = endpoint
        self.connecting = connecting
        self.pipe: Pipe | None = None
        self.engine: Engine | None = None
        self.connector: Any = None  # set by the transport for connecting sessions
        # CONNECT_ROUTING_ID when this connection was made (the option is cleared then): a
        # ROUTER's or STREAM's name for the peer, each time the connection is made again.
        self.connect_routing_id: bytes = (
            socket.options[_O.CONNECT_ROUTING_ID] if connecting else b""
        )
        self.closing = False
        self.done = False
        self._on_done = on_done
        self._linger_timer: Timer | None = None
        self._reconnect_timer: Timer | None = None
        opts = socket.options
        self.immediate = bool(opts[_O.IMMEDIATE])
        self.reconnect_ivl = opts[_O.RECONNECT_IVL] / 1000
        self._backoff = self.reconnect_ivl
        self.last_error = ""
        socket.context._session_started(self)

    def __repr__(self) -> str:
        return f"<Session {self.endpoint} {'connecting' if self.connecting else 'accepted'}>"

    # -- the pipe -----------------------------------------------------------------------------

    def make_pipe(self, peer: Ready | None = None) -> Pipe:
        """Create the pipe pair; returns the socket's end (the caller hands it to the socket)."""
        opts = self.socket.options
        conflate = bool(opts[_O.CONFLATE]) and self.socket.socket_type in _CONFLATABLE
        theirs, mine = pipepair((opts[_O.SNDHWM], opts[_O.RCVHWM]), (None, None), conflate)
        mine.owner = self
        theirs.source = self
        mine.endpoint = theirs.endpoint = self.endpoint
        theirs.routing_id = self.connect_routing_id  # (the socket's name for this peer, if any)
        if peer is not None:
            theirs.peer_routing_id = peer.routing_id
        # The socket's greeting (subscriptions, probe, welcome) goes in now, not when the
        # socket's thread gets round to attaching the pipe.
        greeting = self.socket.greeting()
        for msg in greeting:
            theirs.force_write(msg)
        theirs.greeted = tuple(greeting)
        self.pipe = mine
        return theirs

    def send_command(self, command: Command, arg: Any) -> None:
        """Pipe owner interface: pipe events arrive from the socket's thread.  New messages for
        an idle connection are written by that thread itself (``Engine.try_direct_output``)."""
        if command is Command.ACTIVATE_READ and arg is self.pipe:
            engine = self.engine
            try:
                if (
                    engine is not None
                    and not self.io.is_current
                    and engine.try_direct_output(self.socket.lock_step)
                ):
                    return
            except BaseException:  # interrupted (see Engine.try_direct_output): the I/O thread
                self.io.call_soon(self._on_command, (command, arg))  # takes over
                raise
        self.io.call_soon(self._on_command, (command, arg))

    def _on_command(self, item: tuple[Command, Pipe]) -> None:
        command, pipe = item
        if pipe is not self.pipe or self.done:
            return
        if command is Command.ACTIVATE_READ:
            if self.engine is not None:
                self.engine.restart_output()
        elif command is Command.ACTIVATE_WRITE:
            if self.engine is not None:
                self.engine.restart_input()
        elif command is Command.PIPE_TERM:
            self.closing = True
            if pipe.process_pipe_term():
                self.pipe_terminated(pipe)
                self._finish_if_flushed()
            else:
                self._start_linger()
                if self.engine is not None:
                    self.engine.restart_output()

    def pipe_terminated(self, pipe: Pipe) -> None:
        """The socket closed its end and everything it sent has been read.

        Called from inside the engine's read of the pipe, while it may still hold encoded
        messages: the engine reports ``output_flushed`` once they are written, and we end then
        -- or when LINGER runs out (the socket's PIPE_TERM, which would arm it, may come only
        after this and then finds no pipe).
        """
        if pipe is not self.pipe:
            return
        self.pipe = None
        self.closing = True
        if self.engine is None:
            self._finish()
        else:
            self._start_linger()

    def lend_input(self, large_only: bool = False) -> Engine | None:
        """Input source interface (``Pipe.source``): the connection's input for the socket's
        thread, while it waits for a message (see :mod:`.engine_lent`).  Never into a pipe
        that conflates: what a lent read decodes goes in by ``push_from``, which keeps every
        message."""
        engine = self.engine
        pipe = self.pipe
        if (
            engine is None
            or (pipe is not None and pipe.outbound.conflate)
            or not engine.lend_input(large_only)
        ):
            return None
        return engine

    def push_many(self, msgs: list[Any], runs: bool = False) -> int:
        """Messages from the wire for the socket; returns how many the pipe took.  ``runs``:
        :class:`~brokerless.runs.Run` items may be among them."""
        pipe = self.pipe
        if pipe is None:
            return len(msgs)  # the socket is gone: drop
        return pipe.write_many(msgs, runs)

    def push_from(self, source: Iterator[Any], count: int) -> bool:
        """``push_many`` for the socket's thread (see ``Pipe.write_from``): takes ``count``
        messages from ``source``; False when some are left there."""
        pipe = self.pipe
        if pipe is None:
            deque(source, maxlen=0)  # the socket is gone: drop
            return True
        return pipe.write_from(source, count)

    def stop_input(self, _: Any = None) -> None:
        """The socket takes nothing more from the network: no reconnecting, and the engine
        reads nothing more (after handing over what it decoded).  A session between two
        connections has nothing left to do and ends now (its pipe stays with the socket, with
        what it holds); one with a connection ends when that does.  I/O thread."""
        if self._reconnect_timer is not None:
            self._reconnect_timer.cancel()
            self._reconnect_timer = None
        if self.connector is not None:
            self.connector.close()
            self.connector = None  # a failed engine then ends the session: no reconnect
        if self.engine is not None:
            if self.pipe is not None:
                self.pipe.set_writer_hwm(0)  # no HWM: what the engine decoded all goes in
            self.engine.stop_input()
        else:
            self._finish()  # nothing would hold it or end it any more

    def pull_many(self, limit: int) -> list[Any]:
        """Up to ``limit`` messages the socket sent (empty: its next message wakes us)."""
        pipe = self.pipe
        return [] if pipe is None else pipe.read_many(limit)

    def take_queued(self, into: deque[Any], limit: int, settle: bool) -> bool:
        """Move what the socket has queued now into ``into`` (for a direct write by the
        socket's thread); whether its next message will be signalled (see
        ``Pipe.read_queued``)."""
        pipe = self.pipe
        return False if pipe is None else pipe.read_queued(into, limit, settle)

    # -- engine events ------------------------------------------------------------------------

    def attach_engine(self, engine: Engine) -> None:
        self.engine = engine
        engine.start()

    def engine_ready(self, engine: Engine, peer: Ready) -> None:
        """Handshake complete: make sure there is a pipe, then let messages flow."""
        self._backoff = self.reconnect_ivl
        if self.closing and self.pipe is None:
            engine.close()
            self._finish()
            return
        if self.pipe is None:
            theirs = self.make_pipe(peer)
            theirs.metadata = _properties(engine, peer)
            self.socket.post(Command.ATTACH, theirs)
        else:
            socket_end = self.pipe.peer
            assert socket_end is not None  # pipepair made both ends
            socket_end.metadata = _properties(engine, peer)  # this connection's, from now
        # After ATTACH is queued: whoever waits for this event finds the pipe on its next call.
        if engine.handshakes:
            self.socket.emit(Event.HANDSHAKE_SUCCEEDED, 0, self.endpoint)
        engine.restart_output()

    def engine_failed(
        self,
        engine: Engine,
        reason: str,
        code: int = 0,
        event: int = Event.HANDSHAKE_FAILED_PROTOCOL,
        protocol: bool = False,
    ) -> None:
        """The connection ended: ``reason`` says why; before the handshake completed, the
        monitor gets ``event`` with ``code`` (a ZMTP failure code, a ZAP status), if not 0.
        After a ``protocol`` error (the peer's socket type refused, its credentials denied,
        a malformed frame) the endpoint ends, pipe and all, as libzmq's session does: a
        reconnection would only meet the same peer again."""
        if engine is not self.engine:
            return
        self.engine = None
        self.last_error = reason
        if engine.conn.peer is None or not engine.handshakes:
            # the handshake failed (a raw connection's never succeeds): said first, as libzmq
            if code:
                self.socket.emit(event, code, self.endpoint)
            else:
                self.socket.emit(Event.HANDSHAKE_FAILED_NO_DETAIL, 0, self.endpoint)
        # Every connection the monitor saw made is seen to end, handshake or not.
        self.socket.emit(Event.DISCONNECTED, engine.fileno, self.endpoint)
        if not self.connecting or protocol or (self.closing and self.pipe is None):
            self._drop_pipe()
            self._finish()
            return
        # A closed socket's messages still wait in the pipe: keep reconnecting until they are
        # delivered or LINGER runs out.  Otherwise IMMEDIATE (and ROUTER) queue only over a
        # live connection.
        if (
            not self.closing
            and self.pipe is not None
            and (self.immediate or self._needs_identity())
        ):
            self._drop_pipe()
        elif not self.closing and self.pipe is not None:
            self.pipe.hiccup()
        if not self._reconnects():  # libzmq then ends the endpoint, pipe and all
            self._drop_pipe()
        self._schedule_reconnect()

    def output_flushed(self, engine: Engine) -> None:
        if self.closing and self.pipe is None:
            self._finish_if_flushed()

    # -- reconnecting -------------------------------------------------------------------------

    def connect_failed(self) -> None:
        if self.done:
            return
        if self.closing and self.pipe is None:
            self._finish()  # nothing left to deliver
        else:
            self._schedule_reconnect()

    def _reconnects(self) -> bool:
        """Whether a connection lost or refused is made again: not with RECONNECT_IVL 0 or
        -1, nor once the interpreter is exiting (see :mod:`brokerless.context`)."""
        return (
            self.reconnect_ivl > 0
            and self.connector is not None
            and not self.socket.context._exiting
        )

    def _schedule_reconnect(self) -> None:
        if not self._reconnects():
            self._finish()  # (and no CONNECT_RETRIED)
            return
        # As libzmq's: with RECONNECT_IVL_MAX, RECONNECT_IVL doubling up to it, exactly;
        # without, RECONNECT_IVL plus a random share of it, so that peers that lost one server
        # together do not all come back at the same instant.  The monitor is told the wait.
        ivl_max = self.socket.options[_O.RECONNECT_IVL_MAX]
        if ivl_max > 0:
            delay_ms = min(round(self._backoff * 1000), ivl_max)
            self._backoff = min(self._backoff * 2, ivl_max / 1000)
        else:
            ivl = round(self.reconnect_ivl * 1000)
            delay_ms = ivl + random.randrange(ivl)
        self.socket.emit(Event.CONNECT_RETRIED, delay_ms, self.endpoint)
        self._reconnect_timer = self.io.call_later(delay_ms / 1000, self._reconnect)

    def _reconnect(self) -> None:
        if not self.done:  # a closing session still delivers what it holds, within LINGER
            self.connector.start()

    def _needs_identity(self) -> bool:
        return self.socket.socket_type == SocketType.ROUTER

    # -- closing ------------------------------------------------------------------------------

    def close(self, _: Any = None) -> None:
        """Stop now (disconnect, unbind, or the socket went away without a pipe)."""
        self.closing = True
        self._drop_pipe()
        self._finish()

    def _drop_pipe(self) -> None:
        pipe = self.pipe
        if pipe is not None:
            self.pipe = None
            pipe.terminate()

    def _start_linger(self) -> None:
        linger = self.socket.options[_O.LINGER]
        if (
            linger == 0
            or (self.engine is None and not self.connecting)
            or (self.socket.context._exiting and self._between_attempts())
        ):
            self.close()
        elif linger > 0 and self._linger_timer is None:
            self._linger_timer = self.io.call_later(linger / 1000, self.close)

    def _between_attempts(self) -> bool:
        """No connection, and none being made (a refused or lost one waits to be retried)."""
        return self.engine is None and not (
            self.connector is not None and self.connector.in_progress
        )

    def exiting(self) -> None:
        """The interpreter is exiting (any thread): a session lingering for a peer it is not
        connected to, nor connecting to, gives up, as one closing from now on does
        (``_start_linger``); an attempt under way ends without a retry (``_reconnects``)."""
        self.io.call_soon(self._give_up_between_attempts)

    def forked(self) -> None:
        """A forked child's copy (see ``brokerless.context``): its engine writes nothing more
        -- the socket's sends stay queued, as in a pyzmq child -- and reads nothing."""
        if self.engine is not None:
            self.engine.alive = False

    def _give_up_between_attempts(self, _: Any = None) -> None:
        if self.closing and not self.done and self._between_attempts():
            self.close()

    def _finish_if_flushed(self) -> None:
        engine = self.engine
        if engine is None or not engine.output_pending:
            self._finish()

    def _finish(self) -> None:
        if self.done:
            return
        self.done = True
        self.closing = True
        for timer in (self._linger_timer, self._reconnect_timer):
            if timer is not None:
                timer.cancel()  # drops the callback: nothing keeps this session alive
        if self.engine is not None:
            self.engine.close()
            self.engine = None
        if self.connector is not None:
            self.connector.close()
            self.connector = None  # it points back here: no cycle left for the GC to find
        if self._on_done is not None:
            self._on_done(self)
        self.socket.context._session_finished(self)


_CONFLATABLE = frozenset(
    {SocketType.DEALER, SocketType.PULL, SocketType.PUSH, SocketType.PUB, SocketType.SUB}
)


def new_connection(session: Session) -> Connection:
    """The protocol state for a new connection of ``session``, with the mechanism its socket's
    options choose (see :mod:`brokerless.security`)."""
    opts = session.socket.options
    return Connection(
        session.socket.socket_type,
        opts[_O.ROUTING_ID],
        as_server=as_server(opts),
        max_msg_size=opts[_O.MAXMSGSIZE],
        mechanism=mechanism(opts),
        metadata=opts[_O.METADATA] or None,
        runs=True,
    )


def _properties(engine: Engine, peer: Ready) -> dict[str, bytes]:
    """What messages from this connection carry (``Frame.get``), as libzmq builds it: the peer's
    address first, then the ZAP handler's properties, then the peer's (none replaces another)."""
    props = {"Peer-Address": engine.peer_address}
    for name, value in peer.properties.items():
        props.setdefault(name, value)
    return props
