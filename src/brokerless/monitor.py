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
from typing import Protocol

from .constants import Event
from .error import ZMQError

_HEADER = struct.Struct("=HI")


class MonitorPair(Protocol):
    """The PAIR socket a monitor publishes on (the monitored socket made and bound it)."""

    def _post(self, msg: list[bytes]) -> None:
        """Send ``msg`` if there is room now, else drop it."""

    def close(self, linger: int | None = None) -> None: ...


class Monitor:
    """The sending side of a socket monitor."""

    def __init__(self, pair: MonitorPair, events: int) -> None:
        self.events = events
        self._lock = threading.Lock()
        self._pair: MonitorPair | None = pair

    def emit(self, event: int, value: int, endpoint: str) -> None:
        if not self.events & event:
            return
        msg = [_HEADER.pack(event, value & 0xFFFFFFFF), endpoint.encode()]
        with self._lock:
            pair = self._pair
            if pair is None:
                return
            try:
                pair._post(msg)  # no room, or no reader yet: dropped
            except ZMQError:
                pass  # the context is terminating

    def stop(self) -> None:
        self.emit(Event.MONITOR_STOPPED, 0, "")
        with self._lock:
            pair, self._pair = self._pair, None
        if pair is not None:
            pair.close()
