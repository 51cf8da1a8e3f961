"""Socket monitors: the events of ``zmq_socket_monitor`` on an inproc PAIR socket.

Each event is a two-part message, as libzmq sends it: 6 octets (event number as a native uint16,
value as a native uint32), then the endpoint.  Events come from the socket's own thread (bind,
close) and from I/O threads (accepted, connected, handshake results, disconnected), so the
internal PAIR socket is only touched under a lock.  An event for which there is no room (nobody
reading) is dropped, as in libzmq.
"""

from __future__ import annotations

import struct
import threading
from typing import TYPE_CHECKING

from .constants import Event, SocketType
from .error import ZMQError

if TYPE_CHECKING:
    from .socket import Socket

_HEADER = struct.Struct("=HI")


class Monitor:
    """The sending side of a socket monitor."""

    def __init__(self, owner: Socket, addr: str, events: int) -> None:
        self.events = events
        self._lock = threading.Lock()
        self._pair = owner.context.socket(SocketType.PAIR)
        self._pair.setsockopt(17, 0)  # LINGER 0: nothing to keep once stopped
        self._pair.bind(addr)

    def emit(self, event: int, value: int, endpoint: str) -> None:
        if not self.events & event:
            return
        msg = [_HEADER.pack(event, value & 0xFFFFFFFF), endpoint.encode()]
        with self._lock:
            pair = self._pair
            if pair is None:
                return
            try:
                if pair._commands:
                    pair._process_commands()
                pair._xsend(msg)  # no room, or no reader yet: dropped
            except ZMQError:
                pass  # the context is terminating

    def stop(self) -> None:
        self.emit(Event.MONITOR_STOPPED, 0, "")
        with self._lock:
            pair, self._pair = self._pair, None
        if pair is not None:
            pair.close()
