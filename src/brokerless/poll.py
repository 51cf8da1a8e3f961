"""Poller and select over brokerless sockets and plain file descriptors together.

Level-triggered: a socket is reported while its condition holds.  Each round computes every
socket's events (running its pending commands) and polls the OS descriptors without waiting;
only if nothing is ready does it sleep in one ``select.poll`` over the sockets' mailbox
descriptors and the user's descriptors (``_sleeper``: the green Poller sleeps on the gevent hub
instead), then it looks again.  Ctrl-C interrupts the sleep.
"""

from __future__ import annotations

import select
from typing import Any

from .constants import PollEvent
from .deadline import Deadline
from .mailbox import poll_once
from .socket import Socket

POLLIN = int(PollEvent.POLLIN)
POLLOUT = int(PollEvent.POLLOUT)
POLLERR = int(PollEvent.POLLERR)

_TO_OS = {POLLIN: select.POLLIN | select.POLLPRI, POLLOUT: select.POLLOUT, POLLERR: select.POLLERR}


def _os_mask(flags: int) -> int:
    mask = 0
    for ours, theirs in _TO_OS.items():
        if flags & ours:
            mask |= theirs
    return mask


def _from_os(revents: int) -> int:
    events = 0
    if revents & (select.POLLIN | select.POLLPRI | select.POLLHUP):
        events |= POLLIN
    if revents & select.POLLOUT:
        events |= POLLOUT
    if revents & (select.POLLERR | select.POLLNVAL):
        events |= POLLERR
    return events


def _fileno(obj: Any) -> int:
    return obj if isinstance(obj, int) else obj.fileno()


class Poller:
    """pyzmq's Poller: ``register``, ``modify``, ``unregister``, ``poll(timeout_ms)``."""

    def __init__(self) -> None:
        self.sockets: list[tuple[Any, int]] = []
        self._map: dict[Any, int] = {}
        self._os_poll: Any = None  # rebuilt lazily after registrations change

    def __contains__(self, obj: Any) -> bool:
        return obj in self._map

    def register(self, socket: Any, flags: int = POLLIN | POLLOUT) -> None:
        """Watch ``socket`` (a brokerless socket, an fd, or an object with ``fileno()``).

        Registering again modifies the flags; flags 0 unregisters.
        """
        if not flags:
            if socket in self._map:
                self.unregister(socket)
            return
        if socket in self._map:
            self.sockets[self._map[socket]] = (socket, flags)
        else:
            self._map[socket] = len(self.sockets)
            self.sockets.append((socket, flags))
        self._os_poll = None

    modify = register

    def unregister(self, socket: Any) -> None:
        index = self._map.pop(socket)
        self.sockets.pop(index)
        for sock, i in self._map.items():
            if i > index:
                self._map[sock] = i - 1
        self._os_poll = None

    def _registrations(self) -> list[tuple[int, int]]:
        """(descriptor, OS poll mask) to wait on: each socket's mailbox, each user descriptor."""
        return [
            (obj.fileno(), select.POLLIN)
            if isinstance(obj, Socket)
            else (_fileno(obj), _os_mask(f))
            for obj, f in self.sockets
        ]

    def _build(self) -> Any:
        os_poll = select.poll()
        for fd, mask in self._registrations():
            os_poll.register(fd, mask)
        self._os_poll = os_poll
        return os_poll

    def poll(self, timeout: float | None = None) -> list[tuple[Any, int]]:
        """Wait up to ``timeout`` ms (None or negative: forever) and return (socket, events);
        with nothing registered, [] at once, as pyzmq's ``zmq_poll`` (libzmq's would sleep)."""
        if not self.sockets:
            return []
        deadline = Deadline(timeout)
        has_fds = False
        mailboxes = {}
        for obj, _ in self.sockets:
            if isinstance(obj, Socket):
                obj._mailbox.use_fd()
                mailboxes[obj.fileno()] = obj._mailbox
            else:
                has_fds = True
        while True:
            ready = self._ready(has_fds)
            if ready:
                return ready
            wait_ms = deadline.wait_ms()
            if wait_ms is None:
                return []
            for fd, _ in self._os_wait(wait_ms):
                if fd in mailboxes:
                    mailboxes[fd].clear_fd()

    def _sleeper(self) -> Any:
        """What the poll sleeps in between rounds: a ``select.poll`` over ``_registrations``
        (kept until they change)."""
        return self._os_poll or self._build()

    def _os_wait(self, wait_ms: int, os_poll: Any = None) -> list[tuple[int, int]]:
        """Poll ``os_poll`` (the ``_sleeper``), as ``poll_once`` does."""
        return poll_once(os_poll or self._sleeper(), self._registrations, wait_ms)

    def _ready(self, has_fds: bool) -> list[tuple[Any, int]]:
        ready: list[tuple[Any, int]] = []
        fd_events: dict[int, int] = {}
        if has_fds:
            fd_events = dict(self._os_wait(0, self._os_poll or self._build()))
        for obj, flags in self.sockets:  # (events are plain ints, as pyzmq's: ``int(flags)``)
            if isinstance(obj, Socket):
                events = obj._events() & int(flags)
                if events:
                    ready.append((obj, events))
            else:  # reported by fd number, as pyzmq does for objects with fileno()
                fd = _fileno(obj)
                events = int(_from_os(fd_events.get(fd, 0)) & (flags | POLLERR))
                if events:
                    ready.append((fd, events))
        return ready


def select_(
    rlist: list[Any], wlist: list[Any], xlist: list[Any], timeout: float | None = None
) -> tuple[list[Any], list[Any], list[Any]]:
    """pyzmq's ``zmq.select``: like ``select.select`` (timeout in seconds) for sockets too."""
    poller = Poller()
    for obj in {*rlist, *wlist, *xlist}:
        flags = (POLLIN if obj in rlist else 0) | (POLLOUT if obj in wlist else 0)
        flags |= POLLERR if obj in xlist else 0
        poller.register(obj, flags)
    events = dict(poller.poll(None if timeout is None else timeout * 1000))

    def ready(obj: Any, flag: int) -> bool:
        key = obj if isinstance(obj, Socket) else _fileno(obj)
        return bool(events.get(key, 0) & flag)

    return (
        [s for s in rlist if ready(s, POLLIN)],
        [s for s in wlist if ready(s, POLLOUT)],
        [s for s in xlist if ready(s, POLLERR)],
    )


def zmq_poll(sockets: list[tuple[Any, int]], timeout: float | None = -1) -> list[tuple[Any, int]]:
    """pyzmq's ``zmq.zmq_poll``: poll ``[(socket or fd, flags), ...]`` for ``timeout`` ms
    (negative or None: no limit); the ready ones as ``[(socket or fd, events), ...]``."""
    poller = Poller()
    for sock, flags in sockets:
        poller.register(sock, flags)
    return poller.poll(timeout)
