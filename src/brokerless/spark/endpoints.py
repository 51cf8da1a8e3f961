"""Endpoints: binding or connecting the source's and the sink's socket to the endpoints they
were given, and where a topology's sockets bind for the address peers know them by."""

from __future__ import annotations

import ipaddress
import socket
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


def bind_address(host: str) -> str:
    """Where to bind for peers that reach this machine at ``host``: that address itself when
    it is a loopback one (nothing else can reach it anyway), else every interface."""
    try:
        # each address's host: a str for AF_INET and AF_INET6, the families given here
        addresses = {
            address[0]
            for *_, address in socket.getaddrinfo(host, None)
            if isinstance(address[0], str)
        }
    except OSError:
        return "*"
    if addresses and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses):
        return min(addresses)
    return "*"
