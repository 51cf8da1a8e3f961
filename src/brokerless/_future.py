"""Sockets whose send/recv/poll return futures: the event-loop-independent core shared by
:mod:`brokerless.asyncio` and :mod:`brokerless.eventloop.future` (pyzmq's ``zmq._future``).

Theory of operation
-------------------
An async socket is a *façade* over an ordinary brokerless :class:`~brokerless.Socket`: the one it
was made from (``Socket.from_socket(sock)``, ``Socket(sock)``) or one it made itself.  Every
attribute of the sync socket that the façade does not redefine acts on that socket (forwarders
generated from the class at import, below), so options, endpoints and state are one; only the
calls that could block -- ``send*``, ``recv*``, ``poll`` -- return futures.

A call first tries its operation at once, non-blocking, when nothing of its kind is queued: a
message that is there is taken, a send with room is done, and the future is already resolved.
Otherwise the call is queued (one queue for receiving, one for sending, in call order) with the
non-blocking operation that will complete it, and the socket's ``FD`` is watched by the loop.

The ``FD`` follows libzmq's edge-triggered contract (tests/test_fd_events.py): readable means
"read ``EVENTS``", and every send or recv may consume the signal, so ``EVENTS`` is read again
after each operation.  One *pass* (:meth:`_AsyncSocket._handle_events`) reads ``EVENTS`` and
serves the head of each queue it allows, repeating until nothing moves, or until
:data:`_PASS_BUDGET` operations were done -- then the next pass is scheduled, so a flood of
messages for many waiting futures does not hold the loop.  A receive takes its message only when
its future is resolved: a future that was cancelled (or timed out, RCVTIMEO/SNDTIMEO) is skipped
and costs no message.  A failure of the socket itself (context terminated) is handed to every
waiting future; ``close()`` cancels them.

A poll (:class:`_AsyncPoller`, which ``Socket.poll`` uses) waits as pyzmq's does: POLLIN as a
receive, POLLOUT as a send -- a waiter with no operation in that queue, woken in its turn (a
receive queued before it takes a message first), under RCVTIMEO/SNDTIMEO: the first of those and
the poll's own timeout to pass ends it, the options with ``zmq.Again``.  A 0 option does not
wait: only POLLIN is looked at once (as pyzmq does), else Again.  The poll resolves with the
events that woke it added to what is ready when its future is settled, for a receive queued
behind it may take the message first: a 0 before the timeout would look like a timeout.

The loop-specific part (which Future class, how to watch a descriptor, timers) is a small mixin
in each front end; :class:`_AsyncContext` makes contexts whose ``socket()`` returns façades.
"""

from __future__ import annotations

import warnings
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from types import FunctionType, MemberDescriptorType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .constants import Event, Flag, PollEvent, SocketOption
from .context import Context as SyncContext
from .errno import ENOTSUP
from .error import Again, ZMQError
from .poll import Poller as SyncPoller
from .poll import _fileno
from .shadow import resolve as shadow_resolve
from .socket import EndpointContext
from .socket import Socket as SyncSocket

if TYPE_CHECKING:
    from typing_extensions import Self  # typing's from Python 3.11

    from .frame import MessageTracker

NOBLOCK = int(Flag.NOBLOCK)
POLLIN = int(PollEvent.POLLIN)
POLLOUT = int(PollEvent.POLLOUT)
EVENTS = SocketOption.EVENTS
FD = SocketOption.FD
RCVTIMEO = SocketOption.RCVTIMEO
SNDTIMEO = SocketOption.SNDTIMEO

#: Operations one pass may do before it lets the loop run others (see the module doc).
_PASS_BUDGET = 64


class _Pending:
    """A queued call: its future, the non-blocking operation that completes it (None for a
    poll, which only waits for readiness: ``wake`` resolves it), and its RCVTIMEO/SNDTIMEO
    timer."""

    __slots__ = ("future", "operation", "queued", "timer", "wake")

    def __init__(
        self,
        future: Any,
        operation: Callable[[], Any] | None,
        wake: Callable[[], None] | None = None,
    ) -> None:
        self.future = future
        self.operation = operation
        self.wake = wake
        self.timer: Any = None
        self.queued = True


def _unqueue(queue: deque[_Pending], pending: _Pending, _future: Any) -> None:
    """A queued future ended by itself (cancelled, timed out): drop it, so waiting calls that
    never complete do not pile up on a quiet socket."""
    if pending.queued:
        pending.queued = False
        try:
            queue.remove(pending)
        except ValueError:
            pass
    if pending.timer is not None:
        pending.timer.cancel()


def _cancel(future: Any) -> None:
    try:
        future.cancel()
    except RuntimeError:  # its loop is closed already (interpreter exit, a finished run)
        pass


class _Async:
    """What each front end supplies for its event loop (asyncio, tornado)."""

    _Future: type
    _READ: int
    _WRITE: int

    def _default_loop(self) -> Any:
        raise NotImplementedError

    @staticmethod
    def _watch_fd(loop: Any, fd: Any, callback: Callable[[], None]) -> None:
        """Call ``callback`` whenever ``fd`` (an int or an object with fileno()) is readable."""
        raise NotImplementedError

    @staticmethod
    def _unwatch_fd(loop: Any, fd: Any) -> None:
        raise NotImplementedError

    @staticmethod
    def _call_later(loop: Any, delay: float, callback: Callable[[], None]) -> Any:
        """Schedule ``callback``; returns a handle with ``cancel()``."""
        raise NotImplementedError

    @staticmethod
    def _call_soon(loop: Any, callback: Callable[[], None]) -> None:
        raise NotImplementedError

    @staticmethod
    def _loop_closed(loop: Any) -> bool:
        raise NotImplementedError


class _AsyncSocket(_Async, SyncSocket[Awaitable[Any]]):
    """A socket whose blocking calls return futures (see the module doc)."""

    _poller_class: type[_AsyncPoller]
    _shadow_sock: SyncSocket[bytes]

    def __init__(
        self,
        context: SyncContext[Any] | SyncSocket[Any] | None = None,
        socket_type: int = -1,
        io_loop: Any = None,
        _from_socket: SyncSocket[Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(context, SyncSocket):  # Socket(sync_socket), as pyzmq allows
            context, _from_socket = None, context
        shadow = kwargs.pop("shadow", None)
        if shadow is not None:
            _from_socket = _resolve_socket(shadow)
        if io_loop is not None:
            warnings.warn(
                f"{type(self).__name__}(io_loop) is deprecated (as in pyzmq 22.2): "
                "the loop running when the socket waits is used",
                DeprecationWarning,
                stacklevel=3,
            )
        if _from_socket is not None:
            if isinstance(_from_socket, _AsyncSocket):
                _from_socket = _from_socket._shadow_sock
            self._shadow_sock = _from_socket
            self.context = _from_socket.context
        else:
            if not isinstance(context, SyncContext):
                raise TypeError(
                    f"{type(self).__name__} needs a Context (or a Socket to wrap), "
                    f"not {type(context).__name__}"
                )
            self._shadow_sock = SyncContext.socket(
                context, socket_type, socket_class=SyncSocket, **kwargs
            )
            self.context = context
        self._recv_futures: deque[_Pending] = deque()
        self._send_futures: deque[_Pending] = deque()
        self._current_loop: Any = None
        self._pass_scheduled = False
        self._fd = self._shadow_sock.getsockopt(FD)
        self._monitor_facade: Self | None = None

    @classmethod
    def from_socket(cls, socket: SyncSocket[Any], io_loop: Any = None) -> Self:
        """An async socket on ``socket`` (which stays usable: both are the same socket)."""
        return cls(_from_socket=socket, io_loop=io_loop)

    def __del__(self) -> None:
        pass  # the socket is closed by close(), or by its own finalizer once nothing holds it

    # -- endpoints: as the sync socket's, but ``with`` gives back this socket ----------------

    def bind(self, addr: str) -> EndpointContext[Any]:
        return EndpointContext(self, self.unbind, self._shadow_sock.bind(addr).addr)

    def connect(self, addr: str) -> EndpointContext[Any]:
        return EndpointContext(self, self.disconnect, self._shadow_sock.connect(addr).addr)

    def get_monitor_socket(self, events: int = int(Event.ALL), addr: str | None = None) -> Self:
        """The async PAIR receiving this socket's monitor events: one façade on the sync
        socket's monitor socket, the same until that is closed or the monitor disabled (as in
        pyzmq; two façades would both watch its FD, and a loop keeps one watcher per FD)."""
        monitor = self._shadow_sock.get_monitor_socket(events, addr)
        if isinstance(monitor, type(self)):  # an async context made it: one of ours already
            return monitor
        facade = self._monitor_facade
        if facade is None or facade._shadow_sock is not monitor:
            facade = self._monitor_facade = type(self).from_socket(monitor)
        return facade

    def getsockopt(self, option: int) -> Any:
        value = self._shadow_sock.getsockopt(option)
        if option == EVENTS:  # the caller may have consumed the FD's signal: look for us too
            self._schedule_pass()
        return value

    get = getsockopt

    def close(self, linger: int | None = None) -> None:
        """Cancel every waiting call, stop watching the socket, close it.

        Close this socket rather than the one it wraps: closed underneath, its descriptor
        leaves the loop unannounced and waiting calls are not woken."""
        self._drop_pending(None)
        self._unwatch()
        sock = self._shadow_sock
        sock.close(linger)
        # A context that made this socket itself (ctx.socket(kind, socket_class=Socket)) holds
        # it, not the one it wraps, among the sockets term() waits for.
        sock.context._socket_closed(self)

    # -- sending --------------------------------------------------------------------------

    # A future of what the sync socket's send returns (pyzmq's async API): not its signature.
    def send(  # type: ignore[override]
        self, data: Any, flags: int = 0, copy: bool = True, track: bool = False, **kwargs: Any
    ) -> Any:
        """Send one part; the future resolves once it is queued (``None``, or a tracker)."""
        op = partial(self._shadow_sock.send, data, flags | NOBLOCK, copy, track, **kwargs)
        return self._add_send_event(op, flags)

    def send_multipart(
        self, msg_parts: Any, flags: int = 0, copy: bool = True, track: bool = False, **kwargs: Any
    ) -> Any:
        """Send a whole message; the future resolves once it is queued."""
        op = partial(
            self._shadow_sock.send_multipart, msg_parts, flags | NOBLOCK, copy, track, **kwargs
        )
        return self._add_send_event(op, flags)

    # send_string, send_json, send_pyobj and send_serialized are the sync socket's own: they
    # call self.send / self.send_multipart, so here they return those futures, and type
    # checkers are told so (as pyzmq's _future.pyi does).
    if TYPE_CHECKING:

        def send_string(  # type: ignore[override]
            self,
            u: str,
            flags: int = 0,
            copy: bool = True,
            encoding: str = "utf-8",
            **kwargs: Any,
        ) -> Awaitable[MessageTracker | None]: ...

        send_unicode = send_string  # type: ignore[assignment]

        def send_pyobj(  # type: ignore[override]
            self, obj: Any, flags: int = 0, protocol: int = ..., **kwargs: Any
        ) -> Awaitable[MessageTracker | None]: ...

        def send_json(  # type: ignore[override]
            self, obj: Any, flags: int = 0, **kwargs: Any
        ) -> Awaitable[MessageTracker | None]: ...

        def send_serialized(  # type: ignore[override]
            self,
            msg: Any,
            serialize: Callable[[Any], Sequence[Any]],
            flags: int = 0,
            copy: bool = True,
            **kwargs: Any,
        ) -> Awaitable[MessageTracker | None]: ...

    # -- receiving --------------------------------------------------------------------------

    def recv(self, flags: int = 0, copy: bool = True, track: bool = False) -> Any:
        """A future of the next message part."""
        return self._add_recv_event("recv", flags, copy=copy, track=track)

    def recv_multipart(self, flags: int = 0, copy: bool = True, track: bool = False) -> Any:
        """A future of all parts of the next message."""
        return self._add_recv_event("recv_multipart", flags, copy=copy, track=track)

    def recv_into(self, buffer: Any, /, *, nbytes: int = 0, flags: int = 0) -> Any:
        """A future of the size of the next part, written into ``buffer``."""
        return self._add_recv_event("recv_into", flags, buffer, nbytes=nbytes)

    def recv_string(self, flags: int = 0, encoding: str = "utf-8") -> Any:
        return self._add_recv_event("recv_string", flags, encoding=encoding)

    recv_unicode = recv_string

    def recv_json(self, flags: int = 0, **kwargs: Any) -> Any:
        return self._add_recv_event("recv_json", flags, **kwargs)

    def recv_pyobj(self, flags: int = 0) -> Any:
        return self._add_recv_event("recv_pyobj", flags)

    def recv_serialized(
        self, deserialize: Callable[[list[Any]], Any], flags: int = 0, copy: bool = True
    ) -> Any:
        return self._add_recv_event("recv_serialized", flags, deserialize, copy=copy)

    # -- polling ----------------------------------------------------------------------------

    def poll(self, timeout: int | None = None, flags: int = POLLIN) -> Any:
        """A future of this socket's events among ``flags`` within ``timeout`` ms (None: no
        limit); 0 when none came in time.  On a closed socket: ENOTSUP at once, as pyzmq's."""
        if self._shadow_sock.closed:
            raise ZMQError(ENOTSUP, "Operation not supported: the socket is closed")
        poller = self._poller_class()
        poller.register(self, flags)
        poll_future = poller.poll(timeout)
        future = self._Future()

        def unwrap(_: Any) -> None:
            if future.done():
                return
            if poll_future.cancelled():
                _cancel(future)
            elif poll_future.exception() is not None:
                future.set_exception(poll_future.exception())
            else:
                future.set_result(dict(poll_future.result()).get(self, 0))

        def cancel_poll(_: Any) -> None:
            if not poll_future.done():
                _cancel(poll_future)

        if poll_future.done():  # answered at once: done now, as pyzmq's
            unwrap(poll_future)
        else:
            poll_future.add_done_callback(unwrap)
        future.add_done_callback(cancel_poll)
        return future

    # -- the queues -------------------------------------------------------------------------

    def _add_recv_event(self, kind: str, flags: int, *args: Any, **kwargs: Any) -> Any:
        self._shadow_sock._check_alive()  # (a receive on a closed socket fails at the call, as
        # pyzmq's; a send's future fails)
        op = partial(getattr(self._shadow_sock, kind), *args, flags=flags | NOBLOCK, **kwargs)
        return self._add_event(self._recv_futures, op, flags, RCVTIMEO)

    def _add_send_event(self, op: Callable[[], Any], flags: int) -> Any:
        return self._add_event(self._send_futures, op, flags, SNDTIMEO)

    def _add_event(
        self,
        queue: deque[_Pending],
        op: Callable[[], Any],
        flags: int,
        timeout_option: SocketOption,
    ) -> Any:
        future = self._Future()
        # Nothing to wait behind: try at once.  A NOBLOCK receive always does, as pyzmq's; a
        # NOBLOCK send waits its turn behind the sends queued before it, as pyzmq's (sent ahead
        # of them, it broke their order).
        if not queue or (flags & NOBLOCK and queue is self._recv_futures):
            outcome = _run(op)
            if flags & NOBLOCK or not _would_block(outcome):
                _settle(future, outcome)
                if self._send_futures or self._recv_futures:
                    self._schedule_pass()  # (it may have taken the FD's signal for them)
                return future
        pending = _Pending(future, op)
        timeout_ms = self._shadow_sock.getsockopt(timeout_option)
        if timeout_ms >= 0:
            pending.timer = self._call_later(
                self._get_loop(), timeout_ms / 1000, partial(_time_out, future)
            )
        queue.append(pending)
        future.add_done_callback(partial(_unqueue, queue, pending))
        self._get_loop()
        return future

    def _add_poll_event(
        self, events: int, future: Any, woke: Callable[[int], None] | None = None
    ) -> bool:
        """Resolve ``future`` (to None) when one of ``events`` is ready, calling ``woke`` with
        it; take nothing (for Poller).  As pyzmq, POLLIN waits as a receive, POLLOUT as a send,
        each under its timeout option: when that passes first, ``future`` fails with Again.
        True when one of them is 0 (do not wait) and nothing was ready at once: the caller
        fails ``future`` once every socket had its chance to be ready at once."""
        loop = self._get_loop()
        sock = self._shadow_sock
        expired = False
        for flag, queue, option in (
            (POLLIN, self._recv_futures, RCVTIMEO),
            (POLLOUT, self._send_futures, SNDTIMEO),
        ):
            if not events & flag or future.done():
                continue
            wake = partial(_wake_poll, future, woke, flag)
            # pyzmq looks at once for POLLIN (as for a receive), not for POLLOUT
            if flag == POLLIN and not queue and sock.getsockopt(EVENTS) & POLLIN:
                wake()
                continue
            timeout_ms = sock.getsockopt(option)
            if timeout_ms == 0:
                expired = True
                continue
            pending = _Pending(future, None, wake)
            if timeout_ms > 0:
                pending.timer = self._call_later(
                    loop, timeout_ms / 1000, partial(_time_out, future)
                )
            queue.append(pending)
            future.add_done_callback(partial(_unqueue, queue, pending))
        self._schedule_pass()
        return expired

    def _handle_events(self) -> None:
        """One pass: serve both queues while EVENTS allows (see the module doc)."""
        self._pass_scheduled = False
        sock = self._shadow_sock
        if sock.closed:
            self._drop_pending(None)
            return
        for _ in range(_PASS_BUDGET):
            try:
                events = sock.getsockopt(EVENTS)
            except Exception as exc:  # the socket failed (ETERM): nobody will be served
                self._drop_pending(exc)
                self._unwatch()
                return
            moved = False
            if events & POLLIN and self._recv_futures:
                moved = self._serve(self._recv_futures)
            if events & POLLOUT and self._send_futures:
                moved = self._serve(self._send_futures) or moved
            if not moved:
                return
        self._schedule_pass()

    def _serve(self, queue: deque[_Pending]) -> bool:
        """Complete the first live call of ``queue`` (after waking any polls before it)."""
        while queue:
            pending = queue[0]
            if pending.future.done():  # cancelled or timed out; its callback has not run yet
                queue.popleft()
                pending.queued = False
                continue
            if pending.operation is None:  # a poll: ready, nothing taken
                queue.popleft()
                pending.queued = False
                cast(Callable[[], None], pending.wake)()
                continue
            outcome = _run(pending.operation)
            if _would_block(outcome):
                return False  # EVENTS said ready, the socket says not: the FD will tell
            queue.popleft()
            pending.queued = False
            if pending.timer is not None:
                pending.timer.cancel()
            _settle(pending.future, outcome)
            return True
        return False

    def _drop_pending(self, exc: BaseException | None) -> None:
        """End every queued call: with ``exc``, or cancelled (None)."""
        for queue in (self._recv_futures, self._send_futures):
            while queue:
                pending = queue.popleft()
                pending.queued = False
                if pending.timer is not None:
                    pending.timer.cancel()
                if not pending.future.done():
                    if exc is None:
                        _cancel(pending.future)
                    else:
                        pending.future.set_exception(exc)

    # -- the loop ---------------------------------------------------------------------------

    def _get_loop(self) -> Any:
        """The current loop, which watches the socket's FD from the first wait until close."""
        loop = self._default_loop()
        if loop is not self._current_loop:
            self._unwatch()  # a socket used under one loop, then another (successive runs)
            self._current_loop = loop
            self._watch_fd(loop, self, self._handle_events)
            self._schedule_pass()  # whatever happened before we watched
        return loop

    def _unwatch(self) -> None:
        loop, self._current_loop = self._current_loop, None
        if loop is not None and not self._loop_closed(loop):
            self._unwatch_fd(loop, self._fd)

    def _schedule_pass(self) -> None:
        if self._pass_scheduled or not (self._recv_futures or self._send_futures):
            return
        loop = self._current_loop
        if loop is None or self._loop_closed(loop):
            return
        self._pass_scheduled = True
        self._call_soon(loop, self._handle_events)


def _time_out(future: Any) -> None:
    if not future.done():
        future.set_exception(Again())


def _wake_poll(future: Any, woke: Callable[[int], None] | None, flag: int) -> None:
    if not future.done():
        if woke is not None:
            woke(flag)
        future.set_result(None)


class _Failed:
    """An operation's exception, as :func:`_run` returns it."""

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def _run(op: Callable[[], Any]) -> Any:
    """Run a non-blocking operation: its result, or its exception as a :class:`_Failed`."""
    try:
        return op()
    except Exception as exc:
        return _Failed(exc)


def _would_block(outcome: Any) -> bool:
    return outcome.__class__ is _Failed and isinstance(outcome.exc, Again)


def _settle(future: Any, outcome: Any) -> None:
    if outcome.__class__ is _Failed:
        future.set_exception(outcome.exc)
    else:
        future.set_result(outcome)


def _resolve_socket(shadow: Any) -> SyncSocket[Any]:
    """``shadow=``: a socket, or its ``underlying`` address, as pyzmq's takes."""
    if isinstance(shadow, SyncSocket):
        return shadow
    return shadow_resolve(shadow, SyncSocket)


class _AsyncPoller(_Async, SyncPoller):
    """A Poller whose ``poll`` returns a future of the ``[(socket, events), ...]`` list."""

    _socket_class: type[_AsyncSocket]

    def _watch_raw(self, loop: Any, fd: Any, events: int, callback: Callable[[], None]) -> None:
        raise NotImplementedError

    def _unwatch_raw(self, loop: Any, fd: Any) -> None:
        raise NotImplementedError

    def poll(self, timeout: float | None = -1) -> Any:
        """A future of the ready (socket, events) pairs within ``timeout`` ms (None or negative:
        no limit)."""
        future = self._Future()
        if timeout == 0:
            self._attempt_poll(future)
            return future
        loop = self._default_loop()
        # Resolved (to None) by the first socket or fd that is ready, or by the timeout; failed
        # with Again by a socket's RCVTIMEO/SNDTIMEO.
        watcher = self._Future()
        raw: list[Any] = []
        wrapped: list[_AsyncSocket] = []
        woken: dict[Any, int] = {}  # registered socket -> the event that woke the poll
        expired = False

        def wake(*_: Any) -> None:
            if not watcher.done():
                watcher.set_result(None)

        def woke(registered: Any, flag: int) -> None:
            woken[registered] = woken.get(registered, 0) | flag

        for registered, mask in self.sockets:
            if isinstance(registered, SyncSocket):
                sock = registered
                if not isinstance(sock, _AsyncSocket):  # a sync socket: watch it for this call
                    sock = self._socket_class.from_socket(sock)
                    wrapped.append(sock)
                if sock._add_poll_event(mask, watcher, partial(woke, registered)):
                    expired = True
            else:
                raw.append(registered)
                self._watch_raw(loop, registered, mask, wake)
        if expired:  # a zero RCVTIMEO/SNDTIMEO, and no socket was ready at once
            _time_out(watcher)

        def finish(_: Any) -> None:
            for fd in raw:
                self._unwatch_raw(loop, fd)
            for sock in wrapped:
                sock._unwatch()
            if future.done():
                return
            if watcher.cancelled():
                _cancel(future)
            elif watcher.exception() is not None:
                future.set_exception(watcher.exception())
            else:
                self._attempt_poll(future, woken)

        watcher.add_done_callback(finish)
        if timeout is not None and timeout > 0:
            timer = self._call_later(loop, timeout / 1000, wake)
            future.add_done_callback(lambda _: timer.cancel())

        def stop_watching(_: Any) -> None:
            if not watcher.done():
                _cancel(watcher)

        future.add_done_callback(stop_watching)
        return future

    def _attempt_poll(self, future: Any, woken: dict[Any, int] | None = None) -> None:
        """Settle ``future`` with what is ready now, and with the events that woke the poll
        (``woken``): a call queued behind the poll may have taken its message since."""
        outcome = _run(partial(SyncPoller.poll, self, 0))
        if woken and outcome.__class__ is not _Failed:
            ready = dict(outcome)
            for sock, flag in woken.items():
                ready[sock] = ready.get(sock, 0) | flag
            outcome = []
            for registered, _ in self.sockets:  # in registration order, as poll gives them
                key = registered if isinstance(registered, SyncSocket) else _fileno(registered)
                if key in ready:
                    outcome.append((key, ready.pop(key)))
        _settle(future, outcome)
        for sock, _ in self.sockets:  # polling consumed their FD's signals: look for them
            if isinstance(sock, _AsyncSocket):
                sock._schedule_pass()


#: The class of the sockets an async context makes.
_AsyncSocketT = TypeVar("_AsyncSocketT", bound=_AsyncSocket, covariant=True)


class _AsyncContext(SyncContext[_AsyncSocketT]):
    """A Context whose sockets are async (``_socket_class``); ``Context(sync_ctx)`` is another
    face of ``sync_ctx``: the two share all state (one ``__dict__``)."""

    # Per face, beside the shared __dict__: the async sockets this face made, and the context
    # it shadows (kept alive by it; None for a context of its own).
    __slots__ = ("_async_sockets", "_shadowed")

    _socket_class: type[_AsyncSocketT]
    _instance = None  # not the sync Context's shared instance
    _instance_pid = None

    def __init__(
        self,
        io_threads: int | SyncContext[Any] = 1,
        shadow: SyncContext[Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if isinstance(io_threads, SyncContext):  # Context(sync_ctx), as pyzmq allows
            shadow, io_threads = io_threads, 1
        self._async_sockets: weakref.WeakSet[_AsyncSocket] = weakref.WeakSet()
        self._shadowed = shadow
        if shadow is None:
            # Context's overloads type Context() as a sync one; an async context is the same
            # state, its sockets async
            super().__init__(io_threads, **kwargs)  # type: ignore[misc]
        elif isinstance(shadow, SyncContext):
            self.__dict__ = shadow.__dict__
        else:
            raise TypeError(
                f"shadow= takes a brokerless Context here, not {type(shadow).__name__}: an "
                "address (Context.underlying) is resolved by Context.shadow"
            )

    def socket(
        self,
        socket_type: int,
        socket_class: Callable[[Self, int], _AsyncSocketT] | None = None,
        **kwargs: Any,
    ) -> _AsyncSocketT:
        """A new socket, async unless ``socket_class`` says otherwise."""
        cls = socket_class or self._socket_class
        if not (isinstance(cls, type) and issubclass(cls, _AsyncSocket)):
            # a sync socket class, or any factory (context, type) -> socket, as pyzmq takes
            return super().socket(socket_type, socket_class, **kwargs)
        sock = cls(self, socket_type, **kwargs)
        self._async_sockets.add(sock)
        # made by socket_class or _socket_class, whose socket type _AsyncSocketT is
        return cast(_AsyncSocketT, sock)

    def destroy(self, linger: int | None = None) -> None:
        """Close every socket (async ones first: their waiting calls are cancelled)."""
        for sock in list(self._async_sockets):
            sock.close(linger)
        super().destroy(linger)

    def __del__(self) -> None:
        if getattr(self, "_shadowed", None) is None:  # a shadow leaves its context alone
            super().__del__()


# -- the façade's forwarders ---------------------------------------------------------------------

#: Run on the façade itself: they work through its own send/recv (the sync socket's sugar) or
#: must return the façade.
_ON_FACADE = frozenset(
    {"send_string", "send_unicode", "send_json", "send_pyobj", "send_serialized", "context"}
)


def _forward_method(name: str) -> Callable[..., Any]:
    def forward(self: _AsyncSocket, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._shadow_sock, name)(*args, **kwargs)

    forward.__name__ = forward.__qualname__ = name
    forward.__doc__ = getattr(SyncSocket, name).__doc__
    return forward


def _forward_attribute(name: str, attr: Any) -> property:
    def fget(self: _AsyncSocket) -> Any:
        return getattr(self._shadow_sock, name)

    def fset(self: _AsyncSocket, value: Any) -> None:
        setattr(self._shadow_sock, name, value)

    return property(fget, fset, doc=getattr(attr, "__doc__", None))


def _install_forwarders() -> None:
    """Forward what the sync Socket class and its mixins (:mod:`brokerless.socket`) define; the
    option attributes (``SocketOptionAttrs``) stay inherited: they go through the façade's
    ``getsockopt``/``setsockopt``, which are forwarded."""
    seen: set[str] = set()
    for cls in SyncSocket.__mro__:
        if not cls.__module__.startswith(SyncSocket.__module__.rpartition(".")[0]):
            continue
        for name, attr in vars(cls).items():
            if name in seen:
                continue
            seen.add(name)
            if name.startswith("__") or name in _ON_FACADE or name in vars(_AsyncSocket):
                continue
            if isinstance(attr, FunctionType):
                setattr(_AsyncSocket, name, _forward_method(name))
            elif isinstance(attr, property | MemberDescriptorType):
                setattr(_AsyncSocket, name, _forward_attribute(name, attr))


_install_forwarders()
