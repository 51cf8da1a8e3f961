"""The Socket: pyzmq's API over a pattern, its pipes and its mailbox.

Theory of operation
-------------------
A socket is used by one thread at a time (as in libzmq); other threads reach it only through
its mailbox (pipe activations, new pipes, context termination).  Every call first runs any
queued commands, then asks the pattern to move one whole message.  Only when the pattern cannot
(no message, or every pipe at its HWM) does the call block: it waits on the mailbox's file
descriptor with ``select.poll`` -- which Ctrl-C interrupts -- until a command arrives or the
timeout passes, then tries again.  So the common path is: one pattern call, one deque operation,
no lock, no system call.

Multipart messages are assembled in the socket and handed to the pattern whole (a list), which
makes them atomic across HWM and disconnects; the first part of a ``SNDMORE`` sequence is where
the socket checks it may send (and waits, or raises ``Again``), as libzmq does.

Every option is also an attribute (``sock.linger``, ``sock.SNDHWM``): typed descriptors written
into ``option_attrs_generated.py`` by ``tools/gen_constants.py``, which Socket inherits.  A
shadow (``Socket.shadow``, ``Socket(other)``, ``copy.copy``) is another object for the same
socket: see :mod:`brokerless.shadow`.
"""

from __future__ import annotations

import pickle
import random
import select
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, overload

from . import pipe as _pipe
from . import security
from . import shadow as _shadow
from .constants import (
    COMPILED_OUT,
    NOT_HONOURED,
    OPTIONS,
    STRING_OPTIONS,
    Event,
    Flag,
    PollEvent,
    SocketOption,
    SocketType,
    _OptType,
)
from .deadline import Deadline
from .errno import EACCES, EADDRINUSE, EAGAIN, EINVAL, ENOENT, ENOTSOCK, ETERM
from .error import Again, ZMQBindError, ZMQError, error
from .frame import _FINISHED_TRACKER, COPY_THRESHOLD, Frame, MessageTracker
from .mailbox import WAKE
from .monitor import Monitor
from .option_attrs import TopicMethod
from .option_attrs_generated import SocketOptionAttrs
from .patterns import PATTERNS
from .pipe import Pipe
from .transport import endpoint as _endpoint
from .transport.session import Session
from .utils import jsonapi

if TYPE_CHECKING:
    from typing_extensions import Self  # typing's from Python 3.11

    from .context import Context

_O = SocketOption
NOBLOCK = int(Flag.NOBLOCK)
SNDMORE = int(Flag.SNDMORE)
POLLIN = int(PollEvent.POLLIN)
POLLOUT = int(PollEvent.POLLOUT)

# Options that only some socket types accept (the pattern lists the ones it takes).
_TYPE_SPECIFIC = frozenset().union(*(cls.options_accepted for cls in PATTERNS.values()))
_NONNEGATIVE = frozenset({_O.SNDHWM, _O.RCVHWM, _O.RECONNECT_IVL, _O.BACKLOG, _O.HANDSHAKE_IVL})
_MIN_MINUS_ONE = frozenset({_O.LINGER, _O.RCVTIMEO, _O.SNDTIMEO, _O.MAXMSGSIZE})


def _closed_error() -> ZMQError:
    return ZMQError(ENOTSOCK, "Socket operation on non-socket: the socket is closed")


def _term_error() -> ZMQError:
    return error(ETERM, "Context was terminated: close this socket")


#: What ``recv``/``recv_multipart`` give: ``bytes`` (sync sockets), or awaitables of them.
_R = TypeVar("_R", covariant=True)


class Socket(SocketOptionAttrs, Generic[_R]):
    """A brokerless socket; create it with ``Context.socket(type)``.

    ``Socket(ctx, type)`` makes one too, ``Socket(other)`` or ``Socket(shadow=other)`` a shadow
    of ``other`` (a socket or its ``underlying``).  ``copy_threshold``: a ``copy=False`` send of
    fewer bytes is copied anyway (and its tracker is done at once), as in pyzmq.
    """

    __slots__ = (
        "__weakref__",
        "_bound",
        "_closed",
        "_commands",
        "_connected",
        "_fault",
        "_lent_poll",
        "_mailbox",
        "_monitor",
        "_monitor_socket",
        "_options",
        "_pattern",
        "_pipes",
        "_rx_parts",
        "_rx_pos",
        "_shadow_obj",
        "_shadowed",
        "_tx_parts",
        "_type",
        "_wired",
        "_xrecv",
        "_xsend",
        "context",
        "copy_threshold",
    )

    _repr_cls = "zmq.Socket"

    @overload
    def __init__(
        self: Socket[bytes],
        ctx_or_socket: Context,
        socket_type: int,
        *,
        copy_threshold: int | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: Socket[bytes], *, shadow: Socket | int, copy_threshold: int | None = None
    ) -> None: ...
    @overload
    def __init__(self: Socket[bytes], ctx_or_socket: Socket) -> None: ...
    def __init__(
        self: Socket[bytes],
        ctx_or_socket: Context | Socket | None = None,
        socket_type: int = 0,
        *,
        shadow: Socket | int = 0,
        copy_threshold: int | None = None,
    ) -> None:
        if isinstance(ctx_or_socket, Socket):
            ctx_or_socket, shadow = None, ctx_or_socket
        if shadow:
            self._shadow_obj = shadow
            self._shadowed = _shadow.resolve(shadow, Socket)
            self.__class__ = _shadow.face_class(type(self))  # from here on, it forwards
            return
        self._shadow_obj = None
        if ctx_or_socket is None:
            raise TypeError("Socket needs a Context and a socket type (or a Socket to shadow)")
        try:
            self._type = SocketType(socket_type)
            pattern_class = PATTERNS[self._type]
        except (ValueError, KeyError):
            raise ZMQError(
                EINVAL, f"Invalid argument: socket type {socket_type!r} is not supported"
            ) from None
        self.context = ctx_or_socket
        self.copy_threshold = COPY_THRESHOLD if copy_threshold is None else copy_threshold
        self._options: dict[SocketOption, Any] = {opt: s.default for opt, s in OPTIONS.items()}
        self._options[_O.TYPE] = int(self._type)
        self._pattern = pattern_class(self._options)
        self._mailbox = ctx_or_socket._new_mailbox()
        # Bound once: the hot paths look these up on every message.
        self._commands = self._mailbox.commands
        self._xsend = self._pattern.xsend
        self._xrecv = self._pattern.xrecv
        self._options[_O.FD] = self._mailbox.fileno()
        self._pipes: set[Pipe] = set()
        self._bound: list[str] = []
        self._connected: dict[str, list[Pipe]] = {}
        self._tx_parts: list | None = None  # parts of a multipart message being sent
        self._rx_parts: list | None = None  # rest of a multipart message being received
        self._rx_pos = 0
        self._fault: Callable[[], ZMQError] | None = None  # set once closed or terminated
        self._closed = False
        self._monitor: Monitor | None = None
        self._monitor_socket: Socket | None = None
        # (engine, poll object watching its descriptor and our mailbox) for _wait_reading
        self._lent_poll: tuple[Any, Any] | None = None
        # Whether a pipe may carry a connection's properties (tcp/ipc): only then do frames
        # received with copy=False look them up (an inproc socket pays nothing for them).
        self._wired = False

    # -- identity ------------------------------------------------------------------------------

    @property
    def socket_type(self) -> SocketType:
        return self._type

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def underlying(self) -> int:
        """The number ``Socket.shadow`` takes for this socket (see :mod:`brokerless.shadow`)."""
        return _shadow.address(self)

    @property
    def _shadow(self) -> bool:
        """Whether this object is a shadow of another socket."""
        return self._shadow_obj is not None

    @classmethod
    def shadow(cls, address: Socket | int) -> Self:
        """Another object for an existing socket: ``address`` is the socket or its
        ``underlying``.  Closing either closes the socket; dropping the shadow does not."""
        return cls(shadow=_shadow.resolve(address, Socket))

    def __copy__(self, memo: Any = None) -> Self:
        """A copy is a shadow: the same socket (pyzmq's rule)."""
        return type(self).shadow(self.underlying)

    __deepcopy__ = __copy__

    def fileno(self) -> int:
        """The mailbox file descriptor (readable when the socket may have news)."""
        return self._mailbox.fileno()

    def __repr__(self) -> str:
        """pyzmq's ``<zmq.Socket(zmq.PUSH) at 0x…>``, then where it is bound and connected,
        its peers and what is queued for them, or ``closed``."""
        cls = type(self)
        name = vars(cls).get("_repr_cls") or f"{cls.__module__}.{cls.__name__}"
        head = f"<{name}(zmq.{self._type.name}) at {id(self):#x}"
        if self._closed:
            return f"{head} closed>"
        where = []
        if self._bound:
            where.append("bound " + ",".join(self._bound))
        if self._connected:
            where.append("connected " + ",".join(self._connected))
        queued = sum(p.pending_out() for p in self._pipes)
        state = " ".join(where) or "unbound"
        return f"{head} {state}, {len(self._pipes)} peers, {queued} queued>"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        """Dropped while open: closed, with a ResourceWarning (pyzmq's).  A shadow closes
        nothing."""
        if getattr(self, "_shadow_obj", True) is not None or getattr(self, "_closed", True):
            return
        if warnings.warn is not None:  # None late in interpreter shutdown
            warnings.warn(f"unclosed socket {self!r}", ResourceWarning, stacklevel=2, source=self)
        try:
            self.close()
        except Exception:
            pass

    # -- commands from other threads ------------------------------------------------------------

    def send_command(self, command: str, arg: Any) -> None:
        """Deliver a command to this socket (any thread); see :mod:`brokerless.mailbox`."""
        self._mailbox.send(command, arg)
        if self._closed:  # nobody will read it: see _drop_commands
            self._drop_commands()

    def _process_commands(self) -> None:
        self._mailbox.process(self._dispatch)
        if self._fault is not None:
            raise self._fault()

    def _dispatch(self, command: str, arg: Any) -> None:
        _HANDLERS[command](self, arg)

    def _on_activate_read(self, pipe: Pipe) -> None:
        if pipe in self._pipes:
            self._pattern.read_activated(pipe)

    def _on_activate_write(self, pipe: Pipe) -> None:
        if pipe in self._pipes:
            self._pattern.write_activated(pipe)

    def _on_pipe_term(self, pipe: Pipe) -> None:
        if pipe in self._pipes:
            if pipe.process_pipe_term():
                self.pipe_terminated(pipe)
            else:
                self._pattern.read_activated(pipe)  # read what is left, then it goes

    def _on_hiccup(self, pipe: Pipe) -> None:
        if pipe in self._pipes:
            self._pattern.hiccuped(pipe)

    def _on_wake(self, _: Any) -> None:
        pass  # woken from a lent read (see _wait_for): the caller's loop looks again

    def _on_stop(self, _: Any) -> None:
        if not self._closed:
            self._fault = _term_error

    # -- pipes ----------------------------------------------------------------------------------

    def attach_pipe(self, pipe: Pipe) -> None:
        """Take a new pipe (owner thread only)."""
        if self._closed:
            pipe.terminate()
            return
        pipe.owner = self  # first: a peer closing from now on tells us (see Pipe.terminate)
        self._pipes.add(pipe)
        if pipe.peer.owner.__class__ is Session:
            self._wired = True
        result = self._pattern.attach(pipe)
        if result is False:
            self._pipes.discard(pipe)
            pipe.terminate()
            return
        if result.__class__ is Pipe:  # replaced by the new one (ROUTER_HANDOVER)
            self._pipes.discard(result)
            result.terminate()
            result.drop_inbound()
        if pipe.peer_gone():  # the peer closed before we attached: as if told
            self._on_pipe_term(pipe)

    def pipe_terminated(self, pipe: Pipe) -> None:
        """A pipe has ended (called by the pipe or on PIPE_TERM)."""
        if pipe in self._pipes:
            self._pipes.discard(pipe)
            self._pattern.terminated(pipe)
            for pipes in self._connected.values():
                if pipe in pipes:
                    pipes.remove(pipe)

    # -- endpoints ------------------------------------------------------------------------------

    def bind(self, addr: str) -> EndpointContext:
        """Accept connections on ``addr``; ``with sock.bind(addr):`` unbinds on exit."""
        self._check_alive()
        try:
            ep = _endpoint.parse(addr)
            uri = self.context._transport(ep.transport).bind(self, ep)
        except ZMQError as exc:
            _name_endpoint(exc, addr)
            raise
        self._bound.append(uri)
        self._options[_O.LAST_ENDPOINT] = uri.encode()
        self._emit(Event.LISTENING, 0, uri)
        return EndpointContext(self, self.unbind, uri)

    def bind_to_random_port(
        self, addr: str, min_port: int = 49152, max_port: int = 65536, max_tries: int = 100
    ) -> int:
        """Bind ``addr`` (e.g. ``tcp://127.0.0.1``) to a free port and return the port."""
        for port in random.sample(range(min_port, max_port), min(max_tries, max_port - min_port)):
            try:
                self.bind(f"{addr}:{port}")
            except ZMQError as exc:
                if exc.errno not in (EADDRINUSE, EACCES):
                    raise
            else:
                return port
        raise ZMQBindError(f"Could not bind {addr} to a port in [{min_port}, {max_port})")

    def connect(self, addr: str) -> EndpointContext:
        """Connect to ``addr`` (the peer need not exist yet); ``with`` disconnects on exit."""
        self._check_alive()
        try:
            ep = _endpoint.parse(addr)
            self._pattern.check_connect()
            pipes = self.context._transport(ep.transport).connect(self, ep)
        except ZMQError as exc:
            _name_endpoint(exc, addr)
            raise
        self._connected.setdefault(ep.uri, []).extend(pipes)
        self._options[_O.LAST_ENDPOINT] = ep.uri.encode()
        self._options[_O.CONNECT_ROUTING_ID] = b""
        return EndpointContext(self, self.disconnect, ep.uri)

    def unbind(self, addr: str) -> None:
        self._check_alive()
        ep = _endpoint.parse(addr)
        if ep.uri not in self._bound:
            raise ZMQError(ENOENT, f"No such file or directory: {addr} is not bound")
        self.context._transport(ep.transport).unbind(self, ep)
        self._bound.remove(ep.uri)

    def disconnect(self, addr: str) -> None:
        self._check_alive()
        ep = _endpoint.parse(addr)
        pipes = self._connected.pop(ep.uri, None)
        if pipes is None:
            raise ZMQError(ENOENT, f"No such file or directory: not connected to {addr}")
        self.context._transport(ep.transport).disconnect(self, ep)
        for pipe in pipes:
            self._pipes.discard(pipe)
            self._pattern.terminated(pipe)
            pipe.terminate()

    def stop_receiving(self) -> None:
        """Take nothing more from the network (brokerless only: libzmq has no such call).

        Every tcp/ipc connection of the socket stops reading, listeners stop accepting and
        connections are not remade; what had already come in whole -- in the pipes, and
        decoded but waiting for room below RCVHWM -- is queued for ``recv``, so reading until
        EAGAIN afterwards takes every message the socket received, and nothing arrives after.
        Sending goes on over the connections there are.  inproc peers are not affected."""
        self._check_alive()
        names = {_endpoint.parse(uri).transport for uri in [*self._bound, *self._connected]}
        for name in sorted(names):
            self.context._transport(name).stop_input(self)

    # -- monitoring -----------------------------------------------------------------------------

    def monitor(self, addr: str | None, events: int = int(Event.ALL)) -> None:
        """Publish this socket's events on a PAIR bound at ``addr`` (inproc); None stops."""
        self._check_alive()
        old, self._monitor = self._monitor, None
        if old is not None:
            old.stop()
        if addr is not None and events:
            self._monitor = Monitor(self, addr, events)

    def get_monitor_socket(self, events: int = int(Event.ALL), addr: str | None = None) -> Socket:
        """A PAIR socket that receives this socket's monitor events (the same one until it is
        closed or the monitor disabled, as in pyzmq)."""
        sock = self._monitor_socket
        if sock is not None and not sock.closed:
            return sock
        addr = addr or f"inproc://monitor.s-{id(self):x}"
        self.monitor(addr, events)
        sock = self._monitor_socket = self.context.socket(SocketType.PAIR)
        sock.connect(addr)
        return sock

    def disable_monitor(self) -> None:
        self._monitor_socket = None
        self.monitor(None, 0)

    def _emit(self, event: int, value: int, endpoint: str) -> None:
        """Report a monitor event (any thread)."""
        monitor = self._monitor
        if monitor is not None:
            monitor.emit(event, value, endpoint)

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self, linger: int | None = None) -> None:
        """Close the socket; queued messages already handed to inproc peers stay theirs."""
        if self._closed:
            return
        if linger is not None:
            self._options[_O.LINGER] = linger
        self._closed = True
        self._fault = _closed_error
        self.context._socket_closing(self)
        for uri in self._bound:
            self._emit(Event.CLOSED, 0, uri)
        if self._monitor is not None:
            self._monitor.stop()
            self._monitor = None
        self._bound.clear()
        self._connected.clear()
        for pipe in list(self._pipes):
            pipe.terminate()
            pipe.drop_inbound()
        self._pipes.clear()
        self._lent_poll = None
        self._drop_commands()
        self._mailbox.close()
        self.context._socket_closed(self)

    def _drop_commands(self) -> None:
        """Drop the commands a closed socket will never process, ending each pipe handed to it
        (ATTACH) so that its session finishes.  ``close`` drops those queued; one sent after it
        -- the pipe of a connection whose handshake completed as the socket closed -- is
        dropped by its sender, which sees ``_closed`` after queueing it.  Each command is taken
        once, by whichever of them pops it."""
        commands = self._mailbox.commands
        while True:
            try:
                command, arg = commands.popleft()
            except IndexError:
                return
            if command == ATTACH:
                arg.terminate()

    def _check_alive(self) -> None:
        if self._fault is not None:
            raise self._fault()

    # -- sending --------------------------------------------------------------------------------

    def send(
        self,
        data: Any,
        flags: int = 0,
        copy: bool = True,
        track: bool = False,
        routing_id: int | None = None,
        group: str | None = None,
    ) -> MessageTracker | None:
        """Send one message part (``SNDMORE`` in ``flags`` for more parts to follow).

        ``track=True`` returns a :class:`MessageTracker`, done once brokerless holds the data
        no more; a copied part (``copy=True``, or fewer bytes than ``copy_threshold``) is done
        at once.  A Frame made with ``track=True`` returns its tracker whatever ``track`` says.
        """
        if self._fault is not None:
            raise self._fault()
        if data.__class__ is not bytes or track:
            data = _to_part(data, copy, track, self.copy_threshold)
            track = track or (data.__class__ is Frame and data.tracker is not None)
        if flags & SNDMORE:
            self._send_more(data, flags)
        else:
            msg = data
            if self._tx_parts is not None:
                msg = self._tx_parts
                msg.append(data)
                self._tx_parts = None
                if self._commands:
                    self._process_commands()
                # Room was checked at the first part; if the peer left since, the message is
                # dropped (libzmq never fails the later parts of a message).
                self._xsend(msg)
            else:
                if self._commands:
                    self._process_commands()
                if not self._xsend(msg):
                    self._send_blocking(msg, flags)
        if track:
            return data.tracker if data.__class__ is Frame else _FINISHED_TRACKER
        return None

    def _send_more(self, part: Any, flags: int) -> None:
        parts = self._tx_parts
        if parts is not None:
            parts.append(part)
            return
        if self._commands:
            self._process_commands()
        pattern = self._pattern
        if not pattern.xprepare_send(part):
            self._wait_for(lambda: pattern.xprepare_send(part) or None, flags, _O.SNDTIMEO)
        self._tx_parts = [part]

    def _send_blocking(self, msg: Any, flags: int) -> None:
        xsend = self._xsend
        self._wait_for(lambda: xsend(msg) or None, flags, _O.SNDTIMEO)

    def send_multipart(
        self, msg_parts: Sequence[Any], flags: int = 0, copy: bool = True, track: bool = False
    ) -> MessageTracker | None:
        """Send a whole multipart message at once (one hand-over, however many parts).

        ``track=True``: one tracker for the message (see :meth:`send`)."""
        if self._fault is not None:
            raise self._fault()
        if track:
            parts, tracker = _tracked_parts(msg_parts, copy, self.copy_threshold)
        else:
            threshold = self.copy_threshold
            parts = [
                p if p.__class__ is bytes else _to_part(p, copy, False, threshold)
                for p in msg_parts
            ]
        if not parts:
            raise ValueError("send_multipart needs at least one part")
        if flags & SNDMORE:
            for part in parts:
                self.send(part, flags)
            return None
        if self._tx_parts is not None:
            parts = self._tx_parts + parts
            self._tx_parts = None
        msg = parts[0] if len(parts) == 1 else parts
        if self._commands:
            self._process_commands()
        if not self._xsend(msg):
            self._send_blocking(msg, flags)
        return tracker if track else None

    # -- receiving ------------------------------------------------------------------------------

    def _recv_msg(self, flags: int) -> Any:
        """The next whole message from the pattern, waiting as flags and RCVTIMEO allow."""
        if self._commands:
            self._process_commands()
        msg = self._xrecv()
        if msg is None:
            msg = self._wait_for(self._xrecv, flags, _O.RCVTIMEO, reading=True)
        return msg

    @overload
    def recv(self, flags: int = 0, copy: Literal[True] = True, track: bool = False) -> bytes: ...
    @overload
    def recv(self, flags: int = 0, *, copy: Literal[False], track: bool = False) -> Frame: ...
    @overload
    def recv(self, flags: int, copy: Literal[False], track: bool = False) -> Frame: ...
    @overload
    def recv(self, flags: int = 0, copy: bool = True, track: bool = False) -> bytes | Frame: ...
    def recv(self, flags: int = 0, copy: bool = True, track: bool = False) -> Any:
        """Receive one message part (``bytes``, or a :class:`Frame` with ``copy=False``)."""
        if self._fault is not None:
            raise self._fault()
        if self._rx_parts is not None:
            part, more = self._next_part()
        else:
            if self._commands:
                self._process_commands()
            msg = self._xrecv()
            if msg is None:
                msg = self._wait_for(self._xrecv, flags, _O.RCVTIMEO, reading=True)
            if msg.__class__ is list:
                self._rx_parts = msg
                self._rx_pos = 1
                part, more = msg[0], True
            else:
                part, more = msg, False
        if copy:
            if part.__class__ is bytes:
                return part
            return _frame_bytes(part)
        if self._wired:
            return _wired_frame(part, more, self._pattern.received_from())
        return _as_frame(part, more)

    def _next_part(self) -> tuple[Any, bool]:
        parts = self._rx_parts
        part = parts[self._rx_pos]
        self._rx_pos += 1
        if self._rx_pos == len(parts):
            self._rx_parts = None
            return part, False
        return part, True

    @overload
    def recv_multipart(
        self, flags: int = 0, copy: Literal[True] = True, track: bool = False
    ) -> list[bytes]: ...
    @overload
    def recv_multipart(
        self, flags: int = 0, *, copy: Literal[False], track: bool = False
    ) -> list[Frame]: ...
    @overload
    def recv_multipart(
        self, flags: int, copy: Literal[False], track: bool = False
    ) -> list[Frame]: ...
    @overload
    def recv_multipart(
        self, flags: int = 0, copy: bool = True, track: bool = False
    ) -> list[bytes] | list[Frame]: ...
    def recv_multipart(self, flags: int = 0, copy: bool = True, track: bool = False) -> Any:
        """Receive all parts of the next message."""
        if self._fault is not None:
            raise self._fault()
        if self._rx_parts is not None:
            parts = self._rx_parts[self._rx_pos :]
            self._rx_parts = None
        else:
            msg = self._recv_msg(flags)
            parts = msg if msg.__class__ is list else [msg]
        if copy:
            return [p if p.__class__ is bytes else _frame_bytes(p) for p in parts]
        last = len(parts) - 1
        if self._wired:
            source = self._pattern.received_from()
            return [_wired_frame(p, i < last, source) for i, p in enumerate(parts)]
        return [_as_frame(p, i < last) for i, p in enumerate(parts)]

    def recv_into(self, buffer: Any, /, *, nbytes: int = 0, flags: int = 0) -> int:
        """Receive one part into ``buffer``; returns the part's full size (the rest is cut).

        ``nbytes`` (0: the whole buffer) limits how much is written.
        """
        view = memoryview(buffer)
        if view.readonly:
            raise BufferError("recv_into needs a writable buffer")
        if not view.c_contiguous:
            raise BufferError("recv_into needs one contiguous block of memory")
        view = view.cast("B")
        if nbytes < 0 or nbytes > len(view):
            raise ValueError(f"nbytes={nbytes} must be between 0 and the buffer size {len(view)}")
        room = nbytes or len(view)
        part = self.recv(flags, copy=False)
        data = part.buffer.cast("B")
        n = min(room, len(data))
        view[:n] = data[:n]
        return len(data)

    # -- waiting --------------------------------------------------------------------------------

    def _wait_for(
        self,
        attempt: Callable[[], Any],
        flags: int,
        timeout_option: SocketOption,
        reading: bool = False,
    ) -> Any:
        """Retry ``attempt`` as commands arrive until it returns something other than None (an
        empty message ``b""`` is a result too) or time runs out.
        ``reading``: waiting for a message, so with one network peer this thread reads the
        connection itself while it waits (see ``_wait_reading``)."""
        if flags & NOBLOCK:
            raise Again(EAGAIN, "Resource temporarily unavailable")
        deadline = Deadline(self._options[timeout_option])
        mailbox = self._mailbox
        while True:
            self._process_commands()
            result = attempt()
            if result is not None:
                return result
            wait_ms = deadline.wait_ms()
            if wait_ms is None:
                raise Again(EAGAIN, "Resource temporarily unavailable")
            if not (reading and self._wait_reading(wait_ms)):
                mailbox.wait(wait_ms)

    def _wait_reading(self, wait_ms: int) -> bool:
        """Wait for a command or for data on the connection behind this socket's only pipe,
        reading that data here -- no hand-over to the I/O thread, whose turn may be a GIL
        switch away (see "Lent input" in :mod:`brokerless.transport.engine`).  Lock-step
        sockets only (REQ, REP: each wait is for one reply): a stream's receiver is better
        served by the I/O thread reading ahead in large batches.  False when there is no such
        connection or it cannot be lent now: then wait as usual."""
        if len(self._pipes) != 1 or not self._pattern.lock_step:
            return False
        (pipe,) = self._pipes
        session = pipe.peer.owner
        if session.__class__ is not Session or session.engine is None:
            return False
        engine = session.engine
        if not engine.lend_input():
            return False
        mailbox = self._mailbox
        lent_poll = self._lent_poll
        if lent_poll is None or lent_poll[0] is not engine:
            poller = select.poll()
            poller.register(engine.fileno, select.POLLIN)
            poller.register(mailbox.fileno(), select.POLLIN)
            self._lent_poll = lent_poll = (engine, poller)
        pipe.hold_reader_awake()  # what we read goes into the pipe unsignalled: we look next
        try:
            mailbox.use_fd()
            if mailbox.commands:
                return True
            for fd, _ in lent_poll[1].poll(wait_ms):
                if fd == engine.fileno:
                    engine.read_lent()
                else:
                    mailbox.clear_fd()
        finally:
            engine.return_input()
            self._pattern.read_activated(pipe)
        return True

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
        self._process_commands()
        events = 0
        if self._rx_parts is not None or self._pattern.xhas_in():
            events |= POLLIN
        if self._tx_parts is not None or self._pattern.xhas_out():
            events |= POLLOUT
        return events

    # -- options --------------------------------------------------------------------------------

    def setsockopt(self, option: int, optval: Any) -> None:
        """Set a socket option (pyzmq's ``setsockopt``; ``set`` is the same)."""
        self._check_alive()
        opt = _known_option(option, optval)
        spec = OPTIONS[opt]
        if not spec.settable:
            raise ZMQError(EINVAL, f"Invalid argument: option {opt.name} is read-only")
        if opt in _TYPE_SPECIFIC and opt not in self._pattern.options_accepted:
            raise ZMQError(
                EINVAL,
                f"Invalid argument: option {opt.name} does not apply to a {self._type.name} socket",
            )
        value = _check_value(opt, spec.kind, optval)
        if opt in NOT_HONOURED and value != spec.default:
            raise ZMQError(EINVAL, _not_honoured(opt))
        if opt in security.OPTIONS:
            security.set_option(self._options, opt, value)
            return
        self._options[opt] = value
        if opt in (_O.SNDHWM, _O.RCVHWM):
            self._apply_hwm(opt, value)
        if opt in self._pattern.options_accepted:
            if self._commands:
                self._process_commands()
            self._pattern.xsetsockopt(opt, value)

    set = setsockopt

    def getsockopt(self, option: int) -> Any:
        """Read a socket option (pyzmq's ``getsockopt``; ``get`` is the same)."""
        self._check_alive()
        opt = _known_option(option)
        if not OPTIONS[opt].gettable:
            raise ZMQError(EINVAL, f"Invalid argument: option {opt.name} cannot be read")
        if opt == _O.RCVMORE:
            return int(self._rx_parts is not None)
        if opt in (_O.EVENTS, _O.FD):
            self._mailbox.use_fd()  # whoever asks is about to wait on the descriptor
            if opt == _O.FD:
                return self._mailbox.fileno()
            self._mailbox.clear_fd()  # an event loop woke on it: reset before looking
            return PollEvent(self._events())
        if opt == _O.TYPE:
            return self._type
        if opt in security.READ_BACK:
            return security.get_option(self._options, opt)
        return self._options[opt]

    get = getsockopt

    def setsockopt_string(self, option: int, optval: str, encoding: str = "utf-8") -> None:
        """Set a text option from ``str``, encoded with ``encoding``."""
        if not isinstance(optval, str):
            raise TypeError(f"setsockopt_string needs a str, not {type(optval).__name__}")
        self.setsockopt(option, optval.encode(encoding))

    set_string = setsockopt_unicode = setsockopt_string

    def getsockopt_string(self, option: int, encoding: str = "utf-8") -> str:
        """Read a bytes option as ``str``, decoded with ``encoding``."""
        opt = _known_option(option)
        if opt._opt_type is not _OptType.bytes:
            raise TypeError(f"option {opt.name} holds an int, not text")
        return self.getsockopt(opt).decode(encoding)

    get_string = getsockopt_unicode = getsockopt_string

    @TopicMethod
    def subscribe(self, topic: str | bytes) -> None:
        """Receive messages that start with ``topic`` (SUB, XSUB; ``str`` is UTF-8 encoded)."""
        if isinstance(topic, str):
            topic = topic.encode()
        self.setsockopt(_O.SUBSCRIBE, topic)

    @TopicMethod
    def unsubscribe(self, topic: str | bytes) -> None:
        """Undo one ``subscribe(topic)``."""
        if isinstance(topic, str):
            topic = topic.encode()
        self.setsockopt(_O.UNSUBSCRIBE, topic)

    def _apply_hwm(self, opt: SocketOption, value: int) -> None:
        for pipe in self._pipes:
            if opt == _O.SNDHWM:
                pipe.set_writer_hwm(value)
            else:
                pipe.set_reader_hwm(value)

    def get_hwm(self) -> int:
        """The high-water mark: SNDHWM (the socket's are equal unless set apart)."""
        return self.getsockopt(_O.SNDHWM)

    def set_hwm(self, value: int) -> None:
        """Set SNDHWM and RCVHWM both (for connections made afterwards, as in libzmq)."""
        self.setsockopt(_O.SNDHWM, value)
        self.setsockopt(_O.RCVHWM, value)

    hwm = property(get_hwm, set_hwm, doc="SNDHWM when read; SNDHWM and RCVHWM when set.")

    # -- serialisation helpers (pyzmq's) ---------------------------------------------------------

    def send_string(
        self, u: str, flags: int = 0, copy: bool = True, encoding: str = "utf-8", **kwargs: Any
    ) -> MessageTracker | None:
        if not isinstance(u, str):
            raise TypeError("send_string needs a str; use send for bytes")
        return self.send(u.encode(encoding), flags=flags, copy=copy, **kwargs)

    send_unicode = send_string

    def recv_string(self, flags: int = 0, encoding: str = "utf-8") -> str:
        return self.recv(flags).decode(encoding)

    recv_unicode = recv_string

    def send_pyobj(
        self, obj: Any, flags: int = 0, protocol: int = pickle.DEFAULT_PROTOCOL, **kwargs: Any
    ) -> MessageTracker | None:
        return self.send(pickle.dumps(obj, protocol), flags=flags, **kwargs)

    def recv_pyobj(self, flags: int = 0) -> Any:
        return pickle.loads(self.recv(flags))

    def send_json(self, obj: Any, flags: int = 0, **kwargs: Any) -> MessageTracker | None:
        send_kwargs = {
            k: kwargs.pop(k) for k in ("copy", "track", "routing_id", "group") if k in kwargs
        }
        return self.send(jsonapi.dumps(obj, **kwargs), flags=flags, **send_kwargs)

    def recv_json(self, flags: int = 0, **kwargs: Any) -> Any:
        return jsonapi.loads(self.recv(flags), **kwargs)

    def send_serialized(
        self,
        msg: Any,
        serialize: Callable[[Any], Sequence[Any]],
        flags: int = 0,
        copy: bool = True,
        **kwargs: Any,
    ) -> MessageTracker | None:
        return self.send_multipart(serialize(msg), flags=flags, copy=copy, **kwargs)

    def recv_serialized(
        self, deserialize: Callable[[list], Any], flags: int = 0, copy: bool = True
    ) -> Any:
        return deserialize(self.recv_multipart(flags, copy=copy))


# Commands the context and transports send to sockets.
ATTACH = "attach"
STOP = "stop"

# Command dispatch (a class-level table: bound methods would make every socket a cycle).
_HANDLERS: dict[str, Callable[[Socket, Any], None]] = {
    WAKE: Socket._on_wake,
    _pipe.ACTIVATE_READ: Socket._on_activate_read,
    _pipe.ACTIVATE_WRITE: Socket._on_activate_write,
    _pipe.PIPE_TERM: Socket._on_pipe_term,
    _pipe.HICCUP: Socket._on_hiccup,
    ATTACH: Socket.attach_pipe,
    STOP: Socket._on_stop,
}


class EndpointContext:
    """What ``bind``/``connect`` return: ``with sock.connect(url):`` undoes it on exit."""

    __slots__ = ("_socket", "_undo", "addr")

    def __init__(self, socket: Socket, undo: Callable[[str], None], addr: str) -> None:
        self._socket = socket
        self._undo = undo
        self.addr = addr

    @property
    def kind(self) -> str:
        """What leaving the ``with`` block undoes: "bind" or "connect"."""
        return _UNDONE.get(self._undo.__name__, self._undo.__name__)

    def __repr__(self) -> str:
        return f"<SocketContext({self.kind}={self.addr!r})>"

    def __enter__(self) -> Socket:
        return self._socket

    def __exit__(self, *exc: object) -> None:
        if not self._socket.closed:
            self._undo(self.addr)


_UNDONE = {"unbind": "bind", "disconnect": "connect"}


def _to_part(
    data: Any,
    copy: bool,
    track: bool = False,
    copy_threshold: int = 0,
    tracker: MessageTracker | None = None,
) -> Any:
    """What goes into a pipe for one user-supplied part.  Tracked (``track``) and shared
    (``copy=False``, at least ``copy_threshold`` bytes), it travels in a carrier that holds
    ``tracker`` (a new one when None)."""
    if isinstance(data, Frame):
        if data.tracker is None:
            if track:
                raise ValueError("Not a tracked message: make the Frame with track=True")
            return data
        return Frame._carrier(data._data, data.tracker)
    if data.__class__ is bytes:  # here only when tracked
        if copy or len(data) < copy_threshold:
            return data
        return Frame._carrier(data, tracker or MessageTracker())
    if isinstance(data, str):
        raise TypeError("unicode not allowed, use send_string")
    try:
        view = memoryview(data)
    except TypeError:
        raise TypeError(
            f"a message part must be bytes or support the buffer protocol, "
            f"not {type(data).__name__}"
        ) from None
    if copy or view.nbytes < copy_threshold:  # copied: a buffer changed later changes nothing
        return view.tobytes()
    if track:
        return Frame._carrier(
            view if view.contiguous else view.tobytes(), tracker or MessageTracker()
        )
    return Frame(view if view.contiguous else view.tobytes(), copy=False)


def _tracked_parts(
    msg_parts: Sequence[Any], copy: bool, copy_threshold: int
) -> tuple[list[Any], MessageTracker]:
    """The parts of a tracked multipart send, and the one tracker for all of them."""
    shared = MessageTracker()
    parts = [_to_part(p, copy, True, copy_threshold, shared) for p in msg_parts]
    trackers = {id(t): t for p in parts if p.__class__ is Frame and (t := p.tracker)}
    if not trackers:
        return parts, _FINISHED_TRACKER
    if len(trackers) == 1:
        return parts, next(iter(trackers.values()))
    return parts, MessageTracker(*trackers.values())


def _frame_bytes(part: Frame) -> bytes:
    return part.bytes


def _as_frame(part: Any, more: bool) -> Frame:
    frame = Frame(part, copy=False)  # a new frame: the sender's carrier is released once dropped
    frame.more = more
    return frame


def _wired_frame(part: Any, more: bool, source: Pipe | None) -> Frame:
    """A frame from a socket with tcp/ipc peers: it carries its connection's properties."""
    frame = Frame(part, copy=False)
    frame.more = more
    if source is not None:
        frame._properties = source.metadata  # the connection's, shared by its messages
    return frame


def _known_option(option: int, optval: Any = 0) -> SocketOption:
    """The option ``option`` names, if brokerless has it; else EINVAL saying why (or, as
    pyzmq, TypeError for a non-int value of a number nobody knows)."""
    try:
        opt = SocketOption(option)
    except ValueError:
        if not isinstance(optval, int):
            raise TypeError(
                f"unknown socket option {option!r}: only int values go through unchecked"
            ) from None
        raise ZMQError(EINVAL, f"Invalid argument: unknown socket option {option!r}") from None
    if opt not in OPTIONS:
        if opt in COMPILED_OUT:
            raise ZMQError(EINVAL, f"Invalid argument: {opt.name} {COMPILED_OUT[opt]}")
        if opt in NOT_HONOURED:
            raise ZMQError(EINVAL, _not_honoured(opt))
        raise ZMQError(
            EINVAL, f"Invalid argument: option {opt.name} is not supported by brokerless"
        )
    return opt


def _not_honoured(opt: SocketOption) -> str:
    return f"Invalid argument: {opt.name}: brokerless does not support {NOT_HONOURED[opt]}"


def _name_endpoint(exc: ZMQError, addr: str) -> None:
    """Make sure a bind/connect error names the endpoint (pyzmq appends it too)."""
    if str(addr) not in exc.strerror:
        exc.strerror = f"{exc.strerror} (addr={addr!r})"


def _check_value(opt: SocketOption, kind: type, value: Any) -> Any:
    if kind is int:
        if not isinstance(value, int):
            raise TypeError(f"option {opt.name} takes an int, not {type(value).__name__}")
        if (opt in _NONNEGATIVE and value < 0) or (opt in _MIN_MINUS_ONE and value < -1):
            raise ZMQError(EINVAL, f"Invalid argument: {value} is out of range for {opt.name}")
        return int(value)
    if isinstance(value, str):
        if opt in STRING_OPTIONS:
            raise TypeError(f"unicode not allowed for {opt.name}, use setsockopt_string")
        raise TypeError(f"option {opt.name} takes bytes, not str")
    try:
        data = memoryview(value).tobytes()
    except TypeError:
        raise TypeError(f"option {opt.name} takes bytes, not {type(value).__name__}") from None
    if opt == _O.ROUTING_ID and (not data or len(data) > 255 or data[0] == 0):
        raise ZMQError(
            EINVAL,
            "Invalid argument: ROUTING_ID must be 1 to 255 bytes and must not start "
            "with a zero byte (those are reserved for generated ids)",
        )
    return data


#: ``zmq.Socket[bytes]``: the sockets of a sync Context.
SyncSocket = Socket[bytes]
