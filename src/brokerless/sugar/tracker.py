"""``zmq.sugar.tracker``: where pyzmq code finds MessageTracker (:mod:`brokerless.frame`'s)."""

from ..frame import _FINISHED_TRACKER, MessageTracker

__all__ = ["_FINISHED_TRACKER", "MessageTracker"]
