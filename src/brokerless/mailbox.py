"""Mailboxes: how other threads hand commands to an object, and wake it when it sleeps.

Theory of operation
-------------------
A mailbox is a ``deque`` of commands plus a :class:`Signaler`, a file descriptor that becomes
readable when a command arrives for an owner that may be asleep.  Any thread may ``send``; only
the owner calls ``process``.  The fd is written only on the transition "owner drained its
mailbox" -> "a command arrived" (the ``armed`` flag), so a busy owner costs senders nothing but
an ``append``.  ``process`` first re-arms (clearing the fd), then drains the deque; a command
that races with the re-arm is either seen by the drain or signals the fd again.

The fd is what a blocking call waits on (with ``select.poll``, so Ctrl-C interrupts it) and what
``Poller`` mixes with user file descriptors; it is also exposed as the socket's ``FD`` option.
"""

from __future__ import annotations

import os
import select
import threading
from collections import deque
from collections.abc import Callable
from typing import Any


class Signaler:
    """A pollable wake-up flag: an eventfd where the OS has one, else a pipe."""

    __slots__ = ("_lock", "_rfd", "_wfd")

    def __init__(self) -> None:
        # Held while writing and closing, so a late sender never writes to a reused fd number.
        self._lock = threading.Lock()
        if hasattr(os, "eventfd"):
            fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            self._rfd = self._wfd = fd
        else:  # pragma: no cover - non-Linux
            self._rfd, self._wfd = os.pipe()
            os.set_blocking(self._rfd, False)
            os.set_blocking(self._wfd, False)

    def fileno(self) -> int:
        return self._rfd

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
        except BlockingIOError:
            pass

    def close(self) -> None:
        with self._lock:
            if self._rfd >= 0:
                os.close(self._rfd)
                if self._wfd != self._rfd:
                    os.close(self._wfd)
            self._rfd = self._wfd = -1


class Mailbox:
    """Commands for one owner, with a signaler that wakes it."""

    __slots__ = ("_armed", "_poller", "commands", "signaler")

    def __init__(self) -> None:
        self.commands: deque[tuple[str, Any]] = deque()
        self.signaler = Signaler()
        self._armed = True
        self._poller = select.poll()
        self._poller.register(self.signaler.fileno(), select.POLLIN)

    def fileno(self) -> int:
        return self.signaler.fileno()

    def send(self, command: str, arg: Any = None) -> None:
        """Queue a command (any thread); wakes the owner if it may be asleep."""
        self.commands.append((command, arg))
        if self._armed:
            self._armed = False
            self.signaler.send()

    def process(self, dispatch: Callable[[str, Any], None]) -> None:
        """Run every queued command through ``dispatch`` (owner thread only)."""
        if not self._armed:
            self.signaler.clear()
            self._armed = True
        commands = self.commands
        while commands:
            command, arg = commands.popleft()
            dispatch(command, arg)

    def wait(self, timeout_ms: int) -> bool:
        """Sleep until a command may be queued or ``timeout_ms`` passes (-1: no limit).

        Interrupted by signals in the main thread (KeyboardInterrupt propagates).
        """
        if self.commands:
            return True
        return bool(self._poller.poll(timeout_ms))

    def close(self) -> None:
        self.signaler.close()
