"""The stream engine: one OS connection speaking ZMTP, inside an I/O thread.

Theory of operation
-------------------
The engine moves bytes; :class:`~brokerless.zmtp.Connection` says what they mean and the
session (:class:`~.engine_state.EngineOwner`) owns the pipe to the socket.  This module holds
the engine's life and its input; its other parts each have their own module: output in batches
and direct writes (:mod:`.engine_output`), the input lent to the socket's thread
(:mod:`.engine_lent`), the handshake deadline and heartbeats (:mod:`.engine_liveness`); the
threads and locks they share are in :mod:`.engine_state`.

* **In:** when the OS socket is readable, one ``recv_into`` fills the I/O thread's read buffer
  (one per thread, not per connection: an idle connection costs a few KiB, not the buffer) and
  the connection decodes it into whole messages, which go into the session's pipe.  Decoding
  copies whatever outlives the read (message bodies, a partial frame), so nothing handed on
  refers to the buffer the next read overwrites.  The rest of a large body is read as
  ``bytes`` of its own instead, and after it only the next frame's header, as the connection
  asks (``direct_read``, ``read_limit``; see "Large bodies" in :mod:`brokerless.zmtp.frames`).
  When the pipe is at its HWM the rest wait here and the engine stops reading (TCP then pushes
  back on the peer) until the socket drains the pipe (``restart_input``).  End of stream is
  only seen after every byte before it was read, so nothing a closing peer sent is lost.
* **Faults** (the peer's: garbage, wrong socket type, oversize frame, stalled handshake, missed
  heartbeats, a reset) close this connection only, with a reason, through
  ``session.engine_failed``; the error's ``code`` is what the monitor reports (see
  :mod:`brokerless.zmtp.errors`).  Whole messages decoded before a fault are delivered first.
* **Unread PONGs:** while what the engine wrote waits for the peer to read it, the peer's
  PINGs are not answered: their PONGs are dropped (on CURVE a dropped box only skips nonces,
  which RFC 26 allows: they need only increase).  What waits tells the peer as much as a PONG
  would, once it reads -- its heartbeat timeout counts any traffic, libzmq's as ours -- and a
  peer that pings and never reads costs nothing more than what it made us write already
  (libzmq too holds at most one PONG in that state).
* **ZAP:** a handshake that must ask the ZAP handler pauses (a ``ZapRequest`` event): reading
  stops, the :class:`~.zap.ZapClient` asks, and its answer resumes the handshake on the I/O
  thread -- the thread never waits for the handler.
* **Stopping input** (``stop_input``, for ``Socket.stop_receiving``): the engine reads nothing
  more from the descriptor, ever, and hands the session what it had decoded and was waiting for
  room in the pipe -- the session has lifted the pipe's HWM, which nothing can fill any more --
  so every message that came in whole reaches the socket.  The normal path pays nothing for
  this.  Writing goes on (a receiver may still answer).
* **Closing** leaves nothing that points back at the engine: its timers are cancelled (which
  drops their callbacks) and the I/O thread forgets the descriptor, so a closed connection is
  freed by reference counting at once, not by a later cyclic garbage collection.
"""

from __future__ import annotations

import selectors
import socket as pysocket
import threading
import time
from collections import deque
from collections.abc import Mapping
from errno import EPIPE
from typing import TYPE_CHECKING, Any

from ..constants import Event, SocketOption
from ..errno import EFAULT
from ..mailbox import WAKE
from ..runs import Run
from ..zmtp import (
    TRAFFIC,
    AuthenticationFailed,
    Ping,
    ProtocolError,
    Ready,
    ZapRequest,
    ZapUnavailable,
)
from .address import peer_address
from .engine_lent import LentInputMixin
from .engine_liveness import LivenessMixin
from .engine_output import BATCH_MESSAGES, OutputMixin
from .engine_state import EngineOwner, Wire
from .zap import ZapClient

if TYPE_CHECKING:
    from ..io import IOThread

_O = SocketOption
READ = selectors.EVENT_READ
WRITE = selectors.EVENT_WRITE


class Engine(OutputMixin, LentInputMixin, LivenessMixin):
    """One ZMTP connection; see the module docstring."""

    #: The monitor hears of its handshake (HANDSHAKE_SUCCEEDED); a raw connection has none.
    handshakes = True

    def __init__(
        self,
        io: IOThread,
        session: EngineOwner,
        sock: pysocket.socket,
        conn: Wire,
        options: Mapping[SocketOption, Any],
    ) -> None:
        self.io = io
        self.session = session
        self.sock = sock
        self.conn = conn
        self.alive = True
        self._out = deque()
        self._taken = deque()
        self._sent = deque()
        self._pending_in = []
        self._pending_events = False
        self._batch_limit = BATCH_MESSAGES  # messages per output batch (see engine_output)
        self._reading = True
        self._input_stopped = False  # stop_input: never read again
        self._writing = False  # registered for EVENT_WRITE
        self._events = 0
        self._timers = {}
        self._heartbeat_ivl = options[_O.HEARTBEAT_IVL] / 1000
        timeout = options[_O.HEARTBEAT_TIMEOUT]
        self._heartbeat_timeout = (timeout if timeout >= 0 else options[_O.HEARTBEAT_IVL]) / 1000
        self._heartbeat_ttl = options[_O.HEARTBEAT_TTL]
        self._last_rx = time.monotonic()
        self._handshake_ivl = options[_O.HANDSHAKE_IVL] / 1000
        self.fileno = sock.fileno()
        self.out_lock = threading.RLock()
        self.in_lock = threading.RLock()
        self._interest_lock = threading.Lock()
        self._lent = False
        self._borrowed = False
        self._loans = self._watched_loans = 0
        self._kept_at = 0.0
        self._loan_watched = False
        self._restart_wanted = False
        self._ended = False
        self._got = deque()
        self._lent_buffer: memoryview | None = None
        self._rcvtimeo = -1
        self._read_until = 0.0
        self._zap = None
        self._peer_address: bytes | None = None

    def __repr__(self) -> str:
        return f"<Engine {self.session.endpoint} {self.conn.state}>"

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        with self._interest_lock:
            self._update_interest()
        with self.out_lock:
            self._queue(self.conn.data_to_send())
            self._flush()
        self._start_handshake_timer()

    def close(self) -> None:
        with self.out_lock:  # never while the socket's thread is writing directly
            if not self.alive:
                return
            self.alive = False
            self.conn.close()  # a large partial frame is freed now, whatever holds the engine
        for timer in self._timers.values():
            timer.cancel()
        if self._zap is not None:
            self._zap.close()
        with self._interest_lock:
            self.io.unregister(self.sock)
            self._events = 0
            if self._borrowed:  # the borrower polls the descriptor: it closes it when done
                self.session.socket.post(WAKE, None)
            else:
                self._lent = False  # a loan kept, nobody borrowing: taken back
                self._close_socket()

    def _close_socket(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def fail(
        self,
        reason: str,
        code: int = 0,
        event: int = Event.HANDSHAKE_FAILED_PROTOCOL,
        protocol: bool = False,
    ) -> None:
        """Drop the connection (the peer's fault, or it went away); before the handshake
        completed, ``event`` with the value ``code`` goes to the monitor (none if 0).
        ``protocol``: the peer broke the protocol (a ZMTP error, a refused handshake), which
        libzmq does not reconnect after, as it does after a connection error or a timeout."""
        if self.alive:
            self.close()
            self.session.engine_failed(self, reason, code, event, protocol)

    @property
    def peer_address(self) -> bytes:
        """The peer's address as libzmq reports it (ZAP's address, the Peer-Address property)."""
        if self._peer_address is None:
            self._peer_address = peer_address(self.sock)
        return self._peer_address

    @property
    def output_pending(self) -> bool:
        return bool(self._out)

    # -- poller -------------------------------------------------------------------------------

    def _update_interest(self) -> None:
        """Watch what is wanted now (with ``_interest_lock`` held: both threads come here)."""
        if not self.alive:
            return
        events = (READ if self._reading and not self._lent else 0) | (WRITE if self._writing else 0)
        if events == self._events:
            return
        self._events = -1  # unknown until the poller has it: an interrupted call is made again
        self.io.watch(self.sock, events, self._on_ready)
        self._events = events

    def _set_reading(self, reading: bool) -> None:
        self._reading = reading
        with self._interest_lock:
            self._update_interest()

    def _on_ready(self, mask: int) -> None:
        # Reading may have stopped since the poller reported READ (a lent read met the HWM):
        # then nothing may be read ahead of what waits.  In_lock busy: the socket's thread reads.
        if mask & READ and self._reading and self.in_lock.acquire(False):
            try:
                if self._reading:
                    self._in_event()
            finally:
                self.in_lock.release()
        if mask & WRITE and self.alive:
            with self.out_lock:
                self._flush()
                if not self._out and self.alive:
                    self.restart_output()

    # -- input --------------------------------------------------------------------------------

    def _in_event(self) -> None:
        try:  # (MSG_DONTWAIT: see engine_lent.await_lent)
            direct = self._direct_size()
            if direct:  # the rest of a large body, as bytes of its own (see zmtp.frames)
                data: bytes | memoryview = self.sock.recv(direct, pysocket.MSG_DONTWAIT)
            else:
                buf = self.io.read_buffer
                limit = self.conn.read_limit
                data = buf[: self.sock.recv_into(buf, limit, pysocket.MSG_DONTWAIT)]
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self.connection_lost(f"connection error: {exc.strerror or exc}", exc.errno or 0)
            return
        if not data:
            self.connection_lost("connection closed by the peer", EPIPE)
            return
        self._last_rx = time.monotonic()
        self._on_input(data)

    def _on_input(self, data: bytes | memoryview) -> None:
        """Decode what was read and hand on what it completes (``in_lock`` held, I/O
        thread)."""
        pongs = self.conn.state is TRAFFIC  # all decoding traffic queues (see "Unread PONGs")
        try:
            with self.out_lock:  # a PONG it queues is boxed with the direct writer's nonces
                items, events = self.conn.receive(data)
        except ProtocolError as exc:
            self._protocol_failed(exc)
            return
        self._send_reply(pongs)
        if items:
            self._deliver(items, events)

    def _on_got(self) -> None:
        """Decode what an interrupted lent read left: octets, or how many it read into the
        lent buffer (``in_lock`` held, I/O thread; see "Interruptions" in :mod:`.engine_state`)."""
        data = self._got.popleft()
        if data.__class__ is int:
            assert self._lent_buffer is not None  # (what the count was read into)
            data = self._lent_buffer[:data]
        self._on_input(data)

    def _protocol_failed(self, exc: ProtocolError, protocol: bool = True) -> None:
        """The connection breaks on ``exc`` (see ``fail`` for ``protocol``)."""
        self._deliver(exc.messages, True)  # whole messages that came before the fault
        with self.out_lock:
            self._queue(self.conn.data_to_send())  # an ERROR command, if one was queued
            self._flush()
        self.fail(f"protocol error: {exc}", *failure_event(exc), protocol=protocol)

    def _send_reply(self, pongs: bool = False) -> None:
        """Write what the connection queued; ``pongs``: only PONGs, dropped while what waits is
        unread (see "Unread PONGs")."""
        with self.out_lock:
            reply = self.conn.data_to_send()
            if pongs and self._out:
                return
            if reply:
                self._write_command(reply)

    def _deliver(self, items: list[Any], events: bool) -> None:
        """Hand decoded items to the session in order: runs of messages into the pipe in one
        call each, events handled between them.  What the pipe cannot take waits."""
        if not events:
            self._push_run(items, 0, len(items), False)
            return
        start = 0
        for i, item in enumerate(items):
            cls = item.__class__
            if cls is bytes or cls is list or cls is Run:
                continue
            if not self._push_run(items, start, i, True):
                return
            start = i + 1
            if cls is Ready:
                self._handshake_done(item)
                if not self.alive:
                    return
            elif cls is Ping:
                self._peer_ttl(item.ttl)
            elif cls is ZapRequest:
                self._ask_zap(item)
        self._push_run(items, start, len(items), True)

    def _push_run(self, items: list[Any], lo: int, hi: int, events: bool) -> bool:
        """Messages ``items[lo:hi]`` into the pipe; False when it is full (the rest of
        ``items`` then waits, and reading stops until the pipe drains)."""
        if lo == hi:
            return True
        run = items if lo == 0 and hi == len(items) else items[lo:hi]
        taken = self.session.push_many(run, events)
        if taken == len(run):
            return True
        self._pending_in = items[lo + taken :]
        self._pending_events = events
        self._set_reading(False)
        return False

    def restart_input(self, _: Any = None) -> None:
        """The pipe has room again (or a lent read left work here): deliver what waited, then
        read on (I/O thread)."""
        self._restart_wanted = True  # before trying the lock: see return_input
        if not self.in_lock.acquire(False):
            return  # the socket's thread reads; it calls us again when it gives the input back
        try:
            self._restart_wanted = False
            pending, self._pending_in = self._pending_in, []
            if pending:
                self._deliver(pending, self._pending_events)
                if self._pending_in:
                    return
            if self._got and self.alive:  # read by an interrupted lent read, not decoded
                self._on_got()
                if self._pending_in:
                    return
            if not self._reading and self.alive and not self._input_stopped:
                self._set_reading(True)
        finally:
            self.in_lock.release()

    def stop_input(self) -> None:
        """Read nothing more, and hand the session what waited for room in the pipe (I/O
        thread; see "Stopping input": the session has lifted the pipe's HWM first)."""
        with self.in_lock:  # a read in progress (a lent one) ends first
            self._input_stopped = True
            self._set_reading(False)
            pending, self._pending_in = self._pending_in, []
            if pending and self.alive:
                self._deliver(pending, self._pending_events)
            if self._got and self.alive:
                self._on_got()

    # -- ZAP ----------------------------------------------------------------------------------

    def _ask_zap(self, request: ZapRequest) -> None:
        """The handshake waits for the ZAP handler: read nothing more until it answered."""
        self._set_reading(False)
        if self._zap is None:
            self._zap = ZapClient(self.io, self.session.socket.context._inproc, self._zap_answered)
        self._zap.ask(request, self.peer_address)

    def _zap_answered(self, frames: list[bytes] | None) -> None:
        if not self.alive:
            return
        with self.in_lock:
            try:
                items = self.conn.zap_reply(frames)
            except AuthenticationFailed as exc:
                if exc.status == 300:  # a temporary failure: libzmq neither answers nor closes
                    # -- the handshake stalls until HANDSHAKE_IVL ends it, so the peer does not
                    # come straight back to ask the handler again (a retry storm on it).
                    session = self.session
                    session.socket.emit(Event.HANDSHAKE_FAILED_AUTH, 300, session.endpoint)
                    self._set_reading(False)
                    return
                # Refused by our own handler: libzmq sends the ERROR and sees the peer close,
                # a connection error -- an endpoint that connects tries again (a server that
                # connects to its clients gets them back once the handler admits them).
                self._protocol_failed(exc, protocol=False)
                return
            except ProtocolError as exc:
                self._protocol_failed(exc)
                return
            self._send_reply()
            if items:
                self._deliver(items, True)
            if self.alive and not self._pending_in and not self.conn.zap_waiting:
                self._set_reading(True)


def failure_event(exc: ProtocolError) -> tuple[int, int]:
    """(value, event) the monitor reports for a failed handshake, as libzmq does: the ZAP
    status for an authentication failure, EFAULT when a required ZAP handler is missing, else
    libzmq's ZMTP/ZAP failure code with HANDSHAKE_FAILED_PROTOCOL."""
    if isinstance(exc, AuthenticationFailed):
        return exc.status, Event.HANDSHAKE_FAILED_AUTH
    if isinstance(exc, ZapUnavailable):
        return EFAULT, Event.HANDSHAKE_FAILED_NO_DETAIL
    return exc.code, Event.HANDSHAKE_FAILED_PROTOCOL
