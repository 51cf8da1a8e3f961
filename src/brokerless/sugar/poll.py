"""``zmq.sugar.poll``: where pyzmq code finds Poller and select (:mod:`brokerless.poll`'s)."""

from ..poll import Poller
from ..poll import select_ as select

__all__ = ["Poller", "select"]
