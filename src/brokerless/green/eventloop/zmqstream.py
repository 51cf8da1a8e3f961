"""pyzmq's ``zmq.green.eventloop.zmqstream``: a ZMQStream on the shared IOLoop by default."""

from __future__ import annotations

from typing import Any

from ...eventloop import zmqstream as _zmqstream
from .ioloop import IOLoop


class ZMQStream(_zmqstream.ZMQStream):
    """:class:`brokerless.eventloop.zmqstream.ZMQStream`; ``io_loop`` defaults to
    ``IOLoop.instance()``."""

    def __init__(self, socket: Any, io_loop: IOLoop | None = None) -> None:
        super().__init__(socket, io_loop=io_loop or IOLoop.instance())


__all__ = ["ZMQStream"]
