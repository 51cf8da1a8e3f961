"""Sockets: pyzmq's ``Socket`` (see :mod:`.socket` for how the class is put together)."""

from .endpoints import EndpointContext
from .socket import ATTACH, STOP, Socket, SyncSocket

__all__ = ["ATTACH", "STOP", "EndpointContext", "Socket", "SyncSocket"]
