"""Binding or connecting the source's and the sink's socket to the endpoints they were given."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import brokerless as zmq


def attach(
    sock: zmq.Socket[Any],
    endpoints: Iterable[str],
    bind: bool,
    error: Callable[[str, str, zmq.ZMQError], Exception],
) -> None:
    """Bind (or connect) ``sock`` to every endpoint; a failure raises
    ``error(verb, endpoint, exc)``, verb being "bind" or "connect"."""
    verb = "bind" if bind else "connect"
    for endpoint in endpoints:
        try:
            if bind:
                sock.bind(endpoint)
            else:
                sock.connect(endpoint)
        except zmq.ZMQError as exc:
            raise error(verb, endpoint, exc) from exc
