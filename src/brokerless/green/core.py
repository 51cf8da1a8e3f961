"""Green sockets: blocking calls that block only the calling greenlet (pyzmq's ``zmq.green``).

Theory of operation
-------------------
A green socket never blocks in the socket's own wait: every blocking call is made with NOBLOCK,
and when that raises ``Again`` the greenlet waits on the gevent hub until ``EVENTS`` shows what
it needs, then tries again.  What wakes it is the socket's ``FD`` -- the mailbox descriptor,
readable when a command (a pipe activation, a new pipe, the context's termination) may have
changed the socket's state.  The descriptor is edge-triggered, as libzmq's: it says "look
again", not "a message is there", and whoever reads ``EVENTS`` (or sends, or receives) consumes
the edge.  So:

* each waiter checks ``EVENTS`` before it sleeps, and sleeps on the socket's current *change*
  event (a ``gevent.event.Event`` replaced each time it fires, so nobody clears it under
  another waiter);
* while anyone waits, one hub watcher on the descriptor reads ``EVENTS`` when it fires;
* whoever reads ``EVENTS`` -- the watcher, a waiter, an operation that just ended, the user, a
  green Poller -- fires the change event when it shows something a waiter of the socket waits
  for, so an edge consumed by one greenlet still wakes the others (several greenlets may wait
  on one socket: readers and writers);
* nothing of this runs when nobody waits: an operation then costs one counter check.

RCVTIMEO / SNDTIMEO bound the wait (``Again`` when they run out) -- pyzmq's green sockets
ignore them, so setting or reading one warns (as pyzmq's do).  Closing the socket or
terminating its context wakes every waiter, which then raises ENOTSOCK / ETERM; ``term()``
itself waits off the hub, so those greenlets can close their sockets while it waits.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

import gevent.event
import gevent.monkey
from gevent.hub import get_hub

from ..constants import Flag, PollEvent, SocketOption
from ..context import Context as _Context
from ..deadline import Deadline
from ..error import Again, ZMQError
from ..frame import MessageTracker
from ..socket import Socket as _Socket

_O = SocketOption
_T = TypeVar("_T")
NOBLOCK = int(Flag.NOBLOCK)
POLLIN = int(PollEvent.POLLIN)
POLLOUT = int(PollEvent.POLLOUT)
_READ = 1  # libev's EV_READ
_TIMEOUTS = frozenset({_O.RCVTIMEO, _O.SNDTIMEO})


class Socket(_Socket[bytes]):
    """A :class:`brokerless.Socket` whose blocking calls yield to the gevent hub."""

    __slots__ = ("_green_changed", "_green_readers", "_green_watcher", "_green_writers")
    _repr_cls = "zmq.green.Socket"  # the name pyzmq's repr gives it

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._green_changed = gevent.event.Event()
        self._green_readers = 0  # greenlets waiting for POLLIN
        self._green_writers = 0  # greenlets waiting for POLLOUT
        self._green_watcher: Any = None  # the hub's watcher on FD, while anyone waits
        super().__init__(*args, **kwargs)

    # -- the blocking calls -------------------------------------------------------------------

    def send(
        self,
        data: Any,
        flags: int = 0,
        copy: bool = True,
        track: bool = False,
        routing_id: int | None = None,
        group: str | None = None,
    ) -> MessageTracker | None:
        return self._green_call(
            lambda f: _Socket.send(self, data, f, copy, track, routing_id, group),
            flags,
            POLLOUT,
            _O.SNDTIMEO,
        )

    def send_multipart(
        self, msg_parts: Any, flags: int = 0, copy: bool = True, track: bool = False
    ) -> Any:
        return self._green_call(
            lambda f: _Socket.send_multipart(self, msg_parts, f, copy, track),
            flags,
            POLLOUT,
            _O.SNDTIMEO,
        )

    def recv(self, flags: int = 0, copy: bool = True, track: bool = False) -> Any:
        return self._green_call(
            lambda f: _Socket.recv(self, f, copy, track), flags, POLLIN, _O.RCVTIMEO
        )

    def recv_multipart(self, flags: int = 0, copy: bool = True, track: bool = False) -> list[Any]:
        return self._green_call(
            lambda f: _Socket.recv_multipart(self, f, copy, track), flags, POLLIN, _O.RCVTIMEO
        )

    def poll(self, timeout: int | None = None, flags: int = POLLIN) -> int:
        """Wait up to ``timeout`` ms (None: forever) for ``flags``; other greenlets run."""
        return self._green_wait(flags, Deadline(timeout))

    def _green_call(
        self, operation: Callable[[int], _T], flags: int, needs: int, timeout_option: SocketOption
    ) -> _T:
        """``operation(flags | NOBLOCK)``, waiting on the hub for ``needs`` while it raises
        Again (up to the timeout option's milliseconds, unless the caller passed NOBLOCK)."""
        deadline = None if flags & NOBLOCK else Deadline(_Socket.getsockopt(self, timeout_option))
        try:
            while True:
                try:
                    return operation(flags | NOBLOCK)
                except Again:
                    if deadline is None or not self._green_wait(needs, deadline):
                        raise
        finally:
            if self._green_readers or self._green_writers:
                self._green_after()

    # -- waiting ------------------------------------------------------------------------------

    def _green_wait(self, flags: int, deadline: Deadline) -> int:
        """Yield to the hub until EVENTS has one of ``flags`` (returns them) or the deadline
        passes (returns 0)."""
        while True:
            events = self._green_events() & flags
            if events:
                return events
            wait_ms = deadline.wait_ms()
            if wait_ms is None:
                return 0
            changed = self._green_changed
            self._green_enter(flags, 1)
            try:
                changed.wait(None if wait_ms < 0 else wait_ms / 1000)
            finally:
                self._green_enter(flags, -1)

    def _green_enter(self, flags: int, delta: int) -> None:
        """Count a waiter in (1) or out (-1); the watcher runs while there are any."""
        if flags & POLLIN:
            self._green_readers += delta
        if flags & POLLOUT:
            self._green_writers += delta
        waiting = self._green_readers or self._green_writers
        if waiting and self._green_watcher is None and not self.closed:
            self._green_watcher = get_hub().loop.io(self.fileno(), _READ)
            self._green_watcher.start(self._green_after)
        elif not waiting:
            self._green_stop_watching()

    def _green_stop_watching(self) -> None:
        watcher, self._green_watcher = self._green_watcher, None
        if watcher is not None:
            watcher.stop()
            watcher.close()

    def _green_events(self) -> int:
        """EVENTS now (the descriptor's edge consumed: it is what waiters sleep on)."""
        return int(_Socket.getsockopt(self, _O.EVENTS))

    def _events(self) -> int:
        """Every look at the socket's events (EVENTS, a Poller's round, an operation's end)
        wakes the waiters they concern: the look may have consumed the edge they wait for."""
        events = _Socket._events(self)
        if (events & POLLIN and self._green_readers) or (events & POLLOUT and self._green_writers):
            self._green_wake()
        return events

    def _green_wake(self) -> None:
        changed, self._green_changed = self._green_changed, gevent.event.Event()
        changed.set()

    def _green_after(self) -> None:
        """Look at the events (see ``_events``) after something that may have consumed the
        descriptor's edge: an operation, or the descriptor firing (the hub's watcher, which
        must reset it: a level-triggered watcher would fire again at once)."""
        try:
            self._green_events()
        except ZMQError:
            self._green_wake()  # closed or terminated: the waiters find out themselves

    # -- options and closing ------------------------------------------------------------------

    def setsockopt(self, option: int, optval: Any) -> None:
        if option in _TIMEOUTS:
            _warn_timeout(option)
        _Socket.setsockopt(self, option, optval)

    set = setsockopt

    def getsockopt(self, option: int) -> Any:
        if option in _TIMEOUTS:  # pyzmq's zmq.green warns on reading them too
            _warn_timeout(option)
        return _Socket.getsockopt(self, option)

    get = getsockopt

    def close(self, linger: int | None = None) -> None:
        self._green_stop_watching()  # before the descriptor goes
        _Socket.close(self, linger)
        self._green_wake()  # the waiters see the socket closed


class Context(_Context[Socket]):
    """A :class:`brokerless.Context` whose sockets are green; ``instance()`` is its own."""

    _instance = None
    _instance_pid = None
    _socket_class = Socket  # pyzmq's name for what socket() makes
    _repr_cls = "zmq.green.Context"

    def term(self) -> None:
        """Terminate as :meth:`brokerless.Context.term` does, blocking only the calling
        greenlet: the wait for every socket to close runs in gevent's thread pool, so the
        greenlets that must close theirs (woken with ETERM) still run.  With threading
        monkey-patched, the wait is green already."""
        if gevent.monkey.is_module_patched("threading"):
            _Context.term(self)
            return
        try:
            get_hub().threadpool.apply(_Context.term, (self,))
        except RuntimeError:  # no new thread at interpreter exit: nobody is left to wait for
            _Context.term(self)


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _warn_timeout(option: int) -> None:
    warnings.warn(
        f"{SocketOption(option).name} bounds a green wait in brokerless.green (it has no "
        "effect in pyzmq's zmq.green): a blocking call raises Again when it runs out",
        UserWarning,
        stacklevel=_caller_level(),
    )


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside brokerless (an option set as an attribute
    goes through the property, a frame deeper than ``setsockopt``)."""
    level = 2
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        level, frame = level + 1, frame.f_back
    return level
