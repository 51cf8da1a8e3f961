"""Hostile commands after the handshake, over real tcp: what a peer's PINGs can make a socket
hold, and how a PING libzmq answers is answered.

A raw peer written from RFC 23/37 by hand (``test_faults``'s wire helpers) attacks a bound PULL.
The memory test runs the PULL in a subprocess and reads its RSS there, so this process's heap
does not blur the figure; the subprocess imports ``zmq`` instead of ``brokerless`` under
``BROKERLESS_TEST_AGAINST=pyzmq``, which is how these tests were checked against libzmq 4.3.5.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest

import brokerless as zmq

from .conftest import AGAINST_PYZMQ
from .test_faults import frame, handshake
from .test_security_hostile import read_command

pytestmark = pytest.mark.timeout(90)

DEADLINE = 30.0  # seconds any wait may take before the test fails
FLOOD = 32 << 20  # octets of PINGs the peer sends without reading a PONG
RSS_SLACK_MIB = 12  # what the receiver may grow by meanwhile (each PONG is as long as its PING)

# The receiving process: a PULL on tcp.  It prints its endpoint, takes one message (sent after
# the flood, so every PING before it has been read), and prints how much its RSS grew.
_RECEIVER = r"""
import importlib, json, sys

zmq = importlib.import_module(sys.argv[1])


def rss_mib():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024


ctx = zmq.Context()
pull = ctx.socket(zmq.PULL)
pull.setsockopt(zmq.RCVTIMEO, 30000)
pull.setsockopt(zmq.LINGER, 0)
pull.bind("tcp://127.0.0.1:*")
before = rss_mib()
print(pull.getsockopt(zmq.LAST_ENDPOINT).decode(), flush=True)
message = pull.recv().decode()
print(json.dumps({"message": message, "growth": rss_mib() - before}), flush=True)
sys.stdin.readline()  # until the peer has read its PONG
ctx.destroy(linger=0)
"""


def ping(context: bytes) -> bytes:
    return frame(b"\x04PING" + (0).to_bytes(2, "big") + context, command=True)


def test_a_peer_that_pings_and_never_reads_costs_one_pong():
    """A peer floods PINGs and reads nothing: libzmq holds one PONG while it cannot write, so
    its memory stays flat.  The receiver's RSS must not grow by the PONGs it cannot send; the
    connection still carries messages, and once the peer reads it gets its PONGs."""
    impl = "zmq" if AGAINST_PYZMQ else "brokerless"
    proc = subprocess.Popen(
        [sys.executable, "-c", _RECEIVER, impl],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        endpoint = proc.stdout.readline().strip()
        assert endpoint.startswith("tcp://"), f"the receiver did not start: {endpoint!r}"
        port = int(endpoint.rsplit(":", 1)[1])
        with socket.socket() as raw:
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting
            raw.settimeout(DEADLINE)
            raw.connect(("127.0.0.1", port))
            handshake(raw, b"PUSH")
            pings = ping(b"n" * 16) * (1 << 14)
            for _ in range(FLOOD // len(pings)):
                raw.sendall(pings)
            raw.sendall(frame(b"after the flood"))
            report = json.loads(proc.stdout.readline())
            assert report["message"] == "after the flood"
            assert report["growth"] < RSS_SLACK_MIB, f"RSS grew by {report['growth']:.0f} MiB"
            assert read_command(raw).startswith(b"\x04PONG")
        proc.communicate("done\n", timeout=DEADLINE)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, "the receiving process failed"


def test_a_ping_context_longer_than_16_octets_is_answered_with_its_first_16(make):
    """RFC 37 lets a PING carry up to 16 octets of context; libzmq answers a longer one with
    its first 16, and keeps the connection."""
    pull = make(zmq.PULL, RCVTIMEO=int(DEADLINE * 1000))
    pull.bind("tcp://127.0.0.1:*")
    port = int(pull.getsockopt(zmq.LAST_ENDPOINT).decode().rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as raw:
        handshake(raw, b"PUSH")
        raw.sendall(ping(bytes(range(100))) + frame(b"still here"))
        assert read_command(raw) == b"\x04PONG" + bytes(range(16))
        assert pull.recv() == b"still here"
