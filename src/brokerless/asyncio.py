"""asyncio support (pyzmq's ``zmq.asyncio``): sockets whose send/recv/poll return
:class:`asyncio.Future`, on any asyncio loop (the default one, uvloop, ...).

    import brokerless.asyncio as zmq_asyncio

    ctx = zmq_asyncio.Context()
    sock = ctx.socket(zmq.PULL)
    msg = await sock.recv_multipart()

How the futures are served is in :mod:`brokerless._future`; this module only says how asyncio
watches a descriptor and runs callbacks.  ``ZMQEventLoop`` and ``install()`` are kept, deprecated,
as pyzmq keeps them: no special loop has been needed since pyzmq 17.
"""

from __future__ import annotations

import asyncio
import selectors
import warnings
from collections.abc import Callable
from typing import Any

from ._future import POLLIN, POLLOUT, _Async, _AsyncContext, _AsyncPoller, _AsyncSocket


class _AsyncIO(_Async):
    _Future = asyncio.Future
    _READ = selectors.EVENT_READ
    _WRITE = selectors.EVENT_WRITE

    def _default_loop(self) -> asyncio.AbstractEventLoop:
        try:
            return asyncio.get_running_loop()
        except RuntimeError:
            warnings.warn(
                "No running event loop: brokerless.asyncio should be used from within an "
                "asyncio loop",
                RuntimeWarning,
                stacklevel=4,
            )
        return asyncio.get_event_loop_policy().get_event_loop()

    @staticmethod
    def _watch_fd(loop: asyncio.AbstractEventLoop, fd: Any, callback: Callable[[], None]) -> None:
        loop.add_reader(fd, callback)

    @staticmethod
    def _unwatch_fd(loop: asyncio.AbstractEventLoop, fd: Any) -> None:
        loop.remove_reader(fd)

    @staticmethod
    def _call_later(
        loop: asyncio.AbstractEventLoop, delay: float, callback: Callable[[], None]
    ) -> asyncio.TimerHandle:
        return loop.call_later(delay, callback)

    @staticmethod
    def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
        loop.call_soon(callback)

    @staticmethod
    def _loop_closed(loop: asyncio.AbstractEventLoop) -> bool:
        return loop.is_closed()


class Poller(_AsyncIO, _AsyncPoller):
    """Poller whose ``poll`` returns an asyncio Future of ``[(socket, events), ...]``."""

    def _watch_raw(
        self, loop: asyncio.AbstractEventLoop, fd: Any, events: int, callback: Callable[[], None]
    ) -> None:
        if events & POLLIN:
            loop.add_reader(fd, callback)
        if events & POLLOUT:
            loop.add_writer(fd, callback)

    def _unwatch_raw(self, loop: asyncio.AbstractEventLoop, fd: Any) -> None:
        loop.remove_reader(fd)
        loop.remove_writer(fd)


class Socket(_AsyncIO, _AsyncSocket):
    """Socket whose send/recv/poll return asyncio Futures."""

    _repr_cls = "zmq.asyncio.Socket"
    _poller_class = Poller


Poller._socket_class = Socket


class Context(_AsyncContext[Socket]):
    """Context whose sockets are :class:`Socket`; ``Context(sync_ctx)`` shadows ``sync_ctx``."""

    __slots__ = ()
    _repr_cls = "zmq.asyncio.Context"
    _socket_class = Socket


class ZMQEventLoop(asyncio.SelectorEventLoop):
    """Deprecated (as in pyzmq 17): sockets work with any asyncio loop."""

    def __init__(self, selector: selectors.BaseSelector | None = None) -> None:
        _deprecated()
        super().__init__(selector)


def install() -> None:
    """Deprecated no-op (as in pyzmq 17): sockets work with any asyncio loop."""
    _deprecated()


def _deprecated() -> None:
    warnings.warn(
        "ZMQEventLoop and brokerless.asyncio.install are deprecated (as in pyzmq 17): no special "
        "event loop is needed",
        DeprecationWarning,
        stacklevel=3,
    )


__all__ = ["Context", "Poller", "Socket", "ZMQEventLoop", "install"]
