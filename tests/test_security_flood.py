"""A HELLO flood costs a CURVE server no memory that outlives the connections: it answers every
HELLO with a cookie and keeps nothing of it (RFC 26).  The server runs in its own process, so
its RSS is not blurred by the test's heap; the flood is raw sockets sending a real HELLO (made
here with libsodium) and reading the WELCOME, hundreds of connections at a time."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap

import nacl.bindings as sodium
import pytest

from tests.conftest import AGAINST_PYZMQ

pytestmark = pytest.mark.timeout(120)

SERVER = textwrap.dedent(
    """
    import sys
    zmq = __import__(sys.argv[1])
    public, secret = sys.argv[2].encode(), sys.argv[3].encode()
    ctx = zmq.Context()
    server = ctx.socket(zmq.PULL)
    server.setsockopt(zmq.CURVE_SERVER, 1)
    server.setsockopt(zmq.CURVE_SECRETKEY, secret)
    server.setsockopt(zmq.CURVE_PUBLICKEY, public)
    server.setsockopt(zmq.LINGER, 0)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    print(port, flush=True)
    sys.stdin.read()  # until the test closes our stdin
    server.close()
    ctx.term()
    """
)

GREETING = b"\xff" + bytes(7) + b"\x01\x7f\x03\x01" + b"CURVE".ljust(20, b"\0") + bytes(32)
BATCH = 100  # connections open at once
ROUND = 10  # batches between two readings of the server's RSS
ROUNDS = 6
ALLOWED_GROWTH = 8 << 20  # octets; one connection's state, if kept, is several KiB


def hello(server_public: bytes) -> bytes:
    """A valid HELLO command frame to ``server_public`` from a fresh short-term key."""
    short_public, short_secret = sodium.crypto_box_keypair()
    nonce = (1).to_bytes(8, "big")
    box = sodium.crypto_box(bytes(64), b"CurveZMQHELLO---" + nonce, server_public, short_secret)
    body = b"\x05HELLO\x01\x00" + bytes(72) + short_public + nonce + box
    return b"\x04" + bytes((len(body),)) + body


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise AssertionError(f"the server closed after {len(data)} of {n} octets")
        data += chunk
    return data


def flood(port: int, server_public: bytes, batches: int) -> None:
    for _ in range(batches):
        conns = []
        for _ in range(BATCH):
            conn = socket.create_connection(("127.0.0.1", port), timeout=10)
            conn.sendall(GREETING + hello(server_public))
            conns.append(conn)
        for conn in conns:
            read_exactly(conn, 64)  # the server's greeting
            welcome = read_exactly(conn, 170)  # a 168-octet WELCOME in a short command frame
            assert welcome[2:10] == b"\x07WELCOME"
            conn.close()


def test_a_hello_flood_keeps_the_server_memory_flat():
    public, secret = sodium.crypto_box_keypair()
    from zmq.utils import z85  # the keys go to the server as text

    impl = "zmq" if AGAINST_PYZMQ else "brokerless"
    server = subprocess.Popen(
        [
            sys.executable,
            "-c",
            SERVER,
            impl,
            z85.encode(public).decode(),
            z85.encode(secret).decode(),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        port = int(server.stdout.readline())
        flood(port, public, ROUND)  # warm-up: imports, arenas, the first cookie key
        readings = []
        for _ in range(ROUNDS):
            flood(port, public, ROUND)
            readings.append(rss(server.pid))
        # The allocator makes single readings noisy (receive buffers come and go); what a leak
        # raises is the floor: compare the lowest reading of each half.
        first, last = min(readings[: ROUNDS // 2]), min(readings[ROUNDS // 2 :])
        hellos = BATCH * ROUND * ROUNDS // 2
        assert last - first < ALLOWED_GROWTH, (
            f"{hellos} more HELLOs raised the server's RSS floor from {first >> 20} to "
            f"{last >> 20} MiB (readings {[r >> 20 for r in readings]} MiB)"
        )
        assert server.poll() is None
    finally:
        server.stdin.close()
        server.wait(timeout=30)
