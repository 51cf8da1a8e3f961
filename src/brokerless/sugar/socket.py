"""``zmq.sugar.socket``: where pyzmq code finds the Socket (it is :mod:`brokerless.socket`'s)."""

from ..socket import Socket, SyncSocket

__all__ = ["Socket", "SyncSocket"]
