"""Sockets whose send/recv/poll return tornado Futures (pyzmq's ``zmq.eventloop.future``).

The futures are served as in :mod:`brokerless._future`; this module says how tornado's IOLoop
watches a descriptor and runs callbacks.  As in pyzmq, cancelling one of these futures sets a
:class:`CancelledError` exception on it.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tornado.concurrent import Future
from tornado.ioloop import IOLoop

from .._future import POLLIN, POLLOUT, _Async, _AsyncContext, _AsyncPoller, _AsyncSocket

if TYPE_CHECKING:
    from tornado.platform.asyncio import BaseAsyncIOLoop


class CancelledError(Exception):
    """What a cancelled future of this module raises when awaited (as in pyzmq)."""


class _TornadoFuture(Future[Any]):
    """A tornado Future whose ``cancel`` sets :class:`CancelledError` (as in pyzmq)."""

    def cancel(self, msg: Any = None) -> bool:
        if self.done():
            return False
        self.set_exception(CancelledError())
        return True

    def cancelled(self) -> bool:
        return self.done() and isinstance(self.exception(), CancelledError)


class _TornadoTimer:
    """A tornado timeout with the ``cancel()`` the core expects."""

    __slots__ = ("loop", "timeout")

    def __init__(self, loop: IOLoop, timeout: object) -> None:
        self.loop = loop
        self.timeout = timeout

    def cancel(self) -> None:
        self.loop.remove_timeout(self.timeout)


class _AsyncTornado(_Async):
    _Future: type[asyncio.Future[Any]] = _TornadoFuture
    _READ = IOLoop.READ
    _WRITE = IOLoop.WRITE

    def _default_loop(self) -> IOLoop:
        return IOLoop.current()

    @staticmethod
    def _watch_fd(loop: IOLoop, fd: Any, callback: Callable[[], None]) -> None:
        loop.add_handler(fd, lambda _fd, _events: callback(), IOLoop.READ)

    @staticmethod
    def _unwatch_fd(loop: IOLoop, fd: Any) -> None:
        loop.remove_handler(fd)

    @staticmethod
    def _call_later(loop: IOLoop, delay: float, callback: Callable[[], None]) -> _TornadoTimer:
        return _TornadoTimer(loop, loop.call_later(delay, callback))

    @staticmethod
    def _call_soon(loop: IOLoop, callback: Callable[[], None]) -> None:
        loop.add_callback(callback)

    @staticmethod
    def _loop_closed(loop: BaseAsyncIOLoop) -> bool:  # every IOLoop since tornado 6
        return loop.asyncio_loop.is_closed()


class Poller(_AsyncTornado, _AsyncPoller):
    """Poller whose ``poll`` returns a tornado Future of ``[(socket, events), ...]``."""

    def _watch_raw(self, loop: IOLoop, fd: Any, events: int, callback: Callable[[], None]) -> None:
        mask = (IOLoop.READ if events & POLLIN else 0) | (IOLoop.WRITE if events & POLLOUT else 0)
        loop.add_handler(fd, lambda _fd, _events: callback(), mask)

    def _unwatch_raw(self, loop: IOLoop, fd: Any) -> None:
        loop.remove_handler(fd)


class Socket(_AsyncTornado, _AsyncSocket):
    """Socket whose send/recv/poll return tornado Futures."""

    _repr_cls = "zmq.eventloop.future.Socket"
    _poller_class = Poller


Poller._socket_class = Socket


class Context(_AsyncContext[Socket]):
    """Context whose sockets are :class:`Socket`."""

    __slots__ = ()
    _repr_cls = "zmq.eventloop.future.Context"
    _socket_class = Socket
    io_loop = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if kwargs.pop("io_loop", None) is not None:
            warnings.warn(
                "Context(io_loop) is deprecated (as in pyzmq 22.2): the current loop is used",
                DeprecationWarning,
                stacklevel=2,
            )
        super().__init__(*args, **kwargs)


__all__ = ["CancelledError", "Context", "Poller", "Socket"]
