"""What the security tests share: key pairs, a ZAP handler thread, socket set-up, monitor reads.

Everything here goes through pyzmq's public API only (``zmq`` is whichever module a test
passes: brokerless, or pyzmq for the libzmq side), so the same helpers serve both ends.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

ZAP_ENDPOINT = "inproc://zeromq.zap.01"
USER, PASSWORD = b"admin", b"secret"


class ZapHandler:
    """A ZAP handler (RFC 27) on a REP socket in ``ctx``, answering in its own thread.

    ``decide(request_frames)`` returns (status, user id, metadata); every request is kept in
    ``requests``.  Bound before it returns, so servers made afterwards find it.
    """

    def __init__(
        self,
        zmq: ModuleType,
        ctx: Any,
        decide: Callable[[list[bytes]], tuple[bytes, bytes, bytes]],
    ) -> None:
        self.requests: list[list[bytes]] = []
        self._decide = decide
        self._stop = threading.Event()
        self._zmq = zmq
        self._sock = ctx.socket(zmq.REP)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.bind(ZAP_ENDPOINT)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        sock = self._sock
        try:
            while not self._stop.is_set():
                if not sock.poll(20):
                    continue
                request = sock.recv_multipart()
                self.requests.append(request)
                status, user, metadata = self._decide(request)
                sock.send_multipart([request[0], request[1], status, b"text", user, metadata])
        finally:
            sock.close(linger=0)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def plain_policy(request: list[bytes]) -> tuple[bytes, bytes, bytes]:
    """Accept admin/secret (user id "anonymous", metadata Hello=World), refuse the rest; accept
    every CURVE and NULL client."""
    mechanism = request[5]
    if mechanism == b"PLAIN" and request[6:] != [USER, PASSWORD]:
        return b"400", b"", b""
    return b"200", b"anonymous", b"\x05Hello\x00\x00\x00\x05World"


def keys_policy(allowed: set[bytes]) -> Callable[[list[bytes]], tuple[bytes, bytes, bytes]]:
    """Accept only CURVE clients whose public key (32 octets) is in ``allowed``."""

    def decide(request: list[bytes]) -> tuple[bytes, bytes, bytes]:
        if request[5] == b"CURVE" and request[6] in allowed:
            return b"200", b"known", b""
        return b"400", b"", b""

    return decide


def make_keys(zmq: ModuleType) -> dict[str, bytes]:
    server_public, server_secret = zmq.curve_keypair()
    client_public, client_secret = zmq.curve_keypair()
    return {
        "server_public": server_public,
        "server_secret": server_secret,
        "client_public": client_public,
        "client_secret": client_secret,
    }


def secure(
    mechanism: str,
    server: Any,
    client: Any,
    zmq_server: ModuleType,
    zmq_client: ModuleType,
    keys: dict[str, bytes],
    password: bytes = PASSWORD,
) -> None:
    """Make ``server`` the PLAIN/CURVE server and ``client`` its client."""
    if mechanism == "plain":
        server.setsockopt(zmq_server.PLAIN_SERVER, 1)
        client.setsockopt(zmq_client.PLAIN_USERNAME, USER)
        client.setsockopt(zmq_client.PLAIN_PASSWORD, password)
    elif mechanism == "curve":
        server.setsockopt(zmq_server.CURVE_SERVER, 1)
        server.setsockopt(zmq_server.CURVE_SECRETKEY, keys["server_secret"])
        server.setsockopt(zmq_server.CURVE_PUBLICKEY, keys["server_public"])
        client.setsockopt(zmq_client.CURVE_SERVERKEY, keys["server_public"])
        client.setsockopt(zmq_client.CURVE_PUBLICKEY, keys["client_public"])
        client.setsockopt(zmq_client.CURVE_SECRETKEY, keys["client_secret"])


def handshake_events(zmq: ModuleType) -> int:
    """The monitor events that end a handshake: succeeded, or failed (auth, protocol, no
    detail)."""
    return (
        zmq.EVENT_HANDSHAKE_FAILED_AUTH
        | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
        | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
        | zmq.EVENT_HANDSHAKE_SUCCEEDED
    )


def next_event(monitor: Any, timeout_ms: int, wanted: int) -> tuple[int, int]:
    """The next monitor event among ``wanted`` (a mask) as (event, value); AssertionError if
    none comes within the timeout."""
    while monitor.poll(timeout_ms):
        head, _endpoint = monitor.recv_multipart()
        event, value = struct.unpack("=HI", head[:6])
        if event & wanted:
            return event, value
    raise AssertionError(f"no monitor event {wanted:#x} within {timeout_ms} ms")
