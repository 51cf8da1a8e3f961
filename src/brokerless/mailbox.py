"""Mailboxes: how other threads hand commands to an object, and wake it when it sleeps.

Theory of operation
-------------------
A mailbox is a ``deque`` of commands.  Any thread may ``send``; only the owner calls
``process``.  A sender signals only on the transition "owner drained its mailbox" -> "a command
arrived" (the ``armed`` flag), so a busy owner costs senders nothing but an ``append``.

The owner sleeps on the :class:`Signaler`'s file descriptor (an eventfd), which senders write
to wake it; it does so in one of two ways:

* a **blocking call** (``recv``, ``send``, ``Socket.poll``) polls it in ``wait``.  Writing it
  and polling it both let go of the GIL, so a thread woken on the CPU its waker is leaving
  runs at once (with a lock as the semaphore, as here before, the woken thread found the GIL
  still held and the two traded the CPU three times a wake-up: BENCHMARKS.md, *Latency*,
  twentieth session);
* a **Poller**, or an event loop watching the ``FD`` option, polls it among other
  descriptors (``use_fd``).

A sender may also only wake the owner (``poke``): no command, when what it did is already where
the owner will look (a lock-step socket waiting for its reply on the one pipe it took in).

Ordering makes it race-free without a lock: a sender appends, then disarms, then signals; the
owner re-arms *before* draining, and ``wait`` clears the descriptor and looks at the deque
again before it sleeps.  A command is therefore always either seen by a drain or signalled after
the owner armed, so a wake-up is never lost.  The descriptor is cleared before the next sleep,
not as the owner wakes (the read is off the path of the wake-up); under a Poller ``process``
clears it, and whoever sleeps on it clears it when it wakes (``clear_fd``), so a late write
cannot leave it readable for ever: a signal that arrives late costs one spurious wake-up at
most.  Either way of sleeping is interrupted by Ctrl-C in the main thread.
"""

from __future__ import annotations

import os
import select
import threading
from collections import deque
from collections.abc import Callable, Iterable
from enum import Enum
from typing import Any, Generic, TypeVar


class Command(Enum):
    """What objects tell a socket or a session through its mailbox (libzmq's commands)."""

    #: A pipe has messages again (its reader had found it empty).
    ACTIVATE_READ = "activate_read"
    #: A pipe has room again (its writer had found it at the HWM).
    ACTIVATE_WRITE = "activate_write"
    #: The peer closed its end of a pipe: read what is left, then drop it.
    PIPE_TERM = "pipe_term"
    #: The connection behind a pipe was lost and is being remade.
    HICCUP = "hiccup"
    #: A new pipe for the socket (inproc connect, a handshake completed).
    ATTACH = "attach"
    #: The context is terminating: fail blocked and later calls with ETERM.
    STOP = "stop"
    #: Nothing to do but look again (a lent read left work for the socket's thread).
    WAKE = "wake"

    # Each command is one object: hashed by identity, in C (Enum's own hash is a Python call,
    # made at every dispatch of a command by its kind).
    __hash__ = object.__hash__


#: A command that only wakes the owner (it re-checks its state; nothing else to do).
WAKE = Command.WAKE
ACTIVATE_READ = Command.ACTIVATE_READ
ACTIVATE_WRITE = Command.ACTIVATE_WRITE

#: The longest single poll in ``Mailbox.wait`` (ms): what ``select.poll`` takes.
MAX_POLL_MS = 2**31 - 1

#: What a mailbox carries: a :class:`Command` (sockets, sessions), a call (I/O threads).
C = TypeVar("C")


def poll_once(
    os_poll: Any, registrations: Callable[[], Iterable[tuple[int, int]]], timeout_ms: int
) -> list[tuple[int, int]]:
    """``os_poll.poll(timeout_ms)``.  Python refuses two threads polling one object at once --
    two threads waiting on one socket, or sharing a Poller: a misuse pyzmq tolerates, each of
    them timing out -- so the second polls one of its own, over ``registrations()``."""
    try:
        ready: list[tuple[int, int]] = os_poll.poll(timeout_ms)
    except RuntimeError:  # "concurrent poll() invocation"
        spare = select.poll()
        for fd, mask in registrations():
            spare.register(fd, mask)
        ready = spare.poll(timeout_ms)
    return ready


class Signaler:
    """A pollable wake-up flag: an eventfd where the OS has one, else a pipe."""

    __slots__ = ("_lock", "_rfd", "_wfd")

    def __init__(self) -> None:
        # Held while writing and closing, so a late sender never writes to a reused fd number;
        # reentrant: a signal handler that runs as a write returns may wake the same owner.
        self._lock = threading.RLock()
        if hasattr(os, "eventfd"):
            fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            self._rfd = self._wfd = fd
        else:  # pragma: no cover - non-Linux
            self._rfd, self._wfd = os.pipe()
            os.set_blocking(self._rfd, False)
            os.set_blocking(self._wfd, False)

    def fileno(self) -> int:
        return self._rfd

    def registrations(self) -> tuple[tuple[int, int]]:
        """What a poll of the descriptor registers (``poll_once``'s)."""
        return ((self.fileno(), select.POLLIN),)

    def send(self) -> None:
        with self._lock:
            if self._wfd < 0:
                return  # closed: the owner is gone
            try:
                os.write(self._wfd, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            except BlockingIOError:  # pragma: no cover - counter/pipe full: already readable
                pass

    def clear(self) -> None:
        try:
            os.read(self._rfd, 4096)
        except (BlockingIOError, OSError):
            pass

    def close(self) -> None:
        with self._lock:
            if self._rfd >= 0:
                os.close(self._rfd)
                if self._wfd != self._rfd:
                    os.close(self._wfd)
            self._rfd = self._wfd = -1


class Mailbox(Generic[C]):
    """Commands for one owner, and the descriptor that wakes it."""

    __slots__ = ("_armed", "_blocking", "_closed", "_poller", "_sleeping", "commands", "signaler")

    def __init__(self) -> None:
        self.commands: deque[tuple[C, Any]] = deque()
        self.signaler = Signaler()
        self._armed = True
        #: The owner sleeps in ``wait``, which clears the descriptor before it sleeps (True),
        #: or a Poller or event loop watches the descriptor, cleared by ``process`` (False).
        self._blocking = False
        self._poller: select.poll | None = None  # wait's, made at its first sleep
        self._sleeping = False  # the owner is in ``wait``'s poll (see ``close``)
        self._closed = False

    def fileno(self) -> int:
        return self.signaler.fileno()

    def send(self, command: C, arg: Any = None) -> None:
        """Queue a command (any thread); wakes the owner if it may be asleep."""
        try:
            self.commands.append((command, arg))
            if self._armed:
                # Disarm *before* signalling: disarming after could land once the owner has
                # woken, re-armed and gone back to sleep, and then no sender would ever signal
                # it again.
                self._armed = False
                self.signaler.send()
        except BaseException:
            # An exception from a signal handler (see "Interruptions" in
            # brokerless.transport.engine_state) once the command may be queued: the owner
            # is woken all the same -- disarmed and not signalled, it would sleep through
            # every later command; a spare wake-up is harmless.
            self._armed = False
            self.signaler.send()
            raise

    def poke(self) -> None:
        """Wake the owner without a command (any thread): what changed is somewhere it looks
        when it wakes anyway -- a pipe it took in before it slept (``Lane.reader_waiting`` in
        :mod:`brokerless.pipe`).  Disarms and signals as ``send`` does; one that comes while the
        owner is awake costs it one spurious wake-up at most."""
        try:
            if self._armed:
                self._armed = False
                self.signaler.send()
        except BaseException:  # cut short by a signal handler's exception: as in ``send``
            self._armed = False
            self.signaler.send()
            raise

    def process(self, dispatch: Callable[[C, Any], None]) -> None:
        """Run every queued command through ``dispatch`` (owner thread only).  A wake-up or
        an activation leaves the queue only once handled: an exception from a signal handler
        as its handling begins cannot lose it (see "Interruptions" in
        brokerless.transport.engine_state), and handling one twice is harmless."""
        if not self._armed:
            if not self._blocking:
                self.signaler.clear()  # (``wait`` clears it before it sleeps instead)
            self._armed = True
        commands = self.commands
        while commands:
            command, arg = commands[0]
            if command is WAKE or command is ACTIVATE_READ or command is ACTIVATE_WRITE:
                dispatch(command, arg)
                commands.popleft()
            else:
                commands.popleft()
                dispatch(command, arg)

    def wait(self, timeout_ms: int) -> None:
        """Block the owner until a command may be queued or ``timeout_ms`` passes (-1: none).

        Returns at once while disarmed: a sender disarmed the mailbox and signalled, and until
        ``process`` arms it again no sender signals -- the command it queued may even have been
        taken already (it queues before it looks at ``_armed``, and the owner may drain in
        between), so an empty queue does not mean nothing is owed."""
        self._blocking = True
        if self.commands or not self._armed:
            return
        signaler = self.signaler
        signaler.clear()  # the last wake-up's signal, or a late one: it would end the sleep
        if self.commands or not self._armed:  # a sender that came meanwhile has signalled
            return  # or been cleared: either way what it did is owed now
        poller = self._poller
        if poller is None:
            poller = self._poller = select.poll()
            poller.register(signaler.fileno(), select.POLLIN)
        self._sleeping = True
        wait_ms = min(timeout_ms, MAX_POLL_MS)  # (the caller waits again for the rest)
        try:
            poll_once(poller, signaler.registrations, wait_ms)
        finally:
            self._sleeping = False
            if self._closed:  # closed by another thread while we slept: ours to close
                signaler.close()

    def use_fd(self) -> None:
        """A Poller or event loop is about to watch the file descriptor: from here on
        ``process`` clears it.

        The caller must look at the commands after this (``process``) before sleeping, and
        should ``clear_fd`` when it wakes on the descriptor.
        """
        if self._blocking:
            self._blocking = False
            if self._armed:  # the last wake-up's signal: it would wake the poller at once
                self.signaler.clear()  # (disarmed, a look is owed: the signal stays)

    def clear_fd(self) -> None:
        """The descriptor woke a poller: reset it (the commands are drained next anyway)."""
        self.signaler.clear()

    def close(self) -> None:
        """No more commands (any thread).  Whoever polls the descriptor is woken: an owner
        asleep in ``wait`` (which closes the descriptor as it leaves: closed under it, its number
        could be reused while it polls), or a Poller or event loop in another thread, which then
        finds the socket closed (pyzmq's poller raises ENOTSOCK so; it slept on)."""
        self._closed = True
        self.signaler.send()
        if not self._sleeping:
            self.signaler.close()
        self._poller = None
