"""Deprecated (as in pyzmq 17): tornado's own IOLoop works with brokerless sockets; this module
only re-exports it, as ``zmq.eventloop.ioloop`` does."""

import warnings

from tornado.ioloop import IOLoop, PeriodicCallback
from tornado.util import TimeoutError


def _deprecated() -> None:
    warnings.warn(
        "brokerless.eventloop.ioloop is deprecated (as zmq.eventloop.ioloop in pyzmq 17): "
        "use tornado.ioloop, which works with brokerless sockets",
        DeprecationWarning,
        stacklevel=3,
    )


_deprecated()

ZMQIOLoop = IOLoop


def install() -> None:
    """Deprecated no-op: tornado needs no special loop for brokerless sockets."""
    _deprecated()


__all__ = ["IOLoop", "PeriodicCallback", "TimeoutError", "ZMQIOLoop", "install"]
