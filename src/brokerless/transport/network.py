"""tcp:// and ipc://: listeners, connectors, and the transport object sockets call.

The socket's thread does what can fail synchronously (parsing, ``bind``'s OS call, so EADDRINUSE
and LAST_ENDPOINT are immediate); everything after that runs in the context's I/O thread:
accepting, connecting and reconnecting, and the sessions and engines they create.

Accepting a burst: a peer whose SYN finds the listen queue full retries it a second later, so
the queue (BACKLOG, by default the OS maximum) absorbs the burst and each wake-up of the
listener accepts up to ``ACCEPT_BATCH`` connections -- enough to drain it quickly, few enough
that the other connections of the I/O thread get their turn in between.

Out of descriptors (EMFILE, ENFILE) or kernel memory: ``accept`` fails while the listen queue
stays readable, so the listener reports ACCEPT_FAILED (with the errno, as libzmq does) and
stops watching it for ``ACCEPT_RETRY_S`` rather than failing again at once, on and on, in the
I/O thread every connection shares.  The waiting peers stay in the queue meanwhile.  A
connection that cannot get a descriptor is tried again after RECONNECT_IVL, as a refused one.
"""

from __future__ import annotations

import errno
import os
import socket as pysocket
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..constants import Event, SocketOption, SocketType
from ..errno import ENOENT
from ..error import ZMQError
from . import address as _address
from .endpoint import Endpoint
from .engine import Engine
from .raw import RawEngine
from .session import Session, new_connection

if TYPE_CHECKING:
    from ..io import IOThread, Timer
    from ..pipe import Pipe
    from .port import ContextPort, SocketPort

_O = SocketOption
READ = 1
ACCEPT_BATCH = 64
ACCEPT_RETRY_S = 0.1
#: ``accept`` errors that last until something is freed: retried after ACCEPT_RETRY_S.
_OUT_OF_RESOURCES = frozenset((errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM))


def _tuned(sock: pysocket.socket, opts: Mapping[SocketOption, Any]) -> pysocket.socket:
    sock.setblocking(False)
    _address.tune(
        sock,
        keepalive=opts[_O.TCP_KEEPALIVE],
        idle=opts[_O.TCP_KEEPALIVE_IDLE],
        cnt=opts[_O.TCP_KEEPALIVE_CNT],
        intvl=opts[_O.TCP_KEEPALIVE_INTVL],
    )
    return sock


def _engine(io: IOThread, session: Session, sock: pysocket.socket) -> Engine:
    """The engine for a new connection: ZMTP, or raw bytes for a STREAM socket."""
    opts = session.socket.options
    sock = _tuned(sock, opts)
    if session.socket.socket_type == SocketType.STREAM:
        return RawEngine(io, session, sock, opts)
    return Engine(io, session, sock, new_connection(session), opts)


class Listener:
    """Accepts connections for one bound endpoint; each gets its own session."""

    def __init__(
        self, io: IOThread, socket: SocketPort, sock: pysocket.socket, uri: str, path: str | None
    ) -> None:
        self.io = io
        self.socket = socket
        self.sock = sock
        self.uri = uri
        self.path = path  # the ipc socket file, removed on close (if it is still ours)
        self._inode = os.stat(path).st_ino if path and not path.startswith("\0") else None
        self.sessions: set[Session] = set()
        self._retry: Timer | None = None  # while out of descriptors (see the module doc)

    def start(self, _: Any = None) -> None:
        self.io.register(self.sock, READ, self._accept)

    def _resume(self) -> None:
        self._retry = None
        self.start()

    def _accept(self, _: int) -> None:
        for _ in range(ACCEPT_BATCH):  # the rest (if any) on the next turn: still readable
            try:
                conn, _addr = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # the peer gone already (ECONNABORTED), or out of resources
                self.socket.emit(Event.ACCEPT_FAILED, exc.errno or 0, self.uri)
                if exc.errno in _OUT_OF_RESOURCES:
                    self._stop_accepting()
                    self._retry = self.io.call_later(ACCEPT_RETRY_S, self._resume)
                return
            self.socket.emit(Event.ACCEPTED, conn.fileno(), self.uri)
            session = Session(
                self.io, self.socket, self.uri, connecting=False, on_done=self.sessions.discard
            )
            self.sessions.add(session)
            session.attach_engine(_engine(self.io, session, conn))

    def stop_input(self, _: Any = None) -> None:
        """Accept no more connections; the ones accepted read nothing more (I/O thread).  The
        listening socket stays bound until ``close``."""
        self._stop_accepting()
        for session in list(self.sessions):
            session.stop_input()

    def close(self, _: Any = None) -> None:
        """Unbind: stop listening and drop the connections accepted here (I/O thread)."""
        self.stop_listening()
        for session in list(self.sessions):
            session.close()

    def socket_closed(self, _: Any = None) -> None:
        """The socket closed (I/O thread): stop listening; the connections accepted here
        deliver what it queued for them, within LINGER, as libzmq's do."""
        self.stop_listening()
        for session in list(self.sessions):
            _closed_socket_session(session)

    def _stop_accepting(self) -> None:
        self.io.unregister(self.sock)
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None

    def stop_listening(self) -> None:
        """Close the listening socket (I/O thread), as the monitor reports it."""
        self._stop_accepting()
        self.socket.emit(Event.CLOSED, self.sock.fileno(), self.uri)
        self.sock.close()
        if self._inode is not None and self.path is not None:
            try:  # a socket that bound the same path since then keeps its file
                if os.stat(self.path).st_ino == self._inode:
                    os.unlink(self.path)
            except OSError:
                pass


class Connector:
    """Makes (and remakes) the outgoing connection of one session."""

    def __init__(self, io: IOThread, session: Session, ep: Endpoint) -> None:
        self.io = io
        self.session = session
        self.ep = ep
        self.sock: pysocket.socket | None = None

    def start(self, _: Any = None) -> None:
        ipv6 = bool(self.session.socket.options[_O.IPV6])
        source = None
        try:
            if self.ep.transport == "ipc":
                addr = _address.parse_ipc(self.ep.address)
            else:
                src_text, target = _address.split_source(self.ep.address)
                addr = _address.parse_tcp(target, bind=False, ipv6=ipv6)[0]
                if src_text is not None:  # bound to first, of the target's family
                    sources = _address.parse_tcp(src_text, bind=True, ipv6=ipv6)
                    source = next((a for a in sources if a.family == addr.family), sources[0])
        except ZMQError:
            self.session.connect_failed()  # e.g. a name that does not resolve yet
            return
        try:
            sock = pysocket.socket(addr.family, pysocket.SOCK_STREAM)
        except OSError:  # out of descriptors (EMFILE, ENFILE) or memory: retried, as libzmq
            self.session.connect_failed()
            return
        sock.setblocking(False)
        if source is not None:
            try:
                sock.bind(source.sockaddr)
            except OSError:
                self._failed(sock)
                return
        err = sock.connect_ex(addr.sockaddr)
        if err not in (0, errno.EINPROGRESS, errno.EAGAIN):
            self._failed(sock)
            return
        if err:
            self.session.socket.emit(Event.CONNECT_DELAYED, err, self.session.endpoint)
        self.sock = sock
        self.io.register(sock, 2, self._connected)

    def _connected(self, _: int) -> None:
        sock = self.sock
        if sock is None:  # closed meanwhile (its registration went with it)
            return
        self.io.unregister(sock)
        self.sock = None
        err = sock.getsockopt(pysocket.SOL_SOCKET, pysocket.SO_ERROR)
        if err:
            self._failed(sock)
            return
        session = self.session
        session.socket.emit(Event.CONNECTED, sock.fileno(), session.endpoint)
        session.attach_engine(_engine(self.io, session, sock))

    @property
    def in_progress(self) -> bool:
        """Whether an attempt is under way (its outcome not known yet)."""
        return self.sock is not None

    def _failed(self, sock: pysocket.socket) -> None:
        """The attempt with ``sock`` failed: closed, as libzmq's monitor reports it."""
        self.session.socket.emit(Event.CLOSED, sock.fileno(), self.session.endpoint)
        sock.close()
        self.session.connect_failed()

    def close(self) -> None:
        if self.sock is not None:
            self.io.unregister(self.sock)
            self.sock.close()
            self.sock = None


class NetworkTransport:
    """tcp or ipc for one context: what ``Socket.bind``/``connect``/... call."""

    def __init__(self, context: ContextPort, name: str) -> None:
        self.context = context
        self.name = name
        self._listeners: dict[tuple[int, str], Listener] = {}
        self._sessions: dict[tuple[int, str], list[Session]] = {}

    def bind(self, socket: SocketPort, ep: Endpoint) -> str:
        opts = socket.options
        if ep.transport == "ipc":
            addr = _address.parse_ipc(ep.address)
        else:
            addr = _address.parse_tcp(ep.address, bind=True, ipv6=bool(opts[_O.IPV6]))[0]
        sock = _address.listen(addr, opts[_O.BACKLOG])
        uri = addr.uri(sock.getsockname())
        io = self.context._io_thread()
        path = addr.sockaddr if isinstance(addr.sockaddr, str) else None  # ipc's file
        listener = Listener(io, socket, sock, uri, path)
        self._listeners[(id(socket), uri)] = listener
        socket.emit(Event.LISTENING, sock.fileno(), uri)
        io.call_soon(listener.start)
        return uri

    def unbind(self, socket: SocketPort, ep: Endpoint) -> None:
        listener = self._listeners.pop((id(socket), ep.uri), None)
        if listener is None:
            raise ZMQError(ENOENT, f"No such file or directory: {ep.uri} is not bound")
        listener.io.call_and_wait(listener.close)  # the endpoint is free when unbind returns

    def connect(self, socket: SocketPort, ep: Endpoint) -> list[Pipe]:
        if ep.transport == "tcp":  # (resolved by each attempt)
            source, target = _address.split_source(ep.address)
            _address.split_tcp(target, bind=False)
            if source is not None:
                _address.split_tcp(source, bind=True)
        else:
            _address.check_ipc_path(ep.address)
        io = self.context._io_thread()
        session = Session(io, socket, ep.uri, connecting=True)
        session.connector = Connector(io, session, ep)
        self._sessions.setdefault((id(socket), ep.uri), []).append(session)
        pipes = []
        if not session.immediate and socket.socket_type != SocketType.ROUTER:
            pipe = session.make_pipe()
            socket.attach_pipe(pipe)
            pipes.append(pipe)
        io.call_soon(session.connector.start)
        return pipes

    def stop_input(self, socket: SocketPort) -> None:
        """``socket`` takes nothing more from the network; returns once every listener and
        session of it has handed what it decoded to the socket's pipes."""
        sid = id(socket)
        for (owner, _uri), listener in list(self._listeners.items()):
            if owner == sid:
                listener.io.call_and_wait(listener.stop_input)
        for (owner, _uri), sessions in list(self._sessions.items()):
            if owner == sid:
                for session in sessions:
                    session.io.call_and_wait(session.stop_input)

    def disconnect(self, socket: SocketPort, ep: Endpoint) -> None:
        for session in self._sessions.pop((id(socket), ep.uri), []):
            session.io.call_soon(session.close)

    def socket_closed(self, socket: SocketPort) -> None:
        """The socket is closed: stop listening; sessions flush what they have, then end."""
        sid = id(socket)
        for key in [k for k in self._listeners if k[0] == sid]:
            listener = self._listeners.pop(key)
            listener.io.call_and_wait(listener.socket_closed)
        for key in [k for k in self._sessions if k[0] == sid]:
            for session in self._sessions.pop(key):
                session.io.call_soon(_closed_socket_session, session)


def _closed_socket_session(session: Session) -> None:
    """A session whose socket closed: with no pipe (still connecting, or accepted and still in
    its handshake) there is nothing to flush -- unless the pipe is gone because its engine
    already read all of it (``closing``): that session ends once the engine has written it, or
    LINGER runs out.  One with a pipe ends when the socket's PIPE_TERM has come through it."""
    if session.pipe is None and not session.closing:
        session.close()
