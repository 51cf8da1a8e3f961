"""The stream engine: one OS connection speaking ZMTP, inside an I/O thread.

Theory of operation
-------------------
The engine moves bytes; :class:`~brokerless.zmtp.Connection` says what they mean and the
:class:`~.session.Session` owns the pipe to the socket.

* **In:** when the OS socket is readable, one ``recv_into`` fills the I/O thread's read buffer
  (one per thread, not per connection: an idle connection costs a few KiB, not the buffer) and
  the connection decodes it into whole messages, which go into the session's pipe.  Decoding
  copies whatever outlives the read (message bodies, a partial frame), so nothing handed on
  refers to the buffer the next read overwrites.  When the pipe is at its HWM the rest wait
  here and the engine stops reading (TCP then pushes back on the peer) until the socket drains
  the pipe (``restart_input``).  End of stream is only seen after every byte before it was
  read, so nothing a closing peer sent is lost.
* **Out:** the engine takes every message waiting in the pipe (up to a batch limit), encodes
  them into one list of buffers and writes it with ``sendmsg`` (large bodies are not copied).
  What the kernel does not take waits for the socket to become writable; when the pipe is empty
  the engine goes idle until the pipe signals new messages (``restart_output``).
* **Faults** (the peer's: garbage, wrong socket type, oversize frame, stalled handshake, missed
  heartbeats, a reset) close this connection only, with a reason, through ``session.engine_failed``.
  Each says what the monitor reports (see :mod:`brokerless.zmtp.errors`).
* **ZAP:** a handshake that must ask the ZAP handler pauses (a ``ZapRequest`` event): reading
  stops, the :class:`~.zap.ZapClient` asks, and its answer resumes the handshake on the I/O
  thread -- the thread never waits for the handler.
* **Lent input:** a message that has to wait for the I/O thread to get the GIL costs a thread
  hand-over per message -- the whole latency budget of a request and its reply -- so a REQ's or
  REP's thread about to block in ``recv`` with one network peer borrows the input side
  (``lend_input``): the I/O thread stops watching the descriptor, the socket's thread polls it
  together with its own mailbox and decodes what arrives straight into the pipe (``read_lent``,
  into that thread's own read buffer), then gives the input back (``return_input``).
  ``in_lock`` is held by whoever reads (either thread; the other only tries it and backs off).
  Whatever needs the I/O thread -- events (READY, PING), protocol errors, a broken connection,
  the end of the stream -- is left to it in order.  Closing while lent wakes the borrower, who
  closes the descriptor when it gives the input back, so a descriptor is never closed under a
  poll.
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
from typing import TYPE_CHECKING, Any

from ..constants import Event, SocketOption
from ..errno import EFAULT
from ..io.thread import READ_BUFFER_SIZE
from ..mailbox import WAKE
from ..zmtp import (
    AuthenticationFailed,
    Connection,
    HandshakeError,
    Ping,
    ProtocolError,
    Ready,
    ZapRequest,
    ZapUnavailable,
)
from .address import peer_address
from .zap import ZapClient

if TYPE_CHECKING:
    from ..io import IOThread, Timer
    from .session import Session

_O = SocketOption
READ = selectors.EVENT_READ
WRITE = selectors.EVENT_WRITE

BATCH_BYTES = 256 * 1024
BATCH_MESSAGES = 4096
ZERO_COPY_MIN = 64 * 1024  # bodies at least this large are written without being copied
IOV_MAX = 512


class Engine:
    """One ZMTP connection; see the module docstring."""

    def __init__(
        self, io: IOThread, session: Session, sock: pysocket.socket, conn: Connection, options: dict
    ) -> None:
        self.io = io
        self.session = session
        self.sock = sock
        self.conn = conn
        self.alive = True
        self._out: deque = deque()  # buffers accepted for writing, not yet taken by the kernel
        self._pending_in: list = []  # decoded items the pipe had no room for
        self._pending_events = False  # whether _pending_in may hold events, not just messages
        self._batch_limit = BATCH_MESSAGES  # messages per output batch (see _batch_limit)
        self._reading = True
        self._input_stopped = False  # stop_input: never read again
        self._writing = False  # registered for EVENT_WRITE
        self._events = 0
        self._timers: dict[str, Timer] = {}
        self._heartbeat_ivl = options[_O.HEARTBEAT_IVL] / 1000
        timeout = options[_O.HEARTBEAT_TIMEOUT]
        self._heartbeat_timeout = (timeout if timeout >= 0 else options[_O.HEARTBEAT_IVL]) / 1000
        self._heartbeat_ttl = options[_O.HEARTBEAT_TTL]
        self._last_rx = time.monotonic()
        self._handshake_ivl = options[_O.HANDSHAKE_IVL] / 1000
        self.fileno = sock.fileno()
        # Guards the output side (_out, sendmsg, the connection's command output): the I/O
        # thread and, for direct writes, the socket's thread.  Re-entrant because I/O-thread
        # paths nest (flush -> restart_output).
        self.out_lock = threading.RLock()
        # Held by whoever reads the descriptor and decodes (see "Lent input"); the order is
        # in_lock, then out_lock.  Re-entrant: a fault met while reading closes the engine.
        self.in_lock = threading.RLock()
        # Guards the selector registration and the hand-over of the descriptor (_lent, close).
        self._interest_lock = threading.Lock()
        self._lent = False  # the socket's thread is reading (see lend_input)
        self._restart_wanted = False  # restart_input found the input lent: run it again after
        self._zap: ZapClient | None = None
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
        if self._handshake_ivl > 0:
            self._timers["handshake"] = self.io.call_later(
                self._handshake_ivl, self._handshake_expired
            )

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
            if self._lent:  # the borrower polls the descriptor: it closes it when done
                self.session.socket.post(WAKE, None)
            else:
                self._close_socket()

    def _close_socket(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def fail(
        self, reason: str, code: int = 0, event: int = Event.HANDSHAKE_FAILED_PROTOCOL
    ) -> None:
        """Drop the connection (the peer's fault, or it went away); before the handshake
        completed, ``event`` with the value ``code`` goes to the monitor (none if 0)."""
        if self.alive:
            self.close()
            self.session.engine_failed(self, reason, code, event)

    @property
    def peer_address(self) -> bytes:
        """The peer's address as libzmq reports it (ZAP's address, the Peer-Address property)."""
        if self._peer_address is None:
            self._peer_address = peer_address(self.sock)
        return self._peer_address

    @property
    def output_pending(self) -> bool:
        return bool(self._out)

    # -- selector -----------------------------------------------------------------------------

    def _update_interest(self) -> None:
        """Watch what is wanted now (with ``_interest_lock`` held: both threads come here)."""
        if not self.alive:
            return
        events = (READ if self._reading and not self._lent else 0) | (WRITE if self._writing else 0)
        if events == self._events:
            return
        if not self._events:
            self.io.register(self.sock, events, self._on_ready)
        elif not events:
            self.io.unregister(self.sock)
        else:
            self.io.modify(self.sock, events, self._on_ready)
        self._events = events

    def _set_reading(self, reading: bool) -> None:
        self._reading = reading
        with self._interest_lock:
            self._update_interest()

    def _on_ready(self, mask: int) -> None:
        # Reading may have stopped since the selector reported READ (a lent read met the HWM):
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
        buf = self.io.read_buffer
        try:
            n = self.sock.recv_into(buf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self.fail(f"connection error: {exc.strerror or exc}")
            return
        if n == 0:
            self.fail("connection closed by the peer")
            return
        self._last_rx = time.monotonic()
        try:
            items = self.conn.receive_data(buf[:n])
        except ProtocolError as exc:
            self._protocol_failed(exc)
            return
        self._send_reply()
        if items:
            self._deliver(items, self.conn.had_events)

    def _protocol_failed(self, exc: ProtocolError) -> None:
        self._deliver(exc.messages, True)  # whole messages that came before the fault
        with self.out_lock:
            self._queue(self.conn.data_to_send())  # an ERROR command, if one was queued
            self._flush()
        self.fail(f"protocol error: {exc}", *failure_event(exc))

    def _send_reply(self) -> None:
        with self.out_lock:
            reply = self.conn.data_to_send()
            if reply:
                self._queue(reply)
                self._flush()

    def _deliver(self, items: list, events: bool) -> None:
        """Hand decoded items to the session in order: runs of messages into the pipe in one
        call each, events handled between them.  What the pipe cannot take waits."""
        if not events:
            self._push_run(items, 0, len(items), False)
            return
        start = 0
        for i, item in enumerate(items):
            cls = item.__class__
            if cls is bytes or cls is list:
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

    def _push_run(self, items: list, lo: int, hi: int, events: bool) -> bool:
        """Messages ``items[lo:hi]`` into the pipe; False when it is full (the rest of
        ``items`` then waits, and reading stops until the pipe drains)."""
        if lo == hi:
            return True
        run = items if lo == 0 and hi == len(items) else items[lo:hi]
        taken = self.session.push_many(run)
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

    # -- lent input (the socket's thread reads; see the module docstring) -----------------------

    def lend_input(self) -> bool:
        """Let the calling socket thread read the descriptor (``read_lent``) until it calls
        ``return_input``; False when the I/O thread must go on reading (busy, not in traffic,
        input stopped at the HWM or waiting for the I/O thread)."""
        if not self.in_lock.acquire(False):
            return False
        with self._interest_lock:
            if (
                self.alive
                and self._reading
                and not self._pending_in
                and self.conn.state == "TRAFFIC"
            ):
                self._lent = True
                self._update_interest()
                return True
        self._release_input()
        return False

    def return_input(self) -> None:
        """The borrower is done: the I/O thread watches the descriptor again (or, if the
        engine was closed meanwhile, the borrower closes it)."""
        with self._interest_lock:
            self._lent = False
            if self.alive:
                self._update_interest()
            else:
                self._close_socket()
        self._release_input()

    def _release_input(self) -> None:
        self.in_lock.release()
        if self._restart_wanted:  # restart_input found the lock taken: it runs again now
            self.io.call_soon(self._restart_and_wake)

    def read_lent(self) -> None:
        """Read and decode what the descriptor holds, into the pipe (the borrowing thread,
        after its poll said readable).  What only the I/O thread may handle is left to it:
        events are queued for ``restart_input`` with reading stopped, so nothing read later
        overtakes them; a broken or ended stream is simply not read (the I/O thread then sees
        it when it watches again)."""
        if not self.alive:
            return
        buf = _borrower_buffer()
        try:
            n = self.sock.recv_into(buf)
        except (BlockingIOError, InterruptedError, OSError):
            return  # OSError: the connection broke; the I/O thread meets it and says why
        if n == 0:
            return  # the end of the stream stays readable for the I/O thread
        self._last_rx = time.monotonic()
        with self.out_lock:  # decoding may queue a reply (PONG) in the connection's output
            try:
                items = self.conn.receive_data(buf[:n])
            except ProtocolError as exc:
                self._reading = False
                self.io.call_soon(self._protocol_failed, exc)
                return
            reply = self.conn.data_to_send()
            if reply:
                self._queue(reply)
                self._write_direct(more_queued=False)
        if not items:
            return
        if self.conn.had_events:
            self._pending_in = items
            self._pending_events = True
            self._reading = False
            self.io.call_soon(self._restart_and_wake)
        else:
            self._push_run(items, 0, len(items), False)

    def _restart_and_wake(self, _: Any = None) -> None:
        """The I/O thread's part of a lent read that left work here (events to deliver, or a
        restart_input that found the input lent): do it, then wake the socket's thread, which
        may borrow the input again."""
        self.restart_input()
        if self.alive:
            self.session.socket.post(WAKE, None)

    # -- output -------------------------------------------------------------------------------

    def _queue(self, data: bytes) -> None:
        if data:
            self._out.append(data)

    def try_direct_output(self, settle: bool) -> bool:
        """The socket's thread, having just queued into an idle connection, writes it to the
        OS socket itself: no hand-over to the I/O thread, no wait for the GIL.  For a socket
        whose every send is followed by a wait for a reply (``settle``: REQ, REP) that is all:
        once the pipe is empty its next message is signalled again, and the I/O thread has
        nothing to do.  Otherwise more sends may follow at once: the pipe's reader stays awake,
        so they are not signalled (and written) one by one, and the I/O thread is asked once
        to take them in batches -- as it is to finish a write the kernel took only part of.
        Returns False when the I/O thread must do it all (busy connection, handshake not
        done)."""
        lock = self.out_lock
        if not lock.acquire(False):
            return False
        try:
            if not self.alive or self.conn.state != "TRAFFIC" or self._out:
                return False
            msgs, asleep = self.session.pull_queued(BATCH_MESSAGES, settle)
            self._out.extend(self.conn.encode_batch(msgs, ZERO_COPY_MIN, _buffer))
            self._write_direct(more_queued=not asleep)
        finally:
            lock.release()
        return True

    def _write_direct(self, more_queued: bool) -> None:
        """Write what is queued from the socket's thread (``out_lock`` held).  What the kernel
        does not take, messages still queued in the pipe (``more_queued``) and a broken
        connection (met again, and closed, on its turn) are left to the I/O thread."""
        try:
            self._send_out()
        except OSError:
            pass
        if more_queued or self._out:
            self.io.call_soon(self._after_direct)

    def _after_direct(self, _: Any) -> None:
        """The I/O thread's turn after a direct write: finish what the kernel did not take,
        then take what was queued behind it (the pipe's reader was left awake, so nothing else
        will announce those messages)."""
        with self.out_lock:
            if self._out:
                self._flush()
            if not self._out:
                self.restart_output()

    def restart_output(self, _: Any = None) -> None:
        """Write one batch of what waits in the pipe.  A full batch means more may wait: the
        rest is queued behind the I/O thread's other work, so connections sharing the thread
        (a PUB's subscribers) take turns instead of one draining its pipe first."""
        with self.out_lock:
            self._restart_output()

    def _restart_output(self) -> None:
        if not self.alive or self.conn.state != "TRAFFIC" or self._out:
            return
        session = self.session
        msgs = session.pull_many(self._batch_limit)
        if len(msgs) == self._batch_limit:
            self.io.call_soon(self.restart_output)  # more may wait: after the others' turns
        elif not msgs:
            session.output_flushed(self)  # the pipe is empty: its next message wakes us
            return
        self._out.extend(self.conn.encode_batch(msgs, ZERO_COPY_MIN, _buffer))
        self._batch_limit = _batch_limit(msgs[-1])
        self._flush()

    def _flush(self) -> None:
        """Write what the kernel takes; wait for EVENT_WRITE for the rest (I/O thread only)."""
        try:
            self._send_out()
        except OSError as exc:
            self.fail(f"connection error: {exc.strerror or exc}")
            return
        writing = bool(self._out)
        if writing != self._writing and self.alive:
            self._writing = writing
            with self._interest_lock:
                self._update_interest()
        if not writing:
            self.session.output_flushed(self)

    def _send_out(self) -> None:
        """``sendmsg`` the queued buffers until done or the kernel pushes back (any thread,
        with ``out_lock`` held); OSError for a broken connection."""
        out = self._out
        sock = self.sock
        while out:
            try:
                n = sock.sendmsg(out if len(out) <= IOV_MAX else list(_head(out)))
            except (BlockingIOError, InterruptedError):
                return
            while n:
                first = out[0]
                size = len(first)
                if size <= n:
                    out.popleft()
                    n -= size
                else:
                    out[0] = memoryview(first)[n:]
                    n = 0

    # -- handshake and heartbeats -------------------------------------------------------------

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
            except ProtocolError as exc:
                self._protocol_failed(exc)
                return
            self._send_reply()
            if items:
                self._deliver(items, True)
            if self.alive and not self._pending_in and not self.conn.zap_waiting:
                self._set_reading(True)

    def _handshake_done(self, peer: Ready) -> None:
        timer = self._timers.pop("handshake", None)
        if timer:
            timer.cancel()
        self.session.engine_ready(self, peer)
        if self.alive and self._heartbeat_ivl > 0 and self.conn.heartbeats:  # none for ZMTP < 3
            self._timers["ping"] = self.io.call_later(self._heartbeat_ivl, self._send_ping)

    def _handshake_expired(self) -> None:
        if self.conn.state != "TRAFFIC":
            self.fail("handshake did not complete within HANDSHAKE_IVL")

    def _send_ping(self) -> None:
        if not self.alive:
            return
        idle = time.monotonic() - self._last_rx
        if self._heartbeat_timeout > 0 and idle >= self._heartbeat_ivl + self._heartbeat_timeout:
            self.fail("heartbeat timed out: no traffic from the peer")
            return
        with self.out_lock:
            self.conn.send_ping(self._heartbeat_ttl // 100)
            self._queue(self.conn.data_to_send())
            self._flush()
        self._timers["ping"] = self.io.call_later(self._heartbeat_ivl, self._send_ping)

    def _peer_ttl(self, ttl_deciseconds: int) -> None:
        """The peer asked to be dropped if it stays silent for its TTL (from its PING)."""
        old = self._timers.pop("ttl", None)
        if old:
            old.cancel()
        if ttl_deciseconds:
            self._watch_ttl(ttl_deciseconds / 10)

    def _watch_ttl(self, ttl: float) -> None:
        def expired() -> None:
            silent = time.monotonic() - self._last_rx
            if silent >= ttl:
                self.fail("the peer's heartbeat TTL expired")
            elif self.alive:
                self._timers["ttl"] = self.io.call_later(ttl - silent, expired)

        self._timers["ttl"] = self.io.call_later(ttl, expired)


_borrowers = threading.local()


def _borrower_buffer() -> memoryview:
    """The read buffer of a thread that reads a lent input (made on its first lent read)."""
    try:
        return _borrowers.buffer
    except AttributeError:
        _borrowers.buffer = memoryview(bytearray(READ_BUFFER_SIZE))
        return _borrowers.buffer


def failure_event(exc: ProtocolError) -> tuple[int, int]:
    """(value, event) the monitor reports for a failed handshake, as libzmq does: the ZAP
    status for an authentication failure, EFAULT when a required ZAP handler is missing, else
    libzmq's ZMTP/ZAP failure code with HANDSHAKE_FAILED_PROTOCOL."""
    if isinstance(exc, AuthenticationFailed):
        return exc.status, Event.HANDSHAKE_FAILED_AUTH
    if isinstance(exc, ZapUnavailable):
        return EFAULT, Event.HANDSHAKE_FAILED_NO_DETAIL
    return failure_code(exc), Event.HANDSHAKE_FAILED_PROTOCOL


def failure_code(exc: ProtocolError) -> int:
    """libzmq's ZMTP failure code for a protocol error (HANDSHAKE_FAILED_PROTOCOL's value):
    the error's own code, or, for the errors raised without one, told from the message."""
    if exc.code != Event.PROTOCOL_ERROR_ZMTP_UNSPECIFIED:
        return exc.code
    text = str(exc)
    if isinstance(exc, HandshakeError):
        if "mechanism" in text:
            return Event.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
        if "socket type" in text:
            return Event.PROTOCOL_ERROR_ZMTP_INVALID_METADATA
    if "command" in text:
        return Event.PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_UNSPECIFIED
    return Event.PROTOCOL_ERROR_ZMTP_UNSPECIFIED


def _batch_limit(msg: Any) -> int:
    """How many messages like ``msg`` make one batch (about BATCH_BYTES, at most
    BATCH_MESSAGES): the next batch is sized by the last message of this one."""
    size = len(msg) if msg.__class__ is not list else sum(map(len, msg))
    return max(1, min(BATCH_MESSAGES, BATCH_BYTES // (size + 1)))


def _buffer(part: Any) -> Any:
    """The raw buffer of a message part (a Frame is not a buffer on Python 3.11)."""
    buffer = getattr(part, "buffer", None)
    return buffer if buffer is not None else part


def _head(out: deque) -> Any:
    for i, buf in enumerate(out):
        if i == IOV_MAX:
            return
        yield buf
