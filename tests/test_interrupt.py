"""Ctrl-C reaches a program blocked in a socket call.

A child process blocks in recv / Poller.poll / send at the high-water mark; the test sends it
SIGINT and expects KeyboardInterrupt from that very call, promptly, after which the program
closes its sockets, terminates the context and exits 0.  The child imports the implementation
under test (BROKERLESS_TEST_AGAINST is passed through the environment).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

import pytest

# The child's program.  {setup} runs before the blocking call; the line marked BLOCKS is the one
# the KeyboardInterrupt must come from.  A helper thread prints "ready" once the main thread is
# executing that line; the parent then also waits for that thread to be asleep (in the call's
# wait), because a signal that lands just before the wait starts can be lost by a C extension
# (pyzmq only looks for signals when its poll returns EINTR).
PROGRAM = """\
import os, signal, sys, threading
signal.signal(signal.SIGINT, signal.default_int_handler)  # even if the parent ignores SIGINT
if os.environ.get("BROKERLESS_TEST_AGAINST") == "pyzmq":
    import zmq
else:
    import brokerless as zmq

BLOCK_LINE = int(sys.argv[1])
ctx = zmq.Context()
sockets = []

def make(kind):
    sock = ctx.socket(kind)
    sock.linger = 0
    sock.rcvtimeo = sock.sndtimeo = 20000  # bounded, should the signal never come
    sockets.append(sock)
    return sock

def announce_when_blocked(main_ident):
    while True:
        frame = sys._current_frames().get(main_ident)
        while frame is not None and frame.f_code.co_filename != "<string>":
            frame = frame.f_back
        if frame is not None and frame.f_code.co_name == "<module>":
            if frame.f_lineno == BLOCK_LINE:
                print("ready", flush=True)
                return

{setup}
threading.Thread(target=announce_when_blocked, args=(threading.get_ident(),), daemon=True).start()
try:
    {block}  # BLOCKS
    print("returned", flush=True)
    sys.exit(1)
except KeyboardInterrupt as exc:
    line = exc.__traceback__.tb_lineno
    for sock in sockets:
        sock.close()
    ctx.term()
    print(f"interrupted at line {{line}}", flush=True)
    sys.exit(0)
"""

PULL_BOUND = """\
pull = make(zmq.PULL)
pull.bind("inproc://interrupt")"""

PUSH_AT_HWM = """\
push = make(zmq.PUSH)
push.sndhwm = 1
push.bind("inproc://interrupt")
pull = make(zmq.PULL)
pull.rcvhwm = 1
pull.connect("inproc://interrupt")
try:
    for _ in range(100):
        push.send(b"fill", zmq.NOBLOCK)
    raise SystemExit("never reached the high-water mark")
except zmq.Again:
    pass"""

POLLER_ON_PULL = (
    PULL_BOUND
    + """
poller = zmq.Poller()
poller.register(pull, zmq.POLLIN)"""
)

PROXY_BOUND = """\
frontend = make(zmq.PULL)
frontend.bind("inproc://interrupt-in")
backend = make(zmq.PUSH)
backend.bind("inproc://interrupt-out")"""

SCENARIOS = {
    "recv": (PULL_BOUND, "pull.recv()"),
    "recv_multipart": (PULL_BOUND, "pull.recv_multipart()"),
    "Poller.poll": (POLLER_ON_PULL, "poller.poll()"),
    "Socket.poll": (PULL_BOUND, "pull.poll()"),
    "send at HWM": (PUSH_AT_HWM, 'push.send(b"one too many")'),
    "zmq.proxy": (PROXY_BOUND, "zmq.proxy(frontend, backend)"),
}

PROMPTLY = 2.0  # seconds from SIGINT to the program reporting the interrupt


def wait_until_asleep(pid: int, deadline: float) -> None:
    """Wait for the child's main thread to be sleeping (Linux /proc; elsewhere, return at once)."""
    stat = f"/proc/{pid}/task/{pid}/stat"
    if not os.path.exists(stat):
        return
    while time.monotonic() < deadline:
        with open(stat) as f:
            state = f.read().rpartition(")")[2].split()[0]
        if state == "S":
            return
    raise AssertionError(f"the child's main thread never went to sleep (state {state})")


def read_line(proc, deadline: float) -> str:
    """One line of the child's stdout, or "" at EOF; fails the test at the deadline."""
    fd = proc.stdout.fileno()
    data = b""
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"child printed only {data!r} by the deadline")
        readable, _, _ = select.select([fd], [], [], remaining)
        if readable:
            chunk = os.read(fd, 1)
            if not chunk:
                return data.decode()
            data += chunk
    return data.decode()


@pytest.mark.parametrize(("setup", "block"), SCENARIOS.values(), ids=list(SCENARIOS))
def test_sigint_interrupts_a_blocked_call(tmp_path, setup, block):
    program = PROGRAM.format(setup=setup, block=block)
    block_line = next(n for n, text in enumerate(program.splitlines(), 1) if "# BLOCKS" in text)
    stderr_path = tmp_path / "stderr"
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-c", program, str(block_line)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=os.environ.copy(),
        )
    try:
        assert read_line(proc, time.monotonic() + 20) == "ready\n", stderr_path.read_text()
        wait_until_asleep(proc.pid, time.monotonic() + 20)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        line = read_line(proc, sent + PROMPTLY)
        assert line == f"interrupted at line {block_line}\n", stderr_path.read_text()
        assert time.monotonic() - sent < PROMPTLY
        assert proc.wait(timeout=5) == 0, stderr_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
    assert "Traceback" not in stderr_path.read_text(), stderr_path.read_text()
