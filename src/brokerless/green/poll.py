"""The green Poller: pyzmq's ``zmq.green.Poller``, which sleeps on the gevent hub.

A round looks at every socket's events as :class:`brokerless.Poller` does (which also wakes
green sockets' waiters whose edge the look consumed, see :mod:`.core`); only the sleep between
rounds differs: the hub watches the descriptors, so other greenlets run meanwhile.
"""

from __future__ import annotations

import gevent.select

from ..poll import Poller as _Poller


class Poller(_Poller):
    """A :class:`brokerless.Poller` whose ``poll`` blocks only the calling greenlet."""

    def _sleeper(self) -> gevent.select.poll:
        hub_poll = gevent.select.poll()
        for fd, mask in self._registrations():
            hub_poll.register(fd, mask)
        return hub_poll
