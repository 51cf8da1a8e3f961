"""ZMQStream: callbacks for what a socket receives and sends, on a tornado IOLoop (pyzmq's
``zmq.eventloop.zmqstream``, which Jupyter's kernel is built on).

Theory of operation
-------------------
The stream watches the socket's ``FD`` on the IOLoop.  The descriptor is edge-triggered (as
libzmq's): when it fires, ``EVENTS`` says what the socket can do, and the stream does *one*
receive (handing the message to the ``on_recv`` callback) and *one* queued send (then the
``on_send`` callback).  Since an operation may consume the descriptor's signal, ``EVENTS`` is
read again afterwards, and while it still shows something the stream wants, the next round is
scheduled as a loop callback -- so a burst of messages is delivered one per loop iteration,
interleaved with everything else on the loop, never in one long run that starves it.
``flush()`` is the way to take everything pending at once.

Callbacks may be coroutines: their errors are logged, as are a plain callback's (which is then
re-raised to the loop).
"""

from __future__ import annotations

import asyncio
import pickle
import warnings
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from tornado.ioloop import IOLoop
from tornado.log import gen_log

from .._future import _AsyncSocket
from ..constants import Errno, Flag, PollEvent, SocketOption
from ..error import ContextTerminated, ZMQError
from ..frame import MessageTracker
from ..socket import Socket, SyncSocket

POLLIN = int(PollEvent.POLLIN)
POLLOUT = int(PollEvent.POLLOUT)
NOBLOCK = int(Flag.NOBLOCK)

_RecvCallback = Callable[[list[Any]], Any]
_SendCallback = Callable[[list[Any], "MessageTracker | ZMQError | None"], Any]

#: Socket methods a stream offers as its own (``stream.bind is stream.socket.bind``).
_SHORTCUTS = (
    "bind",
    "bind_to_random_port",
    "connect",
    "setsockopt",
    "getsockopt",
    "setsockopt_string",
    "getsockopt_string",
    "setsockopt_unicode",
    "getsockopt_unicode",
)


class ZMQStream:
    """Register callbacks for a socket's messages, driven by a tornado IOLoop.

    * ``on_recv(callback, copy=True)``: ``callback(msg)`` for every message received (a list of
      parts: bytes, or Frames with ``copy=False``); ``on_recv(None)`` stops receiving.
    * ``send_multipart(msg, callback=None)`` (and ``send``, ``send_string``, ``send_json``,
      ``send_pyobj``): queue a message, sent when the socket has room; then
      ``on_send``'s ``callback(msg, status)``.
    * ``flush()`` handles what is pending now; ``close()`` closes the stream and its socket.
    """

    socket: SyncSocket
    io_loop: IOLoop

    def __init__(self, socket: Socket[Any], io_loop: IOLoop | None = None) -> None:
        if isinstance(socket, _AsyncSocket):
            warnings.warn(
                "ZMQStream needs a plain brokerless Socket: given an async one, it uses the "
                "socket that one wraps (create sockets with socket_class=brokerless.Socket)",
                RuntimeWarning,
                stacklevel=2,
            )
            socket = socket._shadow_sock
        self.socket = socket
        self.io_loop = io_loop or IOLoop.current()
        self._fd = socket.getsockopt(SocketOption.FD)
        self._send_queue: deque[tuple[Sequence[Any], dict[str, Any]]] = deque()
        self._recv_callback: _RecvCallback | None = None
        self._send_callback: _SendCallback | None = None
        self._close_callback: Callable[[], Any] | None = None
        self._recv_copy = True
        self._state = 0
        self._flushed = False
        self.io_loop.add_handler(self.socket, self._handle_events, IOLoop.READ)
        for name in _SHORTCUTS:
            method = getattr(socket, name, None)
            if method is not None:
                setattr(self, name, method)

    # -- callbacks ------------------------------------------------------------------------------

    def on_recv(self, callback: _RecvCallback | None, copy: bool = True) -> None:
        """Call ``callback(msg)`` for each message received (``None``: stop receiving).

        ``copy=False`` hands over Frames instead of bytes.
        """
        self._check_closed()
        assert callback is None or callable(callback)
        self._recv_callback = callback
        self._recv_copy = copy
        if callback is None:
            self._drop_io_state(POLLIN)
        else:
            self._add_io_state(POLLIN)

    def on_recv_stream(
        self, callback: Callable[[ZMQStream, list[Any]], Any] | None, copy: bool = True
    ) -> None:
        """``on_recv``, with this stream as the callback's first argument."""
        if callback is None:
            self.stop_on_recv()
        else:
            self.on_recv(lambda msg: callback(self, msg), copy=copy)

    def on_send(self, callback: _SendCallback | None) -> None:
        """Call ``callback(msg, status)`` after each send: ``status`` is what ``send_multipart``
        returned (a MessageTracker or None), or the ZMQError that failed it."""
        self._check_closed()
        assert callback is None or callable(callback)
        self._send_callback = callback

    def on_send_stream(self, callback: Callable[[ZMQStream, list[Any], Any], Any] | None) -> None:
        """``on_send``, with this stream as the callback's first argument."""
        if callback is None:
            self.stop_on_send()
        else:
            self.on_send(lambda msg, status: callback(self, msg, status))

    def stop_on_recv(self) -> None:
        """Stop receiving (and calling the recv callback)."""
        self.on_recv(None)

    def stop_on_send(self) -> None:
        """Stop calling the send callback."""
        self.on_send(None)

    def on_err(self, callback: Callable[..., Any]) -> None:
        """Deprecated, does nothing (as in pyzmq)."""
        gen_log.warning("on_err does nothing, and will be removed")

    def stop_on_err(self) -> None:
        """Deprecated, does nothing (as in pyzmq)."""
        gen_log.warning("on_err does nothing, and will be removed")

    def set_close_callback(self, callback: Callable[[], Any] | None) -> None:
        """Call ``callback()`` when the stream is closed."""
        self._close_callback = callback

    # -- sending --------------------------------------------------------------------------------

    def send_multipart(
        self,
        msg: Sequence[Any],
        flags: int = 0,
        copy: bool = True,
        track: bool = False,
        callback: _SendCallback | None = None,
        **kwargs: Any,
    ) -> None:
        """Queue a message, sent once the socket has room; ``callback`` replaces ``on_send``'s."""
        kwargs.update(flags=flags, copy=copy, track=track)
        self._send_queue.append((msg, kwargs))
        self.on_send(callback or self._send_callback or _ignore)
        self._add_io_state(POLLOUT)

    def send(
        self,
        msg: Any,
        flags: int = 0,
        copy: bool = True,
        track: bool = False,
        callback: _SendCallback | None = None,
        **kwargs: Any,
    ) -> None:
        """Queue a one-part message (see ``send_multipart``)."""
        self.send_multipart([msg], flags=flags, copy=copy, track=track, callback=callback, **kwargs)

    def send_string(
        self,
        u: str,
        flags: int = 0,
        encoding: str = "utf-8",
        callback: _SendCallback | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(u, str):
            raise TypeError("send_string needs a str; use send for bytes")
        self.send(u.encode(encoding), flags=flags, callback=callback, **kwargs)

    send_unicode = send_string

    def send_json(
        self, obj: Any, flags: int = 0, callback: _SendCallback | None = None, **kwargs: Any
    ) -> None:
        import json

        self.send(json.dumps(obj).encode("utf-8"), flags=flags, callback=callback, **kwargs)

    def send_pyobj(
        self,
        obj: Any,
        flags: int = 0,
        protocol: int = -1,
        callback: _SendCallback | None = None,
        **kwargs: Any,
    ) -> None:
        self.send(pickle.dumps(obj, protocol), flags, callback=callback, **kwargs)

    # -- state ----------------------------------------------------------------------------------

    def receiving(self) -> bool:
        """Whether a recv callback is set."""
        return self._recv_callback is not None

    def sending(self) -> bool:
        """Whether messages wait to be sent."""
        return bool(self._send_queue)

    def closed(self) -> bool:
        """Whether the stream is closed (a socket closed underneath closes it too)."""
        if self.socket is None:
            return True
        if self.socket.closed:
            self.close()
            return True
        return False

    def flush(self, flag: int = POLLIN | POLLOUT, limit: int | None = None) -> int:
        """Handle pending messages now, bypassing the loop; returns how many were handled.

        ``flag`` chooses receiving (POLLIN: even with no callback, which discards them) and/or
        sending (POLLOUT); ``limit`` bounds the count.  The loop's own handling of this stream
        is skipped until its next iteration.
        """
        self._check_closed()
        already_flushed, self._flushed = self._flushed, False
        count = 0
        while not limit or count < limit:
            wanted = flag & POLLIN | (flag & POLLOUT if self.sending() else 0)
            events = self.socket.getsockopt(SocketOption.EVENTS) & wanted if wanted else 0
            if not events:
                break
            if events & POLLIN:
                self._handle_recv()
                count += 1
                if self.socket is None:
                    break
            if events & POLLOUT and self.sending():
                self._handle_send()
                count += 1
                if self.socket is None:
                    break
        if count:
            self._flushed = True
            if not already_flushed:
                self.io_loop.add_callback(self._finish_flush)
        elif already_flushed:
            self._flushed = True
        self._rebuild_io_state()
        return count

    def _finish_flush(self) -> None:
        self._flushed = False

    def close(self, linger: int | None = None) -> None:
        """Stop watching the socket, close it, then call the close callback."""
        if self.socket is None:
            return
        if self.socket.closed:
            warnings.warn(
                f"Unregistering FD {self._fd} after closing socket: this can remove the "
                "handler of another descriptor; close the stream with stream.close(), not "
                "its socket",
                stacklevel=2,
            )
            self.io_loop.remove_handler(self._fd)
        else:
            self.io_loop.remove_handler(self._fd)
            self.socket.close(linger)
        self.socket = None  # type: ignore[assignment]
        if self._close_callback:
            self._run_callback(self._close_callback)

    # -- the loop's side ------------------------------------------------------------------------

    def _handle_events(self, fd: Any = None, events: int = 0) -> None:
        """The socket's FD fired (or a round was scheduled): one recv, one send, re-arm."""
        if not self.socket:
            gen_log.warning("Got events for closed stream %s", self)
            return
        try:
            zmq_events = self.socket.getsockopt(SocketOption.EVENTS)
        except ContextTerminated:
            gen_log.warning("Got events for stream %s after terminating context", self)
            self.closed()
            return
        except ZMQError as exc:
            if self.closed():
                gen_log.warning("Got events for stream %s attached to closed socket: %s", self, exc)
            else:
                gen_log.error("Error getting events for %s: %s", self, exc)
            return
        try:
            if zmq_events & POLLIN and self.receiving():
                self._handle_recv()
            if zmq_events & POLLOUT and self.sending() and self.socket:
                self._handle_send()
        except Exception:
            gen_log.error("Uncaught exception in zmqstream callback", exc_info=True)
            raise
        finally:  # even after a failed callback: what is already queued must not wait
            self._rebuild_io_state()  # for a signal that will not come

    def _handle_recv(self) -> None:
        if self._flushed:
            return
        try:
            msg = self.socket.recv_multipart(NOBLOCK, copy=self._recv_copy)
        except ZMQError as exc:
            if exc.errno == Errno.EAGAIN:
                return  # the state changed since EVENTS was read
            raise
        if self._recv_callback:
            self._run_callback(self._recv_callback, msg)

    def _handle_send(self) -> None:
        if self._flushed:
            return
        msg, kwargs = self._send_queue.popleft()
        status: Any
        try:
            status = self.socket.send_multipart(msg, **kwargs)
        except ZMQError as exc:
            gen_log.error("SEND Error: %s", exc)
            status = exc
        if self._send_callback:
            self._run_callback(self._send_callback, msg, status)

    def _run_callback(self, callback: Callable[..., Any], *args: Any) -> None:
        """Run a callback; a coroutine's errors are logged when it ends."""
        try:
            result = callback(*args)
        except Exception:
            gen_log.error("Uncaught exception in ZMQStream callback", exc_info=True)
            raise  # for IOLoop.handle_callback_exception too
        if isinstance(result, Awaitable):
            asyncio.ensure_future(result).add_done_callback(_log_callback_error)

    def _rebuild_io_state(self) -> None:
        if self.socket is None:
            return
        self._state = (POLLIN if self.receiving() else 0) | (POLLOUT if self.sending() else 0)
        self._update_handler(self._state)

    def _add_io_state(self, state: int) -> None:
        self._state |= state
        self._update_handler(self._state)

    def _drop_io_state(self, state: int) -> None:
        self._state &= ~state
        self._update_handler(self._state)

    def _update_handler(self, state: int) -> None:
        """The FD only signals changes: if what we want is there already, schedule a round."""
        if self.socket is not None and state & self.socket.getsockopt(SocketOption.EVENTS):
            self.io_loop.add_callback(self._handle_events)

    def _check_closed(self) -> None:
        if not self.socket:
            raise OSError("Stream is closed")


def _ignore(*args: Any) -> None:
    pass


def _log_callback_error(future: asyncio.Future[Any]) -> None:
    try:
        future.result()
    except Exception:
        gen_log.error("Uncaught exception in ZMQStream callback", exc_info=True)


__all__ = ["ZMQStream"]
