"""tornado integration (pyzmq's ``zmq.eventloop``): :mod:`.zmqstream` (callbacks on a socket),
:mod:`.future` (sockets returning tornado futures) and the deprecated :mod:`.ioloop`.

Needs tornado: ``pip install 'brokerless[tornado]'``.
"""

from tornado.ioloop import IOLoop

__all__ = ["IOLoop"]
