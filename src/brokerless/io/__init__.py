"""I/O threads: the reactor that runs listeners, connectors, sessions and engines."""

from .thread import IOThread, Timer

__all__ = ["IOThread", "Timer"]
