"""What a transport sees of the socket it serves, and of the context both live in.

Theory of operation
-------------------
Transports (the inproc registry; tcp/ipc listeners, connectors, sessions and engines) never
touch a socket's own state.  A socket gives them a :class:`SocketPort` -- its options, type and
greeting, whether it is lock-step, a way to report monitor events and to post commands to its
thread -- and its context a :class:`ContextPort` (I/O threads, the session count ``term()``
waits for, the inproc registry).  As libzmq gives a session the socket's options and a
mailbox, and nothing else.  So the sockets import the transports and never the reverse, and
what crosses between the two is this file.

Threads: ``options``, ``socket_type``, ``lock_step`` and ``greeting()`` may be read from any
thread (options change only in the socket's thread, and a transport reads them when it makes
a connection); ``post`` and ``emit`` are for any thread; ``attach_pipe`` only for the socket's
own thread (``connect`` makes a pipe and attaches it at once).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..constants import SocketOption, SocketType
from ..mailbox import Command

if TYPE_CHECKING:
    from ..io import IOThread
    from ..pipe import Pipe, PipeOwner
    from .endpoint import Endpoint


class InprocNames(Protocol):
    """The inproc names of a context, as an internal peer (a ZAP client) reaches them."""

    def open_internal(self, name: str, owner: PipeOwner) -> Pipe | None:
        """A pipe from ``owner`` to the socket bound at ``inproc://name`` (None: unbound)."""


class SessionPort(Protocol):
    """A network session as its context sees it."""

    def exiting(self) -> None:
        """The interpreter is exiting: give up waiting for a peer that is not connected."""

    def forked(self) -> None:
        """This is a forked child's copy: the connection is the parent's, not to be written."""


class ContextPort(Protocol):
    """The context's services for transports (the Context implements them)."""

    #: The interpreter is exiting: nothing is reconnected, nothing waits for an absent peer.
    _exiting: bool

    @property
    def _inproc(self) -> InprocNames:
        """The inproc names bound in the context (a ZAP client opens its pipe there)."""

    def _io_thread(self) -> IOThread:
        """An I/O thread for a new listener or connection."""

    def _session_started(self, session: SessionPort) -> None:
        """A network session began: ``term()`` waits until it has finished."""

    def _session_finished(self, session: SessionPort) -> None:
        """A network session ended (its connection closed, its pipe flushed)."""


class SocketPort(Protocol):
    """A socket as its transports see it (see the module docstring)."""

    #: The socket's type.
    socket_type: SocketType
    #: Its options (read-only here: only the socket's thread changes them).
    options: Mapping[SocketOption, Any]
    #: Whether each send waits for a reply (REQ, REP): its sends are written at once.
    lock_step: bool

    @property
    def context(self) -> ContextPort:
        """The context the socket belongs to."""

    @property
    def closed(self) -> bool:
        """The socket was closed (or collected): a pipe handed to it now must be ended."""

    def greeting(self) -> list[Any]:
        """What a new pipe from the socket carries first (subscriptions, probe, welcome)."""

    def emit(self, event: int, value: int, endpoint: str) -> None:
        """Report a monitor event (any thread)."""

    def post(self, command: Command, arg: Any) -> None:
        """Queue a command for the socket's thread (any thread)."""

    def attach_pipe(self, pipe: Pipe) -> None:
        """Take a new pipe now (the socket's own thread only)."""


class Transport(Protocol):
    """What a socket calls on the transport of an endpoint (inproc, tcp, ipc)."""

    def bind(self, socket: SocketPort, ep: Endpoint) -> str:
        """Bind ``ep``; returns the endpoint as bound (a tcp port 0 resolved)."""

    def connect(self, socket: SocketPort, ep: Endpoint) -> list[Pipe]:
        """Connect to ``ep``; returns the pipes attached to the socket already."""

    def unbind(self, socket: SocketPort, ep: Endpoint) -> None: ...

    def disconnect(self, socket: SocketPort, ep: Endpoint) -> None: ...

    def stop_input(self, socket: SocketPort) -> None:
        """Take nothing more in for the socket (``Socket.stop_receiving``)."""

    def socket_closed(self, socket: SocketPort) -> None:
        """The socket is closing: release what it bound, flush what it sent."""
