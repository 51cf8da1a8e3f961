"""How much of a TCP connection the receiving process has read, asked of the kernel (``ss``,
iproute2): the bytes the kernel received on the connection minus those still queued for the
process.  A test that knows the byte layout of what was sent knows from this exactly which
messages the receiver took off the network -- whatever the receiver does with them after."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass

_RECEIVED = re.compile(r"\bbytes_received:(\d+)")


@dataclass(frozen=True)
class Connection:
    """One end of an established connection: its ports, and the queues the kernel holds."""

    local_port: int
    peer_port: int
    recv_q: int  # received, not yet read by the process
    send_q: int  # written by the process, not yet acknowledged by the peer
    received: int  # bytes the kernel received in all

    @property
    def consumed(self) -> int:
        """Bytes the process has read."""
        return self.received - self.recv_q


def connections(port: int) -> list[Connection]:
    """The established tcp connections whose local end is 127.0.0.1:``port`` (a connection
    from another address may have the same port number as its own)."""
    out = subprocess.run(
        ["ss", "-tinOH", "state", "established", f"src 127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        received = _RECEIVED.search(line)
        found.append(
            Connection(
                local_port=int(fields[2].rsplit(":", 1)[1]),
                peer_port=int(fields[3].rsplit(":", 1)[1]),
                recv_q=int(fields[0]),
                send_q=int(fields[1]),
                received=int(received[1]) if received else 0,
            )
        )
    return found


def connection(port: int, peer_port: int | None = None) -> Connection | None:
    """The one established connection at local ``port`` (to ``peer_port`` if given)."""
    found = [c for c in connections(port) if peer_port is None or c.peer_port == peer_port]
    if len(found) > 1:
        raise AssertionError(f"{len(found)} connections at port {port}, expected one")
    return found[0] if found else None
