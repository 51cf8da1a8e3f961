"""The socket's port: what its transports hold instead of the socket itself.

It implements :class:`~brokerless.transport.port.SocketPort`.  It refers to the socket weakly,
so a listener or a lingering session never keeps a dropped socket alive (it is closed when
collected, as in pyzmq), and reads the socket's option dict, pattern and monitor directly, so
what the transports read costs no call into the socket.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..constants import SocketOption, SocketType
from ..mailbox import Command
from ..monitor import Monitor

if TYPE_CHECKING:
    from ..patterns.base import Pattern
    from ..pipe import Pipe
    from ..transport.port import ContextPort


class _Socket(Protocol):
    """What the port calls on its socket."""

    @property
    def closed(self) -> bool: ...

    def send_command(self, command: Command, arg: Any) -> None: ...

    def attach_pipe(self, pipe: Pipe) -> None: ...


class Port:
    """A socket as its transports see it (see the module docstring)."""

    __slots__ = (
        "__weakref__",
        "_pattern",
        "_socket",
        "context",
        "lock_step",
        "monitor",
        "options",
        "socket_type",
    )

    def __init__(
        self,
        socket: _Socket,
        context: ContextPort,
        pattern: Pattern,
        options: dict[SocketOption, Any],
    ) -> None:
        self._socket: weakref.ref[_Socket] = weakref.ref(socket)
        self._pattern = pattern
        self.context = context
        self.socket_type: SocketType = pattern.socket_type
        self.options: Mapping[SocketOption, Any] = options
        self.lock_step = pattern.lock_step
        #: The socket's monitor, when one is set (events come from I/O threads too).
        self.monitor: Monitor | None = None

    def __repr__(self) -> str:
        return f"<Port of {self._socket()!r}>"

    @property
    def closed(self) -> bool:
        socket = self._socket()
        return socket is None or socket.closed

    def greeting(self) -> list[Any]:
        return list(self._pattern.greeting())

    def emit(self, event: int, value: int, endpoint: str) -> None:
        monitor = self.monitor
        if monitor is not None:
            monitor.emit(event, value, endpoint)

    def post(self, command: Command, arg: Any) -> None:
        socket = self._socket()
        if socket is not None:
            socket.send_command(command, arg)
        elif command is Command.ATTACH:
            arg.terminate()  # nobody will take it: its session finishes

    def attach_pipe(self, pipe: Pipe) -> None:
        socket = self._socket()
        if socket is None:
            pipe.terminate()
        else:
            socket.attach_pipe(pipe)
