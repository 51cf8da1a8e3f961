"""Free tcp ports, for tests that must name a port before anything binds it."""

from __future__ import annotations

import random
import socket

_handed_out: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = map(int, f.read().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return low, high


def free_port() -> int:
    """A tcp port nothing listens on, outside the kernel's ephemeral range, and never handed
    out before in this test run.

    Outside the range, because a port-0 bind anywhere on the machine (the kernel's pick for
    another test, Spark's JVM) and a connection's source port are drawn from it: one could take
    the port between this call and the test's bind, or a connection to it could be given it as
    its own source port and connect to itself.  Never twice, because a test that asks for two
    ports before binding either must get two different ones."""
    low, high = _ephemeral_range()
    candidates = [p for p in range(10000, 65536) if not low <= p <= high and p not in _handed_out]
    for port in random.sample(candidates, 100):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise AssertionError("no free tcp port found")


def unbound_address(endpoint: str) -> str:
    """A concrete address nobody listens on yet, for connect-before-bind: tcp's port ``*``
    filled in with :func:`free_port`."""
    if endpoint.startswith("tcp://") and endpoint.endswith(":*"):
        return f"{endpoint[:-1]}{free_port()}"
    return endpoint
