"""pyzmq's ``zmq.green.eventloop``: the tornado IOLoop and ZMQStream for green sockets."""

from .ioloop import IOLoop

__all__ = ["IOLoop"]
