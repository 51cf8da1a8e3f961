"""``zmq.sugar.context``: where pyzmq code finds the Context (it is :mod:`brokerless.context`'s)."""

from ..context import Context, SyncContext

__all__ = ["Context", "SyncContext"]
