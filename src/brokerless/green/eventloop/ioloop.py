"""pyzmq's ``zmq.green.eventloop.ioloop``: the same names as :mod:`brokerless.eventloop.ioloop`
(tornado's IOLoop, which runs green sockets as it runs any: through their ``FD``)."""

from ...eventloop.ioloop import IOLoop, PeriodicCallback, TimeoutError, ZMQIOLoop, install

__all__ = ["IOLoop", "PeriodicCallback", "TimeoutError", "ZMQIOLoop", "install"]
