"""pyzmq's zero-copy garbage collector (``zmq.utils.garbage``), which brokerless does not need.

pyzmq hands libzmq pointers into Python objects for ``copy=False`` sends, and a thread keeps
each object alive until libzmq says it is done with it.  brokerless is Python through and
through: a queued message holds its buffer by an ordinary reference, released when the message
is.  ``gc`` is here for code that imports it; it never holds anything.
"""

from __future__ import annotations

from typing import Any


class GarbageCollector:
    """Keeps nothing: see the module doc.  ``refs`` stays empty; start/stop do nothing."""

    def __init__(self, context: Any = None) -> None:
        self.context = context
        self.refs: dict[Any, Any] = {}

    def is_alive(self) -> bool:
        return False

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


gc = GarbageCollector()

__all__ = ["GarbageCollector", "gc"]
