"""Helpers shared by the test modules (import after conftest has chosen the implementation)."""

from __future__ import annotations

import brokerless as zmq


def bound_endpoint(sock) -> str:
    """The endpoint a peer connects to after ``sock.bind(...)`` (resolves tcp port 0 / ``*``)."""
    return sock.getsockopt(zmq.LAST_ENDPOINT).decode()


def bind(sock, endpoint: str) -> str:
    """Bind ``sock`` and return the endpoint peers should connect to."""
    sock.bind(endpoint)
    return bound_endpoint(sock)


def connect(sock, addr: str) -> None:
    """Connect ``sock`` to a bound ``addr`` and return once the connection is usable.

    An inproc connect to a bound endpoint is attached at once.  When ipc/tcp join the suite,
    this is the one place to wait for the handshake (e.g. a monitor's HANDSHAKE_SUCCEEDED).
    """
    sock.connect(addr)


def recv_within(sock, timeout_ms: int = 2000, *, multipart: bool = False):
    """Receive one message, failing the test (not hanging) if none comes within the timeout."""
    if not sock.poll(timeout_ms, zmq.POLLIN):
        raise AssertionError(f"no message within {timeout_ms} ms on {sock!r}")
    return sock.recv_multipart() if multipart else sock.recv()
