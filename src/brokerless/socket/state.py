"""The state every part of a socket shares: one slotted base for the socket's mixins.

:class:`~.socket.Socket` is assembled from mixins, each one job (options, endpoints,
monitoring, waiting, pyzmq's serialisation helpers); they all derive from :class:`SocketState`,
which declares the socket's slots once, so the mixins see typed attributes and an instance
stays a fixed set of slots.  :class:`SocketContext` is what a socket knows of its context.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..constants import SocketOption, SocketType

if TYPE_CHECKING:
    from ..error import ZMQError
    from ..mailbox import Command, Mailbox
    from ..patterns.base import Pattern
    from ..pipe import Lane, Pipe
    from ..transport.port import ContextPort, SocketPort, Transport
    from .port import Port

#: The class of socket a context makes.
_S_co = TypeVar("_S_co", covariant=True)


class SocketContext(Protocol[_S_co]):
    """What a socket knows of its context: the public surface pyzmq code reaches through
    ``socket.context``, and the services the socket itself uses.  The
    :class:`~brokerless.context.Context` implements it (typed this way, the socket needs no
    import of the context module: the context is above the socket)."""

    @property
    def closed(self) -> bool: ...

    @property
    def underlying(self) -> int: ...

    def socket(self, socket_type: int) -> _S_co: ...

    def term(self) -> None: ...

    def destroy(self, linger: int | None = None) -> None: ...

    # -- services for the socket itself ---------------------------------------------------------

    #: The process that made the context: a forked child's copy has no I/O thread of its own.
    _pid: int

    @property
    def _port(self) -> ContextPort: ...

    def _new_mailbox(self) -> Mailbox[Command]: ...

    def _transport(self, name: str) -> Transport: ...

    def _socket_closing(self, port: SocketPort) -> None: ...

    def _socket_closed(self, socket: Any) -> None: ...


class SocketState:
    """The socket's slots, declared once for every mixin (see the module docstring)."""

    __slots__ = (
        "__weakref__",
        "_bound",
        "_closed",
        "_commands",
        "_connected",
        "_fault",
        "_inlane",
        "_lent_poll",
        "_loan_kept",
        "_mailbox",
        "_monitor_socket",
        "_options",
        "_outlane",
        "_outpipe",
        "_pattern",
        "_pipes",
        "_port",
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

    context: SocketContext[Any]
    copy_threshold: int
    _type: SocketType
    _options: dict[SocketOption, Any]
    _pattern: Pattern
    _port: Port
    _mailbox: Mailbox[Command]
    #: The mailbox's queue, bound once: every call looks at it.
    _commands: Any
    _xsend: Callable[[Any], bool]
    _xrecv: Callable[[], Any]
    _pipes: set[Pipe]
    _bound: list[str]
    _connected: dict[str, list[Pipe]]
    #: Parts of a multipart message being sent / the rest of one being received.
    _tx_parts: list[Any] | None
    _rx_parts: list[Any] | None
    _rx_pos: int
    #: Set once closed or terminated: what every later call raises.
    _fault: Callable[[], ZMQError] | None
    _closed: bool
    #: The inbound lane of the socket's only pipe when its pattern passes messages through:
    #: ``recv`` takes a message from there itself (see :mod:`.messages`).  None otherwise, and
    #: once the socket is closed or its context terminated.
    _inlane: Lane | None
    #: Likewise for sending: the socket's only pipe (and the lane it writes) when its pattern
    #: sends messages through to it as they are; ``send`` queues there itself.
    _outpipe: Pipe | None
    _outlane: Lane | None
    _monitor_socket: Any  # the PAIR get_monitor_socket returned
    #: Whether a pipe may carry a connection's properties (tcp/ipc): only then do frames
    #: received with copy=False look them up (an inproc socket pays nothing for them).
    _wired: bool
    _shadow_obj: Any
    _shadowed: Any

    # Implemented by the socket and its mixins; declared here for the others to call.

    def _process_commands(self) -> None:
        raise NotImplementedError

    def _events(self) -> int:
        raise NotImplementedError

    def _give_back_input(self) -> bool:
        raise NotImplementedError

    def _pipes_changed(self) -> None:
        raise NotImplementedError

    def _emit(self, event: int, value: int, endpoint: str) -> None:
        raise NotImplementedError

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_alive(self) -> None:
        if self._fault is not None:
            raise self._fault()
