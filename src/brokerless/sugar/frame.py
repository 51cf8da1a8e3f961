"""``zmq.sugar.frame``: where pyzmq code finds Frame (it is :mod:`brokerless.frame`'s)."""

from ..frame import Frame, Message

__all__ = ["Frame", "Message"]
