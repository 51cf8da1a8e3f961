"""``device`` for green sockets: pyzmq's ``zmq.green.device``, relaying in a greenlet."""

from __future__ import annotations

from typing import NoReturn

from ..constants import PollEvent
from ..socket import Socket, SyncSocket
from .poll import Poller


def device(device_type: int, frontend: SyncSocket, backend: SyncSocket | int) -> NoReturn:
    """Relay whole messages between ``frontend`` and ``backend``, both ways, until the greenlet
    is killed or a socket fails; only this greenlet waits.

    ``device_type`` (QUEUE, FORWARDER, STREAMER) is not looked at, as in pyzmq's green device
    and libzmq's ``zmq_device``: the socket types decide which way messages can go.  A
    ``backend`` of -1 means the frontend itself (a REP that echoes, say).
    """
    sink = frontend if backend == -1 else backend
    assert isinstance(sink, Socket)
    routes = [(frontend, sink)] if sink is frontend else [(frontend, sink), (sink, frontend)]
    poller = Poller()
    for source, _ in routes:
        poller.register(source, PollEvent.POLLIN)
    while True:
        ready = dict(poller.poll())
        for source, destination in routes:
            if source in ready:
                destination.send_multipart(source.recv_multipart())
