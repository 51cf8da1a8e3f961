"""Review findings: pipe lifecycle and socket/context shutdown.

Each test fails on brokerless (as of b367768/66761ac) and passes against libzmq
(``BROKERLESS_TEST_AGAINST=pyzmq``).  Waits are bounded: ``_pause`` is a poll for input on a
socket that never gets any, so it just lets time pass (and lets libzmq's reaper run).
"""

from __future__ import annotations

import gc
import socket as socket_module
import subprocess
import sys
import textwrap
import threading

import pytest

import brokerless as zmq
from tests.conftest import AGAINST_PYZMQ


def _pause(sock, ms: int = 10) -> None:
    sock.poll(ms, zmq.POLLIN)


def _eventually_unwritable(push, within_ms: int = 2000) -> bool:
    """True once ``push`` has no peer left to write to (POLLOUT goes away)."""
    for _ in range(within_ms // 10):
        if not push.poll(0, zmq.POLLOUT):
            return True
        _pause(push)
    return False


# -- a pipe ended before its other end was attached is never noticed --------------------------


def test_push_binder_notices_peer_that_closed_before_attach(make):
    """PUSH never reads its inbound lane, so the DELIMITER left there is never seen, and the
    peer's pipe_term was skipped because the PUSH end had no owner yet (pipe.py terminate)."""
    push = make(zmq.PUSH)
    push.bind("inproc://review-a")
    pull = make(zmq.PULL)
    pull.connect("inproc://review-a")
    pull.close()
    assert _eventually_unwritable(push), "PUSH keeps writing into a pipe whose reader is gone"


def test_connecter_notices_binder_that_closed_before_attach(make):
    """The ATTACH command queued to the binder is never processed once it closes."""
    pull = make(zmq.PULL)
    pull.bind("inproc://review-b")
    push = make(zmq.PUSH)
    push.connect("inproc://review-b")
    pull.close()
    assert _eventually_unwritable(push)


def test_immediate_connecter_notices_binder_that_closed_before_attach(make):
    push = make(zmq.PUSH, IMMEDIATE=1)
    push.connect("inproc://review-c")
    pull = make(zmq.PULL)
    pull.bind("inproc://review-c")
    pull.close()
    assert _eventually_unwritable(push)


def test_binder_notices_pending_connecter_that_closed(make):
    pull = make(zmq.PULL)
    pull.connect("inproc://review-d")  # nobody bound yet: parked
    pull.close()
    push = make(zmq.PUSH)
    push.bind("inproc://review-d")
    assert _eventually_unwritable(push)


def test_dead_pipe_steals_round_robin_messages(make):
    """The consequence: a live peer gets only some of the messages, the rest vanish."""
    push = make(zmq.PUSH)
    push.bind("inproc://review-e")
    dead = make(zmq.PULL)
    dead.connect("inproc://review-e")
    dead.close()
    assert _eventually_unwritable(push)  # libzmq: the dead pipe is gone before we go on
    live = make(zmq.PULL)
    live.connect("inproc://review-e")
    for i in range(4):
        push.send(b"%d" % i)
    got = []
    while live.poll(200):
        got.append(live.recv())
    assert got == [b"0", b"1", b"2", b"3"]


# -- sockets dropped without close() ----------------------------------------------------------


def test_dropped_socket_is_closed_and_peer_sees_it(make, ctx):
    """pyzmq closes a socket when it is garbage.  A brokerless socket is a reference cycle
    (``_handlers`` holds bound methods) and is reachable from its peers' pipes, so it is never
    collected: its eventfd leaks and its peer keeps a pipe to it for ever."""
    push = make(zmq.PUSH)
    push.bind("inproc://review-f")
    pull = ctx.socket(zmq.PULL)
    pull.connect("inproc://review-f")
    del pull
    gc.collect()
    assert _eventually_unwritable(push)


def test_term_returns_when_a_socket_was_dropped_unclosed():
    """term() copies the WeakSet into a list, which keeps the dropped socket alive, so it can
    never be finalised: term() waits for ever."""
    context = zmq.Context()
    sock = context.socket(zmq.PUSH)
    sock.setsockopt(zmq.LINGER, 0)
    del sock
    done = threading.Event()

    def term() -> None:
        context.term()
        done.set()

    threading.Thread(target=term, daemon=True).start()
    assert done.wait(3), "Context.term() hangs on a socket that was dropped without close()"


def test_gc_finalising_a_socket_inside_destroy_does_not_deadlock():
    """Socket.__del__ -> close() -> Context._socket_closed takes Context._lock (non-reentrant).
    The cyclic GC can run that finalizer inside any allocation, including while the same thread
    holds that lock in destroy()/term() (``list(self._sockets)``): a self-deadlock.  The GC
    settings below only make the timing deterministic."""
    context = zmq.Context()
    done = threading.Event()
    old = gc.get_threshold()

    def run() -> None:
        gc.collect()
        sock = context.socket(zmq.PUSH)
        gc.collect(0)  # the socket now lives in generation 1
        gc.disable()
        del sock  # dropped unclosed
        gc.set_threshold(1, 1)
        gc.enable()
        context.destroy(linger=0)  # a gen-1 collection runs inside ``with self._lock``
        done.set()

    threading.Thread(target=run, daemon=True).start()
    try:
        finished = done.wait(5)
    finally:
        gc.set_threshold(*old)
        gc.enable()
    assert finished, "destroy() deadlocked in the socket finalizer"


# -- ROUTER handover ---------------------------------------------------------------------------


def test_router_handover_drops_the_replaced_connection(make):
    """Handover terminates the old pipe but leaves it in _pipes, the fair-queue and ``out``
    (under a generated id) for ever; what the old peer had queued is delivered under that
    random id.  libzmq stops reading a pipe it terminated."""
    router = make(zmq.ROUTER, ROUTER_HANDOVER=1)
    router.bind("inproc://review-g")
    old = make(zmq.DEALER, ROUTING_ID=b"A")
    old.connect("inproc://review-g")
    old.send(b"from-old")
    new = make(zmq.DEALER, ROUTING_ID=b"A")
    new.connect("inproc://review-g")
    new.send(b"from-new")
    got = []
    while router.poll(200):
        got.append(router.recv_multipart())
    assert got == [[b"A", b"from-new"]]


# -- a program that ends without closing what it sent through --------------------------------


def program(tmp_path, template: str, **fields: str) -> str:
    """``template`` as a script in ``tmp_path``, on the implementation under test (``module``
    in it), with ``fields`` filled in; its path."""
    script = tmp_path / "program.py"
    module = "zmq" if AGAINST_PYZMQ else "brokerless"
    script.write_text(textwrap.dedent(template.format(module=module, **fields)))
    return str(script)


def run_program(tmp_path, template: str, *args: str, **fields: str):
    """Run ``program(tmp_path, template, **fields)`` with ``args`` to its end (30 s at most:
    a hang fails the test); its CompletedProcess, output captured."""
    script = program(tmp_path, template, **fields)
    return subprocess.run([sys.executable, script, *args], capture_output=True, timeout=30)


_SENDER = """
import sys
import {module} as zmq

def send(endpoint):
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.connect(endpoint)
    for i in range(10):
        push.send(bytes([i]) * 1_000_000)
    return ctx, push

if sys.argv[2] == "main":
    def main():
        send(sys.argv[1])   # returns without close() or term()
    main()
else:
    kept = send(sys.argv[1])  # still referenced when the interpreter exits
"""


@pytest.mark.parametrize("where", ["main", "module"])
def test_messages_queued_by_a_program_that_exits_are_delivered(lmake, where, tmp_path):
    """The I/O thread is a daemon: a program that queues messages and returns from main()
    without closing anything must still deliver them (pyzmq does: the context is terminated
    at exit, which honours LINGER)."""
    pull = lmake(zmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    run_program(tmp_path, _SENDER, f"tcp://127.0.0.1:{port}", where).check_returncode()
    received = []
    while len(received) < 10 and pull.poll(20000):  # generous: the machine may be loaded
        received.append(pull.recv()[0])
    assert received == list(range(10))


_SENDER_TO_NOBODY = """
import sys
import {module} as zmq

ctx = zmq.Context()
sock = ctx.socket(zmq.{kind})
sock.connect(sys.argv[1])  # nobody listens there: refused, retried every 100 ms
sock.send(b"never delivered")
if sys.argv[2] == "closed":
    sock.close()  # default LINGER -1: it would wait for the peer forever
print("exiting", flush=True)
"""


@pytest.mark.parametrize("closed", ["open", "closed"])
@pytest.mark.parametrize("kind", ["PUSH", "DEALER", "REQ"])
def test_a_program_whose_messages_wait_for_a_peer_that_is_down_exits_at_once(
    kind, closed, tmp_path
):
    """What waits for a peer that refused the connection is dropped at exit, as pyzmq drops it
    (it leaves its contexts to die at exit): a client that gives up on a server that is down
    must be able to end.  Before, the exit waited for that peer forever (LINGER -1)."""
    with socket_module.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = run_program(tmp_path, _SENDER_TO_NOBODY, f"tcp://127.0.0.1:{port}", closed, kind=kind)
    assert (done.returncode, done.stdout) == (0, b"exiting\n"), done.stderr


_FORKING = """
import os, sys, time
import {module} as zmq

ctx = zmq.Context()
push = ctx.socket(zmq.PUSH)
push.connect("tcp://127.0.0.1:1")  # nobody there: its session keeps retrying
pull = ctx.socket(zmq.PULL)
pull.bind("tcp://127.0.0.1:*")
pid = os.fork()
if pid == 0:  # the child ends the copy of the parent's context it inherited
    start = time.monotonic()
    pull.close()
    push.close()
    ctx.term()
    os._exit(0 if time.monotonic() - start < 2 else 3)
print("child", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
ctx.destroy(linger=0)
"""


def test_a_forked_child_ends_the_context_it_inherited_at_once(tmp_path):
    """As pyzmq's: closing inherited sockets and terminating the inherited context in a forked
    child do nothing (the I/O thread that served them is the parent's).  brokerless's term()
    waited for sessions only the parent's I/O thread could end -- for ever -- and each close of
    a bound socket took a second."""
    done = run_program(tmp_path, _FORKING)
    assert (done.returncode, done.stdout) == (0, b"child 0\n"), done.stderr


_CHILD_SENDER = """
import os
import zmq as libzmq
import {module} as zmq

receiver_ctx = libzmq.Context()
pull = receiver_ctx.socket(libzmq.PULL)
pull.rcvtimeo = 1000
port = pull.bind_to_random_port("tcp://127.0.0.1")
ctx = zmq.Context()
push = ctx.socket(zmq.PUSH)
push.connect(f"tcp://127.0.0.1:{{port}}")
push.send(b"parent, before")
assert pull.recv() == b"parent, before"  # the connection is up, and idle
pid = os.fork()
if pid == 0:  # the child sends on the socket it inherited
    try:
        push.send(b"child", zmq.NOBLOCK)
    except zmq.ZMQError:
        pass
    os._exit(0)
os.waitpid(pid, 0)
push.send(b"parent, after")
got = []
try:
    while True:
        got.append(pull.recv())
except libzmq.Again:
    pass
print(got, flush=True)
ctx.destroy(linger=0)
receiver_ctx.destroy(linger=0)
"""


def test_a_forked_child_writes_nothing_on_the_connections_it_inherited(tmp_path):
    """As with pyzmq, what a forked child sends on an inherited socket goes nowhere: the
    connection is the parent's, and two processes writing one ZMTP stream would corrupt it.
    brokerless's child wrote its message straight onto the parent's idle connection."""
    done = run_program(tmp_path, _CHILD_SENDER)
    assert (done.returncode, done.stdout) == (0, b"[b'parent, after']\n"), done.stderr


_BOUND_SENDER = """
import sys
import {module} as zmq

def main():
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    print(push.bind_to_random_port("tcp://127.0.0.1"), flush=True)
    for i in range(20):
        push.send(bytes([i]) * 1_000_000)  # the first waits for the peer to connect
    print("sent", flush=True)  # and returns without close() or term()

main()
"""


def test_messages_queued_by_a_bound_socket_of_a_program_that_exits_are_delivered(lmake, tmp_path):
    """As above, for a socket that *bound*: closing it (here at exit) stops its listener, but
    the connections it accepted still deliver what was queued for them, within LINGER, as
    libzmq's do.  The receiver reads nothing until the sender has sent its last message, and
    holds at most one message meanwhile, so most of 20 MB are still in the sender as its main()
    returns (pyzmq closes there, brokerless at exit: a context and its sockets refer to each
    other, so they outlive main()).  Before the fix the bound socket's connections were closed
    at once, with what they held."""
    script = program(tmp_path, _BOUND_SENDER)
    sender = subprocess.Popen([sys.executable, script], stdout=subprocess.PIPE, text=True)
    try:
        port = int(sender.stdout.readline())
        pull = lmake(zmq.PULL)
        pull.rcvhwm = 1
        pull.rcvbuf = 65536
        pull.connect(f"tcp://127.0.0.1:{port}")
        assert sender.stdout.readline() == "sent\n"
        received = []
        while len(received) < 20 and pull.poll(20000):  # generous: the machine may be loaded
            received.append(pull.recv()[0])
        assert received == list(range(20))
        assert sender.wait(30) == 0
    finally:
        sender.kill()
        sender.wait(30)
