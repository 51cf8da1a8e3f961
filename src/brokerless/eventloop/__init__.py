"""tornado integration (pyzmq's ``zmq.eventloop``): :mod:`.zmqstream` (callbacks on a socket),
:mod:`.future` (sockets returning tornado futures) and the deprecated :mod:`.ioloop`.

Needs tornado: the ``tornado`` extra, ``pip install -e '.[tornado]'`` in a clone.
"""

from tornado.ioloop import IOLoop

__all__ = ["IOLoop"]
