"""Helpers shared by the test modules (import after conftest has chosen the implementation)."""

from __future__ import annotations

import itertools

import pytest

import brokerless as zmq

_ids = itertools.count()  # monitor addresses: libzmq frees an inproc name asynchronously


#: For tests whose ipc/tcp variants go beyond libzmq 4.3: its REQ drops a connection that
#: delivers a malformed reply (req_session) where brokerless skips the reply on every transport,
#: as libzmq does over inproc; and its term() can hang when a socket was blocked at its HWM
#: over the wire.
WIRE_BEYOND_LIBZMQ = [
    "inproc",
    pytest.param("ipc", marks=pytest.mark.beyond_libzmq),
    pytest.param("tcp", marks=pytest.mark.beyond_libzmq),
]


#: For tests whose ipc variant goes beyond libzmq 4.3: libzmq lets a second bind of an ipc path
#: steal it silently (it unlinks the file), where brokerless refuses with EADDRINUSE while the
#: first socket listens.
IPC_BEYOND_LIBZMQ = ["inproc", pytest.param("ipc", marks=pytest.mark.beyond_libzmq), "tcp"]


def bound_endpoint(sock) -> str:
    """The endpoint a peer connects to after ``sock.bind(...)`` (resolves tcp port 0 / ``*``)."""
    return sock.getsockopt(zmq.LAST_ENDPOINT).decode()


def bind(sock, endpoint: str) -> str:
    """Bind ``sock`` and return the endpoint peers should connect to."""
    sock.bind(endpoint)
    return bound_endpoint(sock)


def connect(sock, addr: str, *bound_peers) -> None:
    """Connect ``sock`` to ``addr`` and return once the connection is usable.

    An inproc connect to a bound endpoint is attached at once.  Over ipc/tcp the handshake runs
    in the background: wait for HANDSHAKE_SUCCEEDED on ``sock`` and on each bound peer given
    (pass the binder when the test needs it to know this peer, e.g. for round-robin), using the
    socket monitor API that pyzmq has too.
    """
    if addr.startswith("inproc://"):
        sock.connect(addr)
        return
    watched = [
        (s, s.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)) for s in (sock, *bound_peers)
    ]
    try:
        sock.connect(addr)
        for _, monitor in watched:
            if not monitor.poll(5000):
                raise AssertionError(f"no handshake with {addr} within 5 s")
            monitor.recv_multipart()
    finally:
        for s, monitor in watched:
            s.disable_monitor()
            monitor.close(linger=0)


def recv_within(sock, timeout_ms: int = 2000, *, multipart: bool = False):
    """Receive one message, failing the test (not hanging) if none comes within the timeout."""
    if not sock.poll(timeout_ms, zmq.POLLIN):
        raise AssertionError(f"no message within {timeout_ms} ms on {sock!r}")
    return sock.recv_multipart() if multipart else sock.recv()


def drop_replays(messages: list[list[bytes]]) -> list[bytes]:
    """The consumer side of the Spark sink's contract (``[header, payload]`` messages): drop a
    message whose header (batch id, partition, row) came before -- whatever batch ids came in
    between."""
    from brokerless.spark import parse_header  # (the Spark tests' only)

    seen, kept = set(), []
    for header, payload in messages:
        key = parse_header(header)
        if key not in seen:
            seen.add(key)
            kept.append(payload)
    return kept
