"""Waiting: how a socket's thread blocks until it can send or receive, or a poll is answered.

Theory of operation
-------------------
A call that cannot proceed (no message; every pipe at its HWM) waits on the socket's mailbox
for a command that may change that -- a pipe activated, a new pipe, the context terminating --
then tries again, until RCVTIMEO/SNDTIMEO runs out (``Again``) or forever.  The wait is
``select.poll`` on the mailbox's descriptor (see :mod:`brokerless.mailbox`), which Ctrl-C
interrupts.

Lent input: a REQ or REP about to wait for its reply with one tcp/ipc peer reads that
connection itself while it waits (the connection's input is *lent* to the socket's thread, see
:mod:`brokerless.transport.engine_lent`), so a round trip needs no hand-over to the I/O thread,
whose turn may be a GIL switch away.  A PULL does so while its peer's messages come as large
frames (``borrows_input`` in :mod:`brokerless.patterns.base`).  The socket asks for the loan
through the pipe's ``source`` (the connection that feeds it), never through the transport's
objects.  It keeps the loan between its waits (``_loan_kept``) and gives it back before it
waits any other way or gives up (``_give_back_input``), reading first what came meanwhile: a
call that gives up looks once more, so a message already here is never missed.

Waiting on the pipe: a REQ or REP with one inproc peer (or a connection that cannot be lent now)
takes its pipe into the fair queue before it sleeps, so the writer only wakes it
(``Lane.reader_waiting``) and it reads the reply at its first look, with no ``activate_read`` to
handle first (``_wait_on_pipe``).

A lock-step socket (REQ, REP) first waits in the read itself (for :data:`READ_FIRST_MS`,
which the kernel makes one or two scheduler ticks, 4-20 ms), and only then polls the connection
together with its mailbox: a thread woken from a blocking ``recv`` runs sooner than one woken
from ``poll`` (BENCHMARKS.md, *Latency*: ipc REQ/REP latency 0.72-0.76 of polling, nineteenth
session; tcp 0.93-0.96, twenty-second session).  A command
that comes meanwhile (a new peer, the context ending) waits up to those ticks to be seen, and
a wait shorter than :data:`READ_FIRST_MIN_WAIT_MS` polls at once, so RCVTIMEO keeps its
precision.  Not covered: a signal handler that does not raise, run more often than that read
lasts (at the kernel's tick rate or more: 250 times a second with 4 ms ticks, 100 with 10 ms),
restarts the read each time with its full timeout (Python retries a call that fails with
EINTR), so while such signals come RCVTIMEO and commands go unseen until the reply comes.
"""

from __future__ import annotations

import math
import select
import time
from collections.abc import Callable
from typing import Any

from ..constants import Flag, PollEvent, SocketOption
from ..deadline import Deadline
from ..errno import EAGAIN
from ..error import Again
from ..pipe import InputLoan, Pipe
from .state import SocketState

NOBLOCK = int(Flag.NOBLOCK)
POLLIN = int(PollEvent.POLLIN)
POLLOUT = int(PollEvent.POLLOUT)
#: How long a lock-step socket waits in the read of its lent connection before it watches its
#: mailbox too (ms; SO_RCVTIMEO, which the kernel rounds up to whole ticks: one or two, 4-20 ms
#: in all): about the longest a command waits to be seen (see the module docstring).
READ_FIRST_MS = 2
#: A wait shorter than this (ms) is not begun in the read: its ticks would outlast it.
READ_FIRST_MIN_WAIT_MS = 50


class WaitingMixin(SocketState):
    """Blocking and polling (see the module docstring)."""

    __slots__ = ()

    #: (the input last borrowed, a poll object watching its descriptor and our mailbox)
    _lent_poll: tuple[InputLoan, select.poll] | None
    #: That input is kept for the next wait (see the module docstring).
    _loan_kept: bool

    def _wait_for(
        self,
        attempt: Callable[[], Any],
        flags: int,
        timeout_option: SocketOption,
        reading: bool = False,
        tried: bool = False,
    ) -> Any:
        """Retry ``attempt`` as commands arrive until it returns something other than None (an
        empty message ``b""`` is a result too) or time runs out.
        ``reading``: waiting for a message, so with one network peer this thread reads the
        connection itself while it waits (see ``_wait_reading``).  ``tried``: the caller has
        just processed the commands queued and made the attempt, so the first wait comes
        first (a command queued since ends it at once; a message comes with a command, as the
        attempt found the pipe empty and left its reader asleep)."""
        if flags & NOBLOCK:
            return self._last_try(attempt)
        deadline = Deadline(self._options[timeout_option])
        mailbox = self._mailbox
        if not tried:
            self._process_commands()
            result = attempt()
            if result is not None:
                return result
        while True:
            wait_ms = deadline.wait_ms()
            if wait_ms is None:
                return self._last_try(attempt)
            if not (reading and self._wait_reading(wait_ms)):
                self._give_back_input()
                mailbox.wait(wait_ms)
            self._process_commands()
            result = attempt()
            if result is not None:
                return result

    def _wait_reading(self, wait_ms: int) -> bool:
        """Wait for a command or for data on the connection behind this socket's only pipe,
        reading that data here -- no hand-over to the I/O thread, whose turn may be a GIL
        switch away (see :mod:`brokerless.transport.engine_lent`).  Lock-step sockets (REQ,
        REP: each wait is for one reply) borrow whenever they can; a stream's receiver (PULL)
        only while its last read began with a large frame: smaller messages are better served
        by the I/O thread reading ahead in large batches while this thread consumes.  With
        no such connection, or one that cannot be lent now, a lock-step socket waits on its
        pipe (``_wait_on_pipe``), and anything else gets False: then wait as usual."""
        pattern = self._pattern
        if len(self._pipes) != 1 or not pattern.borrows_input:
            return False
        (pipe,) = self._pipes
        source = pipe.source
        loan = None if source is None else source.lend_input(not pattern.lock_step)
        if loan is None:
            if not pattern.lock_step:
                return False
            self._wait_on_pipe(pipe, wait_ms)
            return True
        try:  # (from here on: an exception from a signal handler gives the loan back)
            mailbox = self._mailbox
            lent_poll = self._lent_poll
            if lent_poll is None or lent_poll[0] is not loan:
                poller = select.poll()
                poller.register(loan.fileno, select.POLLIN)
                poller.register(mailbox.fileno(), select.POLLIN)
                self._lent_poll = lent_poll = (loan, poller)
            # What we read goes into the pipe unsignalled, for us to look at next: so the fair
            # queue takes the pipe in first -- cut short here, nothing is read and its writers
            # still signal.
            pattern.read_activated(pipe)
            pipe.hold_reader_awake()
            mailbox.use_fd()
            if mailbox.commands:
                return True
            if pattern.lock_step and (
                wait_ms < 0 or wait_ms >= READ_FIRST_MIN_WAIT_MS
            ):  # first wait in the read itself (see the module docstring)
                began = time.monotonic()
                first = READ_FIRST_MS if wait_ms < 0 else min(wait_ms, READ_FIRST_MS)
                if loan.await_lent(first) or mailbox.commands:
                    return True
                if wait_ms > 0:
                    wait_ms -= math.ceil((time.monotonic() - began) * 1000)
                    if wait_ms <= 0:
                        return True
            self._poll_lent(loan, lent_poll[1], wait_ms)
        finally:
            self._loan_kept = True
            try:
                loan.return_input(keep=True)
            except BaseException:  # cut short (as it began, even): see engine_state.py
                loan.return_if_held()
                raise
        return True

    def _wait_on_pipe(self, pipe: Pipe, wait_ms: int) -> None:
        """A lock-step socket waits for its reply on its one pipe, fed by another socket's
        thread (inproc) or the I/O thread (a connection not lent now): the fair queue takes
        the pipe in first, so its writer only wakes this thread (``Lane.reader_waiting``) and
        the reply is read at the first look, with no ``activate_read`` to handle before it
        (BENCHMARKS.md, *Latency*, twentieth session).  The flag is set only around the
        sleep: cut short before it, the writer sends ``activate_read`` as usual."""
        self._give_back_input()
        self._pattern.read_activated(pipe)
        lane = pipe.inbound
        try:
            lane.reader_waiting = True
            self._mailbox.wait(wait_ms)
        finally:
            lane.reader_waiting = False

    def _poll_lent(self, loan: InputLoan, poller: select.poll, wait_ms: int) -> None:
        """Wait for the lent connection or the mailbox, and read what came (the rest of a large
        body waited for within what is left of ``wait_ms``).  A call of its own:
        a signal that came as the wait in the read timed out (no EINTR, the handler not run
        yet) has its handler run as this begins, not once the poll ends."""
        deadline = Deadline(wait_ms)
        for fd, _ in poller.poll(wait_ms):
            if fd == loan.fileno:
                loan.read_lent(deadline.wait_ms() or 0)
            else:
                self._mailbox.clear_fd()

    def _give_back_input(self) -> bool:
        """Before waiting other than for a reply, or giving up: a loan kept goes back, with
        what came meanwhile read, so that the I/O thread reads the connection again (see the
        module docstring).  Whether there was one."""
        lent_poll = self._lent_poll
        if self._loan_kept and lent_poll is not None:
            self._loan_kept = False
            lent_poll[0].give_back()
            return True
        return False

    def _last_try(self, attempt: Callable[[], Any]) -> Any:
        """Giving up (NOBLOCK, time out): a loan kept goes back, and if one did, what it read
        may be what the caller wants -- one more look; else ``Again``."""
        if self._give_back_input():
            self._process_commands()
            result = attempt()
            if result is not None:
                return result
        raise Again(EAGAIN, "Resource temporarily unavailable")

    def poll(self, timeout: int | None = None, flags: int = POLLIN) -> int:
        """Wait up to ``timeout`` ms (None: forever) for ``flags`` events; returns the events."""
        if self._fault is not None:
            raise self._fault()
        deadline = Deadline(timeout)
        while True:
            events = self._events() & flags
            if events:
                return events
            wait_ms = deadline.wait_ms()
            if wait_ms is None:
                return 0
            self._mailbox.wait(wait_ms)

    def _events(self) -> int:
        self._give_back_input()
        self._process_commands()
        events = 0
        if self._rx_parts is not None or self._pattern.xhas_in():
            events |= POLLIN
        if self._tx_parts is not None or self._pattern.xhas_out():
            events |= POLLOUT
        return events
