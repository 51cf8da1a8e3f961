"""Helpers shared by the chapter-2 programs (the Guide's examples have a zhelpers module too)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import zmq  # pyzmq code: on brokerless through `python -m brokerless.compat.as_zmq`


def proxy_until(frontend, backend, last: Callable[[list[bytes]], bool] | None = None) -> None:
    """``zmq.proxy(frontend, backend)``, ended once a message for which ``last(message)`` is
    true has been forwarded (without ``last``: never, until Ctrl-C).

    A capture socket shows a watcher thread every message the proxy forwards; the watcher then
    sends TERMINATE on the proxy's control socket (a REP, which answers once the proxy stops)
    and reads what the proxy still forwarded meanwhile, until that answer comes.
    """
    if last is None:
        zmq.proxy(frontend, backend)
        return
    context = frontend.context
    name = f"{id(frontend):x}"
    capture = context.socket(zmq.PAIR)
    capture.bind(f"inproc://capture-{name}")
    control = context.socket(zmq.REP)
    control.bind(f"inproc://control-{name}")
    watcher = threading.Thread(target=_watch, args=(context, name, last))
    watcher.start()
    zmq.proxy_steerable(frontend, backend, capture, control)
    watcher.join()
    capture.close()
    control.close()


def _watch(context, name: str, last: Callable[[list[bytes]], bool]) -> None:
    capture = context.socket(zmq.PAIR)
    capture.connect(f"inproc://capture-{name}")
    control = context.socket(zmq.REQ)
    control.connect(f"inproc://control-{name}")
    while not last(capture.recv_multipart()):
        pass
    control.send(b"TERMINATE")
    poller = zmq.Poller()
    poller.register(capture, zmq.POLLIN)
    poller.register(control, zmq.POLLIN)
    stopped = False
    while not stopped:
        events = dict(poller.poll())
        if capture in events:
            capture.recv_multipart()  # forwarded before the proxy read TERMINATE
        if control in events:
            control.recv()
            stopped = True
    capture.close()
    control.close()


def nth_message(n: int) -> Callable[[list[bytes]], bool]:
    """A ``last`` for :func:`proxy_until` that is true for the n-th message it sees."""
    seen = 0

    def last(message: list[bytes]) -> bool:
        nonlocal seen
        seen += 1
        return seen == n

    return last
