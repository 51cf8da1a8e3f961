"""inproc://: sockets of one context joined by a pipe pair, bind and connect in either order.

The registry maps each bound name to its socket.  Connecting to a bound name makes the pipe pair
at once: the connecting socket attaches its end itself and sends ATTACH with the other end to
the binder's mailbox (the binder's thread attaches it).  Connecting to a name nobody has bound
yet makes the pair too and parks the binder's end here; ``bind`` attaches the parked ends, so
messages sent meanwhile (within SNDHWM) arrive.  With IMMEDIATE the connecting socket's end is
attached only once the binder exists, so it queues nothing before.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..constants import SocketOption, SocketType
from ..errno import EADDRINUSE, ECONNREFUSED
from ..error import ZMQError
from ..mailbox import Command
from ..pipe import Pipe, pipepair
from .endpoint import Endpoint

if TYPE_CHECKING:
    from ..pipe import PipeOwner
    from .port import SocketPort

_O = SocketOption


@dataclass(slots=True)
class _Pending:
    """A connection waiting for its binder.  ``deferred``: the connecter attaches its end only
    once bound (IMMEDIATE, or a ROUTER, which must learn the binder's routing id first)."""

    connecter: weakref.ref[SocketPort]
    connecter_end: Pipe
    binder_end: Pipe
    deferred: bool


class InprocTransport:
    """One per context: the names bound in it and connections waiting for a binder."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # re-entrant: a finalizer may close a socket under it
        self._bound: weakref.WeakValueDictionary[str, SocketPort] = weakref.WeakValueDictionary()
        self._pending: dict[str, list[_Pending]] = {}

    def bind(self, sock: SocketPort, ep: Endpoint) -> str:
        with self._lock:
            if ep.address in self._bound:
                raise ZMQError(EADDRINUSE, f"Address already in use: {ep.uri} is bound already")
            self._bound[ep.address] = sock
            pending = self._pending.pop(ep.address, [])
        opts = sock.options
        for p in pending:
            p.connecter_end.peer_routing_id = opts[_O.ROUTING_ID]
            p.binder_end.set_writer_hwm(opts[_O.SNDHWM])  # the binder's limits are known now
            p.binder_end.set_reader_hwm(opts[_O.RCVHWM])
            p.binder_end.endpoint = ep.uri
            sock.attach_pipe(p.binder_end)
            if p.deferred:
                connecter = p.connecter()
                if connecter is not None and not connecter.closed:
                    connecter.post(Command.ATTACH, p.connecter_end)
                else:
                    p.connecter_end.terminate()
        return ep.uri

    def unbind(self, sock: SocketPort, ep: Endpoint) -> None:
        with self._lock:
            if self._bound.get(ep.address) is sock:
                del self._bound[ep.address]

    def connect(self, sock: SocketPort, ep: Endpoint) -> list[Pipe]:
        opts = sock.options
        conflate = bool(opts[_O.CONFLATE])
        deferred = bool(opts[_O.IMMEDIATE]) or sock.socket_type == SocketType.ROUTER
        with self._lock:
            binder = self._bound.get(ep.address)
            if binder is sock:
                raise ZMQError(
                    ECONNREFUSED, f"Connection refused: {ep.uri} is bound by this socket"
                )
            if binder is None:
                mine, theirs = pipepair((opts[_O.SNDHWM], opts[_O.RCVHWM]), (None, None), conflate)
                self._pending.setdefault(ep.address, []).append(
                    _Pending(weakref.ref(sock), mine, theirs, deferred)
                )
            else:
                b_opts = binder.options
                mine, theirs = pipepair(
                    (opts[_O.SNDHWM], opts[_O.RCVHWM]),
                    (b_opts[_O.SNDHWM], b_opts[_O.RCVHWM]),
                    conflate or bool(b_opts[_O.CONFLATE]),
                )
                mine.peer_routing_id = b_opts[_O.ROUTING_ID]
                # Write the binder's greeting now: it would otherwise wait for the binder's
                # thread to attach the pipe (libzmq loses a binding SUB's subscriptions so).
                greeting = binder.greeting()
                for msg in greeting:
                    theirs.force_write(msg)
                theirs.greeted = tuple(greeting)
        mine.endpoint = theirs.endpoint = ep.uri
        mine.routing_id = opts[_O.CONNECT_ROUTING_ID]
        theirs.peer_routing_id = opts[_O.ROUTING_ID]
        if binder is not None or not deferred:
            sock.attach_pipe(mine)
        if binder is not None:
            with self._lock:  # close() unregisters under this lock: no ATTACH after that
                if self._bound.get(ep.address) is binder:
                    binder.post(Command.ATTACH, theirs)
                else:
                    mine.terminate()
        return [mine]

    def stop_input(self, sock: SocketPort) -> None:
        """Nothing to stop: inproc peers write straight into the socket's pipes."""

    def open_internal(self, name: str, owner: PipeOwner) -> Pipe | None:
        """A pipe from ``owner`` -- an internal peer, not a socket (a connection's ZAP client)
        -- to the socket bound at ``inproc://name``; None when nothing is bound there.  No
        HWM on either side (as libzmq's ZAP pipes), and no greeting from the binder."""
        with self._lock:
            binder = self._bound.get(name)
            if binder is None:
                return None
            mine, theirs = pipepair((0, 0), (0, 0))
            mine.owner = owner
            mine.endpoint = theirs.endpoint = f"inproc://{name}"
            theirs.greeted = ()
            binder.post(Command.ATTACH, theirs)
        return mine

    def socket_closed(self, sock: SocketPort) -> None:
        """Free the names ``sock`` bound.  Its connections still waiting for a binder stay
        registered: what was sent on them is delivered when the peer binds (as in libzmq)."""
        with self._lock:
            for name in [n for n, s in self._bound.items() if s is sock]:
                del self._bound[name]
            for name, waiting in list(self._pending.items()):  # IMMEDIATE: nothing was queued
                waiting[:] = [p for p in waiting if not (p.connecter() is sock and p.deferred)]
                if not waiting:
                    del self._pending[name]

    def disconnect(self, sock: SocketPort, ep: Endpoint) -> None:
        with self._lock:
            waiting = self._pending.get(ep.address)
            if waiting:
                waiting[:] = [p for p in waiting if p.connecter() is not sock]
                if not waiting:
                    del self._pending[ep.address]
