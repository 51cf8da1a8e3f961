"""What an I/O thread waits on: descriptors, each with the events watched and its handler.

Theory of operation
-------------------
A poller maps each descriptor to its *registration* -- ``(file object, events, handler)``, the
events being ``READ`` and ``WRITE`` (the selectors module's values) -- and ``poll`` answers
the descriptors that are ready as ``(descriptor, events ready, registration)``: the
registration as it was when the event was reported, so the I/O thread can tell whether a
handler that ran before in the same turn changed it (see ``thread.py``).

On Linux the poller is ``select.epoll`` itself (:class:`EpollPoller`).  The selectors module's
``EpollSelector`` makes the same system calls, but wraps each registration in a key object and
each ready descriptor in a lookup: a dozen Python calls where this takes two or three, on paths
that may run once a message -- a REQ's or REP's connection is taken from its I/O thread's
poller for the replies it reads itself, and given back when it waits any other way (lent
input, ``transport/engine_lent.py``).
Elsewhere (no epoll) the selectors module's default selector does the work behind the same
methods (:class:`SelectorPoller`).

A descriptor closed while registered: epoll forgets it by itself, and ``unregister`` with the
closed socket (its ``fileno()`` now -1) still finds its registration by the object.
"""

from __future__ import annotations

import math
import select
import selectors
from collections.abc import Callable
from contextlib import suppress
from typing import Any, Protocol

READ = selectors.EVENT_READ
WRITE = selectors.EVENT_WRITE
# (epoll's values; named here so that the module loads where there is no epoll)
EPOLLIN = getattr(select, "EPOLLIN", 1)
EPOLLOUT = getattr(select, "EPOLLOUT", 4)

Handler = Callable[[int], None] | None
#: (file object, events watched, handler)
Registration = tuple[Any, int, Handler]


class Poller(Protocol):
    #: descriptor -> its registration, as it is now
    registrations: dict[int, Registration]

    def register(self, fileobj: Any, events: int, handler: Handler) -> None:
        """Watch ``fileobj`` (a descriptor, or an object with ``fileno()``) for ``events``;
        KeyError if it is watched already."""

    def modify(self, fileobj: Any, events: int, handler: Handler) -> None:
        """Watch a registered ``fileobj`` for other events, or with another handler."""

    def unregister(self, fileobj: Any) -> None:
        """Stop watching ``fileobj`` (nothing if it is not watched)."""

    def watch(self, fileobj: Any, events: int, handler: Handler) -> None:
        """Watch ``fileobj`` for exactly ``events`` (0: not at all), however it was watched
        before: a call that an exception from a signal handler cut short is made whole by
        the next (see "Interruptions" in ``transport/engine_state.py``)."""

    def poll(self, timeout: float | None) -> list[tuple[int, int, Registration]]:
        """Wait up to ``timeout`` seconds (None: for ever) for a watched event."""

    def close(self) -> None: ...


def _fileno(fileobj: Any) -> int:
    fd = fileobj if fileobj.__class__ is int else fileobj.fileno()
    if fd < 0:
        raise ValueError(f"{fileobj!r} has no descriptor (closed?): nothing to watch")
    return fd


def _registered_fd(registrations: dict[int, Registration], fileobj: Any) -> int:
    """The descriptor ``fileobj`` is registered under; a closed socket (``fileno()`` -1) is
    found by the object (epoll has forgotten it already) in a copy of the table taken at once,
    since a socket's thread may register another descriptor meanwhile (a lent input given
    back); -1 when not found."""
    fd: int = fileobj if fileobj.__class__ is int else fileobj.fileno()
    if fd < 0:
        fd = next((d for d, r in list(registrations.items()) if r[0] is fileobj), -1)
    return fd


#: READ, WRITE or both -> epoll's events
_EPOLL_EVENTS = {
    READ: EPOLLIN,
    WRITE: EPOLLOUT,
    READ | WRITE: EPOLLIN | EPOLLOUT,
}


def _epoll_events(events: int) -> int:
    try:
        return _EPOLL_EVENTS[events]
    except KeyError:
        raise ValueError(f"events must be READ, WRITE or both, not {events!r}") from None


class EpollPoller:
    """``select.epoll`` with a registration per descriptor (see the module doc)."""

    def __init__(self) -> None:
        self._epoll = select.epoll()
        self.registrations: dict[int, Registration] = {}

    def register(self, fileobj: Any, events: int, handler: Handler) -> None:
        fd = _fileno(fileobj)
        if fd in self.registrations:
            raise KeyError(f"{fileobj!r} (descriptor {fd}) is already registered")
        self._epoll.register(fd, _epoll_events(events))
        self.registrations[fd] = (fileobj, events, handler)

    def modify(self, fileobj: Any, events: int, handler: Handler) -> None:
        fd = _fileno(fileobj)
        if fd not in self.registrations:
            raise KeyError(f"{fileobj!r} (descriptor {fd}) is not registered")
        self._epoll.modify(fd, _epoll_events(events))
        self.registrations[fd] = (fileobj, events, handler)

    def unregister(self, fileobj: Any) -> None:
        registrations = self.registrations
        fd = _registered_fd(registrations, fileobj)
        registrations.pop(fd, None)
        if fd >= 0:
            # (OSError: closed meanwhile and forgotten by epoll, or never watched; epoll may
            # also have it alone, after a watch() cut short)
            with suppress(OSError):
                self._epoll.unregister(fd)

    def watch(self, fileobj: Any, events: int, handler: Handler) -> None:
        if not events:
            self.unregister(fileobj)
            return
        registrations = self.registrations
        fd = _fileno(fileobj)
        mask = _epoll_events(events)
        registered = fd in registrations
        registrations[fd] = (fileobj, events, handler)
        try:
            (self._epoll.modify if registered else self._epoll.register)(fd, mask)
        except (FileNotFoundError, FileExistsError):  # epoll has it otherwise: a call cut short
            (self._epoll.register if registered else self._epoll.modify)(fd, mask)

    def poll(self, timeout: float | None) -> list[tuple[int, int, Registration]]:
        registrations = self.registrations
        if timeout is None:
            timeout = -1
        elif timeout > 0:
            timeout = math.ceil(timeout * 1e3) * 1e-3  # wait at least that long (1 ms steps)
        ready = self._epoll.poll(timeout, max(len(registrations), 1))
        # (READ for anything but EPOLLOUT alone, WRITE for anything but EPOLLIN alone: errors
        # and hang-ups go to both, as with the selectors module; then only what is watched)
        return [
            (fd, ((READ if ev & ~EPOLLOUT else 0) | (WRITE if ev & ~EPOLLIN else 0)) & r[1], r)
            for fd, ev in ready
            if (r := registrations.get(fd)) is not None
        ]

    def close(self) -> None:
        self._epoll.close()
        self.registrations.clear()


class SelectorPoller:
    """The selectors module's default selector behind the same methods (no epoll)."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self.registrations: dict[int, Registration] = {}

    def register(self, fileobj: Any, events: int, handler: Handler) -> None:
        registration = (fileobj, events, handler)
        key = self._selector.register(fileobj, events, registration)
        self.registrations[key.fd] = registration

    def modify(self, fileobj: Any, events: int, handler: Handler) -> None:
        registration = (fileobj, events, handler)
        key = self._selector.modify(fileobj, events, registration)
        self.registrations[key.fd] = registration

    def unregister(self, fileobj: Any) -> None:
        fd = _registered_fd(self.registrations, fileobj)  # (the selector's own search of a
        # closed socket walks its live table: the race _registered_fd avoids)
        self.registrations.pop(fd, None)
        if fd >= 0:
            with suppress(KeyError, ValueError):  # (the selector may have it alone, as above)
                self._selector.unregister(fd)

    def watch(self, fileobj: Any, events: int, handler: Handler) -> None:
        if not events:
            self.unregister(fileobj)
            return
        registration = (fileobj, events, handler)
        try:
            key = self._selector.modify(fileobj, events, registration)
        except KeyError:
            key = self._selector.register(fileobj, events, registration)
        self.registrations[key.fd] = registration

    def poll(self, timeout: float | None) -> list[tuple[int, int, Registration]]:
        return [(key.fd, events, key.data) for key, events in self._selector.select(timeout)]

    def close(self) -> None:
        self._selector.close()
        self.registrations.clear()


def new_poller() -> Poller:
    """The platform's poller: epoll where there is one."""
    return EpollPoller() if hasattr(select, "epoll") else SelectorPoller()
