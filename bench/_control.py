"""The control channel between the processes of a two-process benchmark (``local_*`` /
``remote_*``, ``pubsub_fanout.py``): plain OS stream sockets, not the implementation under test.

A stream of messages over ZeroMQ has no end-of-stream: the side that sends the last message
cannot know when the other has received it, and closing its socket too early can lose the tail of
the stream (reported for libzmq 4.3.5 over ipc, a PUSH socket closing right after its last send).
So the side that finishes (the receiver of a throughput run, the requester of a latency run,
each subscriber of a fan-out) says so on this channel, and the other side keeps its ZeroMQ
socket open until it hears it.  The channel also carries the fan-out's readiness handshake and
the subscribers' results.

It is one connection per peer carrying newline-delimited JSON objects.  ``local_*`` (the side
that binds the ZeroMQ socket) listens, ``remote_*`` connects.  Its address is derived from the
ZeroMQ endpoint, on the same transport so that the tools also work between two machines:

- ``tcp://HOST:PORT`` -> TCP port PORT + 1 on the same host (``*`` listens on every interface);
- ``ipc://PATH``      -> a Unix socket at ``PATH.ctl``;

or set explicitly with ``--control`` (a ``tcp://`` or ``ipc://`` address), on both sides.

The peer's death closes its end, so a waiting side sees end-of-file and fails, instead of
waiting forever.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import time
from typing import Any

CONNECT_TIMEOUT = 60.0  # s; covers the peer's interpreter start-up and imports


def control_address(endpoint: str, control: str | None = None) -> str:
    """The control channel's address for the ZeroMQ ``endpoint`` (or ``control`` if given)."""
    if control:
        return control
    scheme, sep, rest = endpoint.partition("://")
    if not sep:
        raise ValueError(f"not an endpoint: {endpoint!r}")
    if scheme == "ipc":
        return f"ipc://{rest}.ctl"  # "@name" (abstract) stays abstract
    if scheme == "tcp":
        host, colon, port = rest.rpartition(":")
        if not colon or not port.isdigit() or not 0 < int(port) < 65535:
            raise ValueError(
                f"a tcp endpoint needs an explicit port below 65535 for its control channel "
                f"(PORT + 1), or --control: {endpoint!r}"
            )
        return f"tcp://{host}:{int(port) + 1}"
    raise ValueError(f"no control channel for {scheme}:// endpoints (use tcp:// or ipc://)")


def _sockaddr(address: str, *, listen: bool) -> tuple[int, Any]:
    scheme, _, rest = address.partition("://")
    if scheme == "ipc":
        return socket.AF_UNIX, ("\0" + rest[1:]) if rest.startswith("@") else rest
    if scheme == "tcp":
        host, _, port = rest.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if host == "*":
            if not listen:
                raise ValueError(f"cannot connect to '*': {address!r}")
            host = ""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        return family, (host, int(port))
    raise ValueError(f"control address must be tcp:// or ipc://, not {address!r}")


class Channel:
    """One control connection: send and receive JSON objects, one per line."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = b""

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, obj: dict[str, Any]) -> None:
        self.sock.sendall(json.dumps(obj).encode() + b"\n")

    def recv(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next object, or None at end-of-file (the peer closed or died).

        Raises TimeoutError if nothing complete arrives within ``timeout`` seconds.
        """
        self.sock.settimeout(timeout)
        while b"\n" not in self._buffer:
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)

    def close(self) -> None:
        self.sock.close()


class Listener:
    """The listening end (the ``local_*`` side); create it before binding the ZeroMQ socket."""

    def __init__(self, endpoint: str, control: str | None = None) -> None:
        self.address = control_address(endpoint, control)
        family, addr = _sockaddr(self.address, listen=True)
        self.path = addr if family == socket.AF_UNIX and not addr.startswith("\0") else None
        if self.path:
            _unlink_stale(self.path)
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        if family != socket.AF_UNIX:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind(addr)
        except OSError as exc:
            self.sock.close()
            raise OSError(exc.errno, f"control channel {self.address}: {exc.strerror}") from None
        self.sock.listen(64)

    def accept(self, timeout: float | None = CONNECT_TIMEOUT) -> Channel:
        self.sock.settimeout(timeout)
        try:
            conn, _ = self.sock.accept()
        except TimeoutError:
            raise TimeoutError(
                f"no peer connected to the control channel {self.address} within {timeout:g} s"
            ) from None
        conn.settimeout(None)
        return Channel(conn)

    def close(self) -> None:
        self.sock.close()
        if self.path:
            try:
                os.unlink(self.path)
            except OSError:
                pass


def _unlink_stale(path: str) -> None:
    """Remove a Unix socket left behind by a killed run (never a regular file)."""
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
    except FileNotFoundError:
        pass


def connect(endpoint: str, control: str | None = None, timeout: float = CONNECT_TIMEOUT) -> Channel:
    """Connect to the listening side, retrying until it is up (or ``timeout`` s have passed)."""
    address = control_address(endpoint, control)
    family, addr = _sockaddr(address, listen=False)
    deadline = time.monotonic() + timeout
    while True:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.connect(addr)
        except (ConnectionRefusedError, FileNotFoundError):
            sock.close()
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"nothing listening on the control channel {address} after {timeout:g} s"
                ) from None
            time.sleep(0.01)
            continue
        except BaseException:
            sock.close()
            raise
        return Channel(sock)


def expect(channel: Channel, key: str, who: str, timeout: float | None = None) -> dict[str, Any]:
    """Receive the next object and check it has ``key``; exit with a message if the peer is gone."""
    try:
        obj = channel.recv(timeout)
    except TimeoutError:
        raise SystemExit(f"error: no {key!r} from the {who} within {timeout:g} s") from None
    if obj is None:
        raise SystemExit(f"error: the {who} closed the control channel before sending {key!r}")
    if key not in obj:
        raise SystemExit(f"error: expected {key!r} from the {who}, got {obj!r}")
    return obj
