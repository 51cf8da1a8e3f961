"""Lent input: the socket's thread reads its connection itself while it waits for a message.

Theory of operation
-------------------
A message that has to wait for the I/O thread to get the GIL costs a thread hand-over -- the
whole latency budget of a request and its reply.  So a REQ's or REP's thread about to block in
``recv`` with one network peer borrows the connection's input (``lend_input``, asked through
the pipe's source, :class:`~brokerless.pipe.InputSource`): the I/O thread stops watching the
descriptor, the socket's thread polls it together with its own mailbox and decodes what arrives
straight into the pipe (``read_lent``), then gives the input back (``return_input``).  A PULL
borrows too, but only while its peer's last read began with a large frame (``large_only``;
:data:`~brokerless.zmtp.frames.LARGE`): a large body made by the I/O thread and freed by the
socket's thread comes back from the allocator as fresh pages and costs a wake-up, where the
socket's thread reading it itself pays neither (tcp 64 KiB messages about 1.4-2x as fast);
smaller messages are cheaper read ahead by the I/O thread while the socket's thread consumes.
Large frames are read into a buffer of the engine's own (``recv_into``, decoded from a view of
it, each body copied once; made on the first such read) -- but the rest of a body of
:data:`~brokerless.zmtp.frames.DIRECT_MIN` or more straight into ``bytes`` of its own, as much of
it as the kernel holds, and then the next header alone, as the connection asks (``direct_read``,
``read_limit``; ``_direct_size``) -- anything else as ``bytes``.  A header read alone is followed
at once by its body's read when the kernel holds all of it (``read_lent``), and however much of
an unfinished message has come, the borrower keeps the input to its end: a bound on that (twice
LARGE) handed large messages to the I/O thread halfway, and cost 200 kB messages a third of
their rate once their bodies were read on their own (BENCHMARKS.md, *Wire throughput*).  A rest
larger than one direct read (``wait_read``) is waited for in one read, within what is left of
the ``recv``'s timeout and :data:`WAIT_READ_MS` at a time, so the body is the ``bytes`` that
read made: in direct reads its pieces were joined in one more copy of the whole (4 MiB
messages 1.4-1.5x as fast).  It is waited for once a frame, and only when the kernel holds
some of it already (``_direct_size``); while it lasts, heartbeats take the peer for alive
(``_read_until``: what comes goes into that read, where a peek does not see it).

A request and its reply alternate, so the input is usually borrowed again within one round
trip: a borrower may *keep* the loan when it is done (``return_input(keep=True)``), and the
poller is not touched for the next reply -- two ``epoll_ctl`` calls a round trip fewer, one
of them on the critical path.  While a loan is kept and nobody borrows it, nobody reads the
descriptor, so it goes back to the I/O thread as soon as it could be wanted there:

* when the socket's thread waits any other way or gives up (``give_back``: a poll, EVENTS, a
  non-blocking ``recv`` that finds nothing, a proxy taking the socket) -- reading first what
  came meanwhile, so that a reply already here is seen at once, as the I/O thread would have
  read it;
* when it could not be lent now (reading stopped at the HWM or for events the I/O thread must
  handle, the end of the stream);
* when nobody borrowed it for :data:`LOAN_IDLE` (``_watch_loan``, a timer of the I/O thread:
  a socket left alone after its last reply has its connection read again -- PINGs answered,
  the end of the stream seen -- within about that long).  The timer runs while a loan is kept
  and stops while one borrow outlasts a whole interval (that borrower reads the descriptor: a
  socket blocked in ``recv`` costs no wake-ups); the borrower's return starts it again.

An engine closing with a loan kept and nobody borrowing closes the descriptor itself.

The hand-over, step by step:

* ``lend_input`` takes ``in_lock`` (or fails: the I/O thread is reading), checks the
  connection is in traffic with nothing waiting for room in the pipe, and under
  ``_interest_lock`` sets ``_borrowed`` and, unless a kept loan did already, ``_lent``,
  dropping READ from the poller.  ``in_lock`` stays held by the borrower until it gives the
  input back.
* ``read_lent`` reads and decodes (``await_lent`` first waits in the read: see below); what
  only the I/O thread may handle -- events (PING) and the PONG that answers one, protocol
  errors, a broken connection, the end of the stream -- is left to it in order: events are
  queued for ``restart_input`` with reading stopped, so nothing read later overtakes them.
  Each step is written so that an exception from a signal handler loses nothing (see
  "Interruptions" in :mod:`.engine_state`).
* ``return_input`` clears ``_borrowed`` and, unless the loan is kept (and could be lent
  again), ``_lent``, restoring READ; it releases ``in_lock`` under ``_interest_lock``, so
  closing sees either a borrower still to come back or none; a ``restart_input`` that found
  the lock taken meanwhile (``_restart_wanted``) runs again on the I/O thread, which then
  wakes the socket's thread.
* Closing while borrowed wakes the borrower (a WAKE command), who closes the descriptor when
  it gives the input back, so a descriptor is never closed under a poll; a kept loan nobody
  borrows is simply taken back, and the descriptor closed.

Waiting in the read.  A thread woken by data arriving for its blocking ``recv`` runs sooner
than one woken from ``poll`` (a quarter of an ipc round trip, 4-7% of a tcp one), so a
lock-step borrower first waits in the read itself (``await_lent``), SO_RCVTIMEO bounding the
wait.  The descriptor is made blocking at the first such wait and stays so: every other read
or write of it passes MSG_DONTWAIT -- the I/O thread may write a PING or the rest of a large
message while the borrower waits, and nobody but that borrower may ever wait for the peer --
so nothing relies on O_NONBLOCK (making it non-blocking again after each wait put two
``fcntl`` calls on the path of every reply: 5-13% of a round trip).  Any borrower waits in the
read for the rest of a body too large for one direct read (above), the same way.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Iterator
from socket import MSG_DONTWAIT, MSG_WAITALL, SO_RCVTIMEO, SOL_SOCKET
from typing import Any

from ..io.thread import READ_BUFFER_SIZE
from ..mailbox import WAKE
from ..zmtp import TRAFFIC, ProtocolError
from ..zmtp.frames import DIRECT_READ_MAX
from .engine_state import EngineState

#: How long a kept loan may go unborrowed before the I/O thread takes it back (seconds; see
#: the module docstring).
LOAN_IDLE = 0.01
#: The longest one read waits for the rest of a large body (ms; ``read_lent``): the borrower
#: looks at its mailbox -- ``term()``, a close -- between such reads.
WAIT_READ_MS = 20


class LentInputMixin(EngineState):
    """Lending the input to the socket's thread (see the module docstring)."""

    def lend_input(self, large_only: bool = False) -> bool:
        """Let the calling socket thread read the descriptor (``read_lent``) until it calls
        ``return_input``; False when the I/O thread must go on reading (busy, not in traffic,
        input stopped at the HWM or waiting for the I/O thread; ``large_only``: the last read
        began with no large frame)."""
        if large_only and not self._lent and not self.conn.large_frames:
            return False  # (a look without the lock, as the I/O thread reads on: see give_back)
        try:
            if not self.in_lock.acquire(False):
                return False
            with self._interest_lock:
                conn = self.conn
                if (
                    self._lendable()
                    and conn.state is TRAFFIC
                    and (conn.large_frames or not large_only)
                ):
                    self._borrowed = True
                    self._loans += 1
                    if not self._lent:
                        self._lent = True
                        self._update_interest()
                    return True
            self.return_input()  # a loan kept from before, which could not be lent now
        except BaseException:
            self.return_if_held()
            raise
        return False

    def _lendable(self) -> bool:
        return self.alive and self._reading and not self._ended and not self._pending_in

    def return_input(self, keep: bool = False) -> None:
        """The borrower is done: the I/O thread watches the descriptor again -- unless
        ``keep``, and it could be lent again: then the loan is kept for the next wait (see the
        module docstring).  If the engine was closed meanwhile, the borrower closes the
        descriptor."""
        try:
            with self._interest_lock:
                try:
                    self._borrowed = False
                    if not self.alive:
                        if self._lent:  # closed while borrowed: the descriptor is ours to close
                            self._lent = False
                            self._close_socket()
                    elif keep and self._lendable():
                        self._kept_at = time.monotonic()
                        if not self._loan_watched:
                            self._loan_watched = True
                            self.io.call_soon(self._watch_loan)
                    else:
                        self._take_back()
                except BaseException:  # interrupted: the loan is not kept (see engine_state)
                    self._loan_watched = False
                    if self.alive:
                        self._take_back()
                    else:  # (closed meanwhile: the descriptor is ours to close, once more)
                        self._lent = False
                        self._close_socket()
                    raise
                finally:
                    self.in_lock.release()  # under _interest_lock: see close()
        finally:
            if self._restart_wanted:  # restart_input found the lock taken: it runs again now
                self.io.call_soon(self._restart_and_wake)

    def return_if_held(self) -> None:
        """An exception from a signal handler (see "Interruptions" in :mod:`.engine_state`)
        cut lending, returning or giving back the input short: if this thread holds the input
        still, it goes back to the I/O thread."""
        if self.in_lock._is_owned():  # type: ignore[attr-defined]  # (what Condition uses)
            self.return_input()

    def give_back(self) -> None:
        """A loan kept goes back to the I/O thread now, what came meanwhile read first (the
        socket's thread, about to wait some other way or to give up: see the module
        docstring)."""
        if not self._lent:  # (a look without the lock: only this thread lends)
            return
        try:
            self.in_lock.acquire()
            with self._interest_lock:  # (input stopped meanwhile: nothing more is read)
                kept = self._borrowed = self._lent and self._lendable()
            if kept:
                self.read_lent()
            self.return_input()
        except BaseException:
            self.return_if_held()
            raise

    def _take_back(self) -> None:
        """The I/O thread watches the descriptor again (``_interest_lock`` held, nobody
        borrowing)."""
        self._lent = False
        self._update_interest()  # (even if not lent: it makes an interrupted change whole)

    def _watch_loan(self, _: Any = None) -> None:
        """While a loan is kept: take it back once nobody borrowed it for LOAN_IDLE; stop
        while one borrow outlasts a whole interval (I/O thread; see the module docstring)."""
        with self._interest_lock:
            delay = None
            if self._lent and self.alive:
                if not self._borrowed:
                    idle = time.monotonic() - self._kept_at
                    if idle < LOAN_IDLE:
                        delay = LOAN_IDLE - idle
                    else:
                        self._take_back()
                elif self._loans != self._watched_loans:  # a new borrow since the last look
                    self._watched_loans = self._loans
                    delay = LOAN_IDLE
            if delay is None:
                self._loan_watched = False
            else:
                self._timers["loan"] = self.io.call_later(delay, self._watch_loan)

    def await_lent(self, wait_ms: int) -> bool:
        """Block in reading the descriptor until something comes or ``wait_ms`` (at least 1)
        passes, then decode it as ``read_lent`` does (the borrowing thread of a lock-step
        socket: see "Waiting in the read" in the module docstring); whether anything came --
        octets, or the end of the stream."""
        self._set_rcvtimeo(wait_ms)
        return self.read_lent(wait_ms, 0)

    def _set_rcvtimeo(self, wait_ms: int) -> None:
        """Let a read that waits (``flags`` without MSG_DONTWAIT) wait ``wait_ms`` at most."""
        if self._rcvtimeo != wait_ms:
            if self._rcvtimeo < 0:  # the first such wait: blocking from now on
                os.set_blocking(self.fileno, True)
            self.sock.setsockopt(SOL_SOCKET, SO_RCVTIMEO, _timeval(wait_ms))
            self._rcvtimeo = wait_ms

    def read_lent(self, wait_ms: int = 0, flags: int = MSG_DONTWAIT) -> bool:
        """Read and decode what the descriptor holds, into the pipe (the borrowing thread,
        after its poll said readable; see the module docstring for what is left to the I/O
        thread, and "Interruptions" in :mod:`.engine_state` for why each step is written as it
        is); whether anything came.  ``wait_ms``: how long the read of a large body's rest may
        wait (-1: WAIT_READ_MS at a time; 0: it may not).  ``flags`` 0: wait in the first read
        (``await_lent``).

        A read that completed no message and left the connection asking for the rest of a
        large body (a header read alone, a body come short) is followed at once, with no poll
        between, by the read of that rest if the kernel holds all of it: the next header and
        its body are usually both there already (a poll and a turn through the borrower's wait
        saved for each large message).  If only some of it is there, the poll lets more come
        first: so the reads on end with the message, and the mailbox is looked at between
        messages (reading on whatever part had come measured the same, 0.92-1.09).  A rest too
        large for one such read (``wait_read``) is waited for in one read instead, up to
        ``wait_ms``, so the body is the very ``bytes`` that read made, not pieces joined."""
        came = self._read_lent_once(flags, False, wait_ms)
        if came is _NOTHING:
            return False
        while came is _READ_ON:
            came = self._read_lent_once(MSG_DONTWAIT, True, wait_ms)
        return True

    def _wait_for_rest(self, wait_ms: int) -> None:
        """Set the descriptor to wait at most ``wait_ms`` (-1: WAIT_READ_MS) for the whole rest
        of a large body (see ``read_lent``).  Only when the kernel holds some of it already
        (``_direct_size``): a signal then ends the read with what came, where a read that got
        nothing is restarted by Python, SO_RCVTIMEO and all -- a signal every few ms kept it
        waiting for ever."""
        wait = WAIT_READ_MS if wait_ms < 0 else min(wait_ms, WAIT_READ_MS)
        self._set_rcvtimeo(wait)
        self._read_until = time.monotonic() + wait / 1000

    def _read_lent_once(self, flags: int, direct_only: bool, wait_ms: int) -> object:
        """One read of ``read_lent``: _NOTHING, _CAME, or _READ_ON (something came, and the
        rest of a large body is wanted next).  ``direct_only``: read only the rest of a large
        body, and only if the kernel holds all of it (or DIRECT_READ_MAX) -- unless it is
        waited for (``wait_ms``)."""
        if not self.alive:
            return _NOTHING
        got = self._got
        saved: Any = _UNSAVED
        taken: Iterator[Any] | None = None
        conn = self.conn
        buffer = None
        try:
            try:  # (what recv returns is kept, whatever comes next)
                direct = self._direct_size(direct_only, wait_ms)
                if direct > DIRECT_READ_MAX:  # all the rest of a large body, waited for
                    self._wait_for_rest(wait_ms)
                    flags = MSG_WAITALL
                if direct_only and not direct:
                    return _NOTHING
                if direct:  # the rest of a large body, as bytes of its own (see zmtp.frames)
                    got.extend(map(self.sock.recv, (direct,), (flags,)))
                elif conn.large_frames:  # into the engine's own buffer (see the docstring)
                    buffer = self._lent_buffer
                    if buffer is None:
                        buffer = self._lent_buffer = memoryview(bytearray(READ_BUFFER_SIZE))
                    got.extend(map(self.sock.recv_into, (buffer,), (conn.read_limit,), (flags,)))
                else:
                    got.extend(map(self.sock.recv, _LENT_READ, (flags,)))
            except (BlockingIOError, InterruptedError):
                return _NOTHING
            except OSError:  # the connection broke: the I/O thread meets it and says why
                self._ended = True
                return _CAME
            data = got[0] if buffer is None else buffer[: got[0]]
            if not data:
                # The end of the stream stays readable for the I/O thread, and the input is
                # not lent again: a borrower that took it back at once would keep the I/O
                # thread from ever reading the end (it finds in_lock taken), and spin on the
                # readable EOF.
                self._ended = True
                got.clear()
                return _CAME
            self._last_rx = time.monotonic()
            saved = conn.save_input()
            with self.out_lock:  # decoding may queue a reply (PONG) in the connection's output
                items, events = conn.receive(data)
            self._pending_events = events
            taken = iter(items)
            got.clear()
            if events:  # events and a PONG are the I/O thread's, and so what follows them
                self._reading = False
                self._pending_in.extend(taken)
                self.io.call_soon(self._restart_and_wake)
            elif not items:
                return _READ_ON if conn.direct_read else _CAME
            elif not self.session.push_from(taken, len(items)):  # the pipe is full
                self._pending_in.extend(taken)
                self._set_reading(False)
        except ProtocolError as exc:
            self._reading = False
            got.clear()
            try:
                self.io.call_soon(self._protocol_failed, exc)
            except BaseException:  # (see engine_state: the failure must reach the I/O thread)
                self.io.call_soon(self._protocol_failed, exc)
                raise
        except BaseException:
            try:
                self._interrupted_read(saved, taken)
            except BaseException:  # a second interruption, in the first one's handling: again
                self._interrupted_read(saved, taken)
                raise
            raise
        return _CAME

    def _interrupted_read(self, saved: Any, taken: Iterator[Any] | None) -> None:
        """An exception from a signal handler stopped ``read_lent`` (see :mod:`.engine_state`):
        what it read and did not hand on goes to the I/O thread -- the messages it decoded that
        the pipe did not take, or else the octets it read (or their count in the lent buffer),
        their decoding undone.  Each step can be done twice."""
        got = self._got
        if taken is not None:
            got.clear()
            self._pending_in.extend(taken)
        elif got and saved is not _UNSAVED:
            self.conn.restore_input(saved)
        if got or self._pending_in:
            self._reading = False
            self.io.call_soon(self._restart_and_wake)

    def _restart_and_wake(self, _: Any = None) -> None:
        """The I/O thread's part of a lent read that left work here (a PONG to send, events
        to deliver, what an interruption left, or a restart_input that found the input lent):
        do it, then wake the socket's thread, which may borrow the input again."""
        self._send_reply(pongs=True)  # (a lent read decodes traffic, which queues only PONGs)
        self.restart_input()
        if self.alive:
            self.session.socket.post(WAKE, None)


#: A lent read's size: below glibc's mmap threshold, so ``recv``'s buffer comes from the heap.
_LENT_READ = (64 * 1024,)


def _timeval(ms: int) -> bytes:
    """``ms`` as the ``struct timeval`` SO_RCVTIMEO takes."""
    return struct.pack("@ll", ms // 1000, ms % 1000 * 1000)


_UNSAVED = object()
#: What one read of ``read_lent`` got: nothing; something; something, and the rest of a large
#: body is wanted next.
_NOTHING, _CAME, _READ_ON = object(), object(), object()
