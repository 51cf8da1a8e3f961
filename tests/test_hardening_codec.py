"""Hostile frames over real tcp (issue 11, points 2 and 6): what the codec refuses drops only that
connection, at once, keeps the messages before it, and leaves no memory behind.

A raw peer written from RFC 23/37 by hand (``test_faults``'s wire helpers) attacks a bound PULL.
The memory tests run the PULL in a subprocess and read its RSS there, so this process's heap does
not blur the figure; the subprocess imports ``zmq`` instead of ``brokerless`` under
``BROKERLESS_TEST_AGAINST=pyzmq``, which is how these tests were checked against libzmq 4.3.5
(it drops both peers the same way and frees the partial frame too).
"""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys

import pytest
import zmq as libzmq

import brokerless as zmq

from .conftest import AGAINST_PYZMQ
from .test_faults import frame, greeting, handshake, read_exact, ready

pytestmark = pytest.mark.timeout(60)

DEADLINE = 5.0  # seconds any wait may take before the test fails
BODY = 64 << 20  # octets of frame body the peer sends after the header
CHUNK = b"z" * (1 << 20)
RSS_SLACK_MIB = 16  # what the receiver may grow by while the peer sends BODY (a quarter of it)

# The receiving process: a PULL on tcp and its monitor.  It prints its endpoint, takes the peer's
# two messages, then (told on stdin that the peer has closed) waits for the monitor to report the
# connection's end and for its RSS to settle within the slack, and prints what it saw.
_RECEIVER = r"""
import importlib, json, struct, sys, time

zmq = importlib.import_module(sys.argv[1])
slack = float(sys.argv[2])


def rss_mib():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024


ctx = zmq.Context()
pull = ctx.socket(zmq.PULL)
pull.setsockopt(zmq.RCVTIMEO, 5000)
pull.setsockopt(zmq.LINGER, 0)
monitor = pull.get_monitor_socket(
    zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
)
pull.bind("tcp://127.0.0.1:*")
before = rss_mib()
print(pull.getsockopt(zmq.LAST_ENDPOINT).decode(), flush=True)
messages = [[part.decode() for part in pull.recv_multipart()] for _ in range(2)]
sys.stdin.readline()
events = []
while monitor.poll(5000):
    event, _value = struct.unpack("=HI", monitor.recv_multipart()[0][:6])
    events.append(event)
    if event != zmq.EVENT_HANDSHAKE_SUCCEEDED:
        break
deadline = time.monotonic() + 2  # libzmq frees the engine just after reporting its end
while rss_mib() - before > slack and time.monotonic() < deadline:
    monitor.poll(10)
print(json.dumps({"messages": messages, "events": events, "growth": rss_mib() - before}))
ctx.destroy(linger=0)
"""


def _run_receiver(peer) -> tuple[dict, object]:
    """Start the receiving process, let ``peer(port)`` talk to it, and return what the
    receiver reports and what ``peer`` returned."""
    impl = "zmq" if AGAINST_PYZMQ else "brokerless"
    proc = subprocess.Popen(
        [sys.executable, "-c", _RECEIVER, impl, str(RSS_SLACK_MIB)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        endpoint = proc.stdout.readline().strip()
        assert endpoint.startswith("tcp://"), f"the receiver did not start: {endpoint!r}"
        outcome = peer(int(endpoint.rsplit(":", 1)[1]))
        out, _ = proc.communicate("done\n", timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, "the receiving process failed"
    return json.loads(out), outcome


def _send_body(raw: socket.socket, size: int) -> bool:
    """Send ``size`` octets of body; False if the receiver dropped the connection first."""
    try:
        for _ in range(size // len(CHUNK)):
            raw.sendall(CHUNK)
    except (ConnectionResetError, BrokenPipeError):
        return False
    return True


def _handshake_and_two_messages(port: int) -> socket.socket:
    raw = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
    handshake(raw, b"PUSH")
    raw.sendall(frame(b"one") + frame(b"a", more=True) + frame(b"b"))
    return raw


def test_a_frame_no_process_could_hold_drops_the_peer_at_its_header():
    """A header claiming 2^62 octets (MAXMSGSIZE unset) ends the connection before its body is
    read: the messages before it are delivered, the monitor says DISCONNECTED, and the
    receiver's memory does not grow by the body the peer tries to send."""

    def peer(port: int) -> bool:
        with _handshake_and_two_messages(port) as raw:
            raw.sendall(b"\x02" + (1 << 62).to_bytes(8, "big"))
            return _send_body(raw, BODY)

    report, body_taken = _run_receiver(peer)
    assert report["messages"] == [["one"], ["a", "b"]]
    assert not body_taken, "the receiver read the body of a frame no process can hold"
    assert report["events"] == [zmq.EVENT_HANDSHAKE_SUCCEEDED, zmq.EVENT_DISCONNECTED]
    assert report["growth"] < RSS_SLACK_MIB, f"RSS grew by {report['growth']:.0f} MiB"


def test_a_large_frame_cut_short_leaves_no_memory_behind():
    """A frame within the ceiling (512 MiB claimed) whose peer goes away after 64 MiB of body:
    once the monitor reports the disconnection, the partial body is no longer held."""

    def peer(port: int) -> bool:
        with _handshake_and_two_messages(port) as raw:
            raw.sendall(b"\x02" + (512 << 20).to_bytes(8, "big"))
            return _send_body(raw, BODY)

    report, body_taken = _run_receiver(peer)
    assert body_taken, "a frame within the ceiling was refused"
    assert report["messages"] == [["one"], ["a", "b"]]
    assert report["events"] == [zmq.EVENT_HANDSHAKE_SUCCEEDED, zmq.EVENT_DISCONNECTED]
    assert report["growth"] < RSS_SLACK_MIB, f"RSS grew by {report['growth']:.0f} MiB"


# -- point 6: data frames before the handshake completes -----------------------------------------


def _wait_closed(raw: socket.socket) -> None:
    """Read until the server closes ``raw`` (EOF or reset); the socket's timeout bounds it."""
    try:
        while raw.recv(65536):
            pass
    except (ConnectionResetError, BrokenPipeError):
        pass


@pytest.mark.parametrize(
    "early",
    [
        pytest.param(frame(b"before-handshake", more=True), id="more_frame"),
        pytest.param(frame(b"before-handshake"), id="final_frame"),
        # libzmq refuses a data frame only once its body is in; brokerless from its header
        pytest.param(
            b"\x03" + (1000).to_bytes(8, "big"),
            id="long_more_header_only",
            marks=pytest.mark.beyond_libzmq,
        ),
    ],
)
def test_a_data_frame_before_ready_drops_the_peer(make, early):
    """libzmq's order of events: HANDSHAKE_FAILED_PROTOCOL with ZMTP_UNEXPECTED_COMMAND; the
    peer's READY and message after the early frame are never delivered."""
    pull = make(zmq.PULL)
    monitor = pull.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL)
    pull.bind("tcp://127.0.0.1:*")
    port = int(pull.getsockopt(zmq.LAST_ENDPOINT).decode().rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as raw:
        raw.sendall(greeting())
        read_exact(raw, 64)
        try:
            raw.sendall(early + ready(b"PUSH") + frame(b"after"))
        except (ConnectionResetError, BrokenPipeError):
            pass  # dropped already
        _wait_closed(raw)
    assert monitor.poll(int(DEADLINE * 1000)), "no HANDSHAKE_FAILED_PROTOCOL"
    event, value = struct.unpack("=HI", monitor.recv_multipart()[0][:6])
    assert (event, value) == (
        zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL,
        libzmq.PROTOCOL_ERROR_ZMTP_UNEXPECTED_COMMAND,
    )
    assert not pull.poll(0), "a message from before the handshake was delivered"
    pull.disable_monitor()
    monitor.close(linger=0)
