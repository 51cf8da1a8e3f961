"""Endpoints: ``bind``, ``connect`` and their undoing, through the context's transports.

What can fail at once does (a bad address, EADDRINUSE, a missing transport), naming the
endpoint as pyzmq does; the rest happens in the transport (and, for tcp/ipc, in an I/O
thread).  The transports see the socket only through its port (:mod:`.port`).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from ..constants import SocketOption
from ..errno import EACCES, EADDRINUSE, ENOENT
from ..error import ZMQBindError, ZMQError
from ..transport import endpoint as _endpoint
from .state import SocketState

if TYPE_CHECKING:
    from typing_extensions import Self  # typing's from Python 3.11

_O = SocketOption


class EndpointsMixin(SocketState):
    """``bind``/``connect``/``unbind``/``disconnect`` (see the module docstring)."""

    __slots__ = ()

    def bind(self, addr: str) -> EndpointContext[Self]:
        """Accept connections on ``addr``; ``with sock.bind(addr):`` unbinds on exit."""
        self._check_alive()
        try:
            ep = _endpoint.parse(addr)
            uri = self.context._transport(ep.transport).bind(self._port, ep)
        except ZMQError as exc:
            _name_endpoint(exc, addr)
            raise
        self._bound.append(uri)
        self._options[_O.LAST_ENDPOINT] = uri.encode()
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

    def connect(self, addr: str) -> EndpointContext[Self]:
        """Connect to ``addr`` (the peer need not exist yet); ``with`` disconnects on exit."""
        self._check_alive()
        try:
            ep = _endpoint.parse(addr)
            self._pattern.check_connect()
            pipes = self.context._transport(ep.transport).connect(self._port, ep)
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
        self.context._transport(ep.transport).unbind(self._port, ep)
        self._bound.remove(ep.uri)

    def disconnect(self, addr: str) -> None:
        self._check_alive()
        ep = _endpoint.parse(addr)
        pipes = self._connected.pop(ep.uri, None)
        if pipes is None:
            raise ZMQError(ENOENT, f"No such file or directory: not connected to {addr}")
        self.context._transport(ep.transport).disconnect(self._port, ep)
        for pipe in pipes:
            self._pipes.discard(pipe)
            self._pattern.terminated(pipe)
            pipe.terminate()
        self._pipes_changed()

    def stop_receiving(self) -> None:
        """Take nothing more from the network (brokerless only: libzmq has no such call).

        Every tcp/ipc connection of the socket stops reading, listeners stop accepting and
        connections are not remade; what had already come in whole -- in the pipes, and
        decoded but waiting for room below RCVHWM -- is queued for ``recv``, so reading until
        EAGAIN afterwards takes every message the socket received, and nothing arrives after.
        Sending goes on over the connections there are.  inproc peers are not affected."""
        self._check_alive()
        self._give_back_input()  # what came in on a connection this thread kept is read first
        names = {_endpoint.parse(uri).transport for uri in [*self._bound, *self._connected]}
        for name in sorted(names):
            self.context._transport(name).stop_input(self._port)


class _Closable(Protocol):
    @property
    def closed(self) -> bool: ...


_S = TypeVar("_S", bound=_Closable)


class EndpointContext(Generic[_S]):
    """What ``bind``/``connect`` return: ``with sock.connect(url):`` undoes it on exit."""

    __slots__ = ("_socket", "_undo", "addr")

    def __init__(self, socket: _S, undo: Callable[[str], None], addr: str) -> None:
        self._socket = socket
        self._undo = undo
        self.addr = addr

    @property
    def kind(self) -> str:
        """What leaving the ``with`` block undoes: "bind" or "connect"."""
        return _UNDONE.get(self._undo.__name__, self._undo.__name__)

    def __repr__(self) -> str:
        return f"<SocketContext({self.kind}={self.addr!r})>"

    def __enter__(self) -> _S:
        return self._socket

    def __exit__(self, *exc: object) -> None:
        if not self._socket.closed:
            self._undo(self.addr)


_UNDONE = {"unbind": "bind", "disconnect": "connect"}


def _name_endpoint(exc: ZMQError, addr: str) -> None:
    """Make sure a bind/connect error names the endpoint (pyzmq appends it too)."""
    if str(addr) not in exc.strerror:
        exc.strerror = f"{exc.strerror} (addr={addr!r})"
