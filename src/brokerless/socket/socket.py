"""The Socket: pyzmq's API over a pattern, its pipes and its mailbox.

Theory of operation
-------------------
A socket is used by one thread at a time (as in libzmq); other threads reach it only through
its mailbox (pipe activations, new pipes, context termination), and its transports only through
its port (:mod:`.port`).  Every call first runs any queued commands, then asks the pattern to
move one whole message (:mod:`.messages`); only when the pattern cannot does the call wait
(:mod:`.waiting`).

The class is assembled from mixins with one job each, over one slotted state
(:mod:`.state`): sending and receiving, waiting, endpoints, options (:mod:`.options`; every
option is also a typed attribute, ``sock.linger``, from ``option_attrs_generated.py``), and
pyzmq's serialisation helpers.  This module holds what ties them together: construction,
identity and shadows, the commands other threads send, the pipes, monitoring and closing.  A
shadow (``Socket.shadow``, ``Socket(other)``, ``copy.copy``) is another object for the same
socket: see :mod:`brokerless.shadow`.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from ..constants import OPTIONS, Event, SocketOption, SocketType
from ..errno import EINVAL, ENOTSOCK, ETERM
from ..error import ZMQError, error
from ..frame import COPY_THRESHOLD
from ..mailbox import Command
from ..monitor import Monitor
from ..option_attrs_generated import SocketOptionAttrs
from ..patterns import PATTERNS
from ..pipe import Pipe
from ..shadow import address as shadow_address
from ..shadow import face_class
from ..shadow import resolve as shadow_resolve
from .endpoints import EndpointsMixin
from .messages import MessagesMixin
from .options import OptionsMixin
from .port import Port
from .serialization import SerializationMixin
from .state import SocketContext

if TYPE_CHECKING:
    from typing_extensions import Self  # typing's from Python 3.11

_O = SocketOption


def _closed_error() -> ZMQError:
    return ZMQError(ENOTSOCK, "Socket operation on non-socket: the socket is closed")


def _term_error() -> ZMQError:
    return error(ETERM, "Context was terminated: close this socket")


#: What ``recv``/``recv_multipart`` give: ``bytes`` (sync sockets), or awaitables of them.
_R = TypeVar("_R", covariant=True)


class Socket(
    MessagesMixin,
    EndpointsMixin,
    OptionsMixin,
    SerializationMixin,
    SocketOptionAttrs,
    Generic[_R],
):
    """A brokerless socket; create it with ``Context.socket(type)``.

    ``Socket(ctx, type)`` makes one too, ``Socket(other)`` or ``Socket(shadow=other)`` a shadow
    of ``other`` (a socket or its ``underlying``).  ``copy_threshold``: a ``copy=False`` send of
    fewer bytes is copied anyway (and its tracker is done at once), as in pyzmq.
    """

    __slots__ = ()

    context: SocketContext[Socket[Any]]

    _repr_cls = "zmq.Socket"

    @overload
    def __init__(
        self: Socket[bytes],
        ctx_or_socket: SocketContext[Any],
        socket_type: int,
        *,
        copy_threshold: int | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: Socket[bytes], *, shadow: Socket[Any] | int, copy_threshold: int | None = None
    ) -> None: ...
    @overload
    def __init__(self: Socket[bytes], ctx_or_socket: Socket[Any]) -> None: ...
    def __init__(
        self: Socket[bytes],
        ctx_or_socket: SocketContext[Any] | Socket[Any] | None = None,
        socket_type: int = 0,
        *,
        shadow: Socket[Any] | int = 0,
        copy_threshold: int | None = None,
    ) -> None:
        if isinstance(ctx_or_socket, Socket):
            shadow, ctx_or_socket = ctx_or_socket, None
        if shadow:
            self._shadow_obj = shadow
            self._shadowed = shadow_resolve(shadow, Socket)
            self.__class__ = face_class(type(self))  # from here on, it forwards
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
        self._options = {opt: s.default for opt, s in OPTIONS.items()}
        self._options[_O.TYPE] = int(self._type)
        self._pattern = pattern_class(self._options)
        self._port = Port(self, ctx_or_socket._port, self._pattern, self._options)
        self._mailbox = ctx_or_socket._new_mailbox()
        # Bound once: the hot paths look these up on every message.
        self._commands = self._mailbox.commands
        self._xsend = self._pattern.xsend
        self._xrecv = self._pattern.xrecv
        self._options[_O.FD] = self._mailbox.fileno()
        self._pipes = set()
        self._bound = []
        self._connected = {}
        self._tx_parts = None
        self._rx_parts = None
        self._rx_pos = 0
        self._fault = None
        self._inlane = None
        self._outpipe = self._outlane = None
        self._closed = False
        self._monitor_socket = None
        self._lent_poll = None
        self._loan_kept = False
        self._wired = False

    # -- identity ------------------------------------------------------------------------------

    @property
    def socket_type(self) -> SocketType:
        return self._type

    @property
    def underlying(self) -> int:
        """The number ``Socket.shadow`` takes for this socket (see :mod:`brokerless.shadow`)."""
        return shadow_address(self)

    @property
    def _shadow(self) -> bool:
        """Whether this object is a shadow of another socket."""
        return self._shadow_obj is not None

    @classmethod
    def shadow(cls, address: Socket[Any] | int) -> Self:
        """Another object for an existing socket: ``address`` is the socket or its
        ``underlying``.  Closing either closes the socket; dropping the shadow does not."""
        return cls(shadow=shadow_resolve(address, Socket))

    def __copy__(self, memo: Any = None) -> Self:
        """A copy is a shadow: the same socket (pyzmq's rule)."""
        return type(self).shadow(self.underlying)

    __deepcopy__ = __copy__

    def fileno(self) -> int:
        """The mailbox file descriptor (readable when the socket may have news)."""
        self._check_alive()
        return self._mailbox.fileno()

    @property
    def type(self) -> int:
        """The socket type (readable after ``close`` too, as pyzmq's; read-only: EINVAL)."""
        return self._type

    @type.setter
    def type(self, value: int) -> None:
        self.setsockopt(_O.TYPE, value)

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
            warnings.warn(f"Unclosed socket {self!r}", ResourceWarning, stacklevel=2, source=self)
        try:
            self.close()
        except Exception:
            pass

    # -- commands from other threads ------------------------------------------------------------

    def send_command(self, command: Command, arg: Any) -> None:
        """Deliver a command to this socket (any thread); see :mod:`brokerless.mailbox`."""
        self._mailbox.send(command, arg)
        if self._closed:  # nobody will read it: see _drop_commands
            self._drop_commands()

    def poke(self) -> None:
        """Wake this socket's thread without a command (any thread): a message went into the
        pipe it waits on, which it took in before it slept (``Lane.reader_waiting``)."""
        self._mailbox.poke()

    def _process_commands(self) -> None:
        self._mailbox.process(self._dispatch)
        if self._fault is not None:
            raise self._fault()

    def _dispatch(self, command: Command, arg: Any) -> None:
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
            self._inlane = self._outpipe = self._outlane = None

    # -- pipes ----------------------------------------------------------------------------------

    def attach_pipe(self, pipe: Pipe) -> None:
        """Take a new pipe (owner thread only)."""
        if self._closed:
            pipe.terminate()
            return
        pipe.owner = self  # first: a peer closing from now on tells us (see Pipe.terminate)
        self._pipes.add(pipe)
        if pipe.source is not None:
            self._wired = True
        result = self._pattern.attach(pipe)
        if result is False:
            self._pipes.discard(pipe)
            pipe.terminate()
            return
        self._pipes_changed()
        if pipe.peer_gone():  # the peer closed before we attached: as if told
            self._on_pipe_term(pipe)

    def pipe_terminated(self, pipe: Pipe) -> None:
        """A pipe has ended (called by the pipe or on PIPE_TERM)."""
        if pipe in self._pipes:
            self._pipes.discard(pipe)
            self._pattern.terminated(pipe)
            self._pipes_changed()
            for pipes in self._connected.values():
                if pipe in pipes:
                    pipes.remove(pipe)

    def _pipes_changed(self) -> None:
        """Whether ``recv`` may take messages from the only pipe itself, and ``send`` queue
        them there (see ``_inlane``, ``_outlane``), or in every pipe (the pattern's
        ``broadcast``)."""
        self._inlane = self._outpipe = self._outlane = None
        self._pattern.refresh()
        if len(self._pipes) == 1 and self._fault is None:
            (pipe,) = self._pipes
            pattern = self._pattern
            if pattern.recv_passes_through():
                self._inlane = pipe.inbound
            if pattern.sends_through and not pipe.outbound.conflate:
                self._outpipe, self._outlane = pipe, pipe.outbound

    # -- monitoring -----------------------------------------------------------------------------

    def monitor(self, addr: str | None, events: int = int(Event.ALL)) -> None:
        """Publish this socket's events on a PAIR bound at ``addr`` (inproc); None stops."""
        self._check_alive()
        port = self._port
        old, port.monitor = port.monitor, None
        if old is not None:
            old.stop()
        if addr is not None and events:
            pair = self.context.socket(SocketType.PAIR)
            pair.setsockopt(_O.LINGER, 0)  # nothing to keep once stopped
            pair.bind(addr)
            port.monitor = Monitor(pair, events)

    def get_monitor_socket(
        self, events: int = int(Event.ALL), addr: str | None = None
    ) -> Socket[Any]:
        """A PAIR socket that receives this socket's monitor events (the same one until it is
        closed or the monitor disabled, as in pyzmq)."""
        sock: Socket[Any] | None = self._monitor_socket
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
        self._port.emit(event, value, endpoint)

    def _post(self, msg: list[bytes]) -> None:
        """Send ``msg`` if there is room now, else drop it (a monitor's PAIR: see Monitor)."""
        if self._commands:
            self._process_commands()
        self._xsend(msg)

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self, linger: int | None = None) -> None:
        """Close the socket; queued messages already handed to inproc peers stay theirs."""
        if linger is not None and not isinstance(linger, int):
            raise TypeError(f"linger takes an int (ms), not {type(linger).__name__}")
        if self._closed:
            return
        if linger is not None:
            self._options[_O.LINGER] = linger
        self._closed = True
        self._fault = _closed_error
        if self.context._pid != os.getpid():  # a forked child's copy: the I/O thread that
            return  # served it is the parent's -- left alone, as pyzmq leaves it
        self.context._socket_closing(self._port)  # (listeners report CLOSED as they close)
        monitor, self._port.monitor = self._port.monitor, None
        if monitor is not None:
            monitor.stop()
        self._bound.clear()
        self._connected.clear()
        for pipe in list(self._pipes):
            pipe.terminate()
            pipe.drop_inbound()
        self._pipes.clear()
        self._inlane = self._outpipe = self._outlane = None
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
            if command is ATTACH:
                arg.terminate()


# Commands the context and transports send to sockets.
ATTACH = Command.ATTACH
STOP = Command.STOP

# Command dispatch (a class-level table: bound methods would make every socket a cycle).
_HANDLERS: dict[Command, Callable[[Socket[Any], Any], None]] = {
    Command.WAKE: Socket._on_wake,
    Command.ACTIVATE_READ: Socket._on_activate_read,
    Command.ACTIVATE_WRITE: Socket._on_activate_write,
    Command.PIPE_TERM: Socket._on_pipe_term,
    Command.HICCUP: Socket._on_hiccup,
    Command.ATTACH: Socket.attach_pipe,
    Command.STOP: Socket._on_stop,
}

#: ``zmq.Socket[bytes]``: the sockets of a sync Context.
SyncSocket = Socket[bytes]
