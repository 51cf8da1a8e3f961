"""brokerless's I/O thread, where only it can go wrong: a Python thread that the garbage
collector may borrow to run finalizers.  (Not collected when the suite runs against pyzmq:
libzmq's I/O threads are not Python.)"""

from __future__ import annotations

import gc
import threading

import pytest

import brokerless as zmq

pytestmark = pytest.mark.timeout(60)


def test_a_socket_finalized_by_the_gc_on_the_io_thread_closes_without_deadlock():
    """The cyclic GC runs finalizers on whichever thread allocates -- the I/O thread too (seen
    in CI: a dropped socket collected while the I/O thread delivered messages).  Its close
    asked the I/O thread to stop its listener and waited for it: the I/O thread waited for
    itself, and every later close in the process with it."""
    context = zmq.Context()
    sock = context.socket(zmq.PULL)
    sock.linger = 0
    sock.bind("tcp://127.0.0.1:*")  # a listener: its close waits for the I/O thread
    endpoint = sock.last_endpoint.decode()
    collected = threading.Event()
    gc.disable()  # only the collection below may finalize it
    try:
        dropped = [sock]
        dropped.append(dropped)  # a cycle: the socket goes when the collector frees it
        del sock, dropped
        context._io_thread().call_soon(lambda _: (gc.collect(), collected.set()))
        assert collected.wait(10), "the I/O thread deadlocked closing a collected socket"
    finally:
        gc.enable()
    # The finalizer's close was queued for the I/O thread's next turn; its mailbox is FIFO, so
    # once a call queued now has run, so has the close.
    context._io_thread().call_and_wait(lambda _: None)
    again = context.socket(zmq.PULL)  # the endpoint is free again: the close completed
    again.linger = 0
    again.bind(endpoint)
    again.close()
    context.term()


def test_a_call_that_queues_another_leaves_the_thread_awake_for_the_next():
    """A call that queues a call (as an engine asking for its next batch does) signals the
    mailbox while the thread drains it; the thread takes that second call in the same drain.
    Resetting the mailbox's descriptor after the drain reset that signal with the mailbox left
    disarmed, so no later sender signalled again: the thread slept through every call after
    (seen as contexts whose term() never returned)."""
    from brokerless.io import IOThread

    io = IOThread("test-io-wake")
    try:
        for attempt in range(20):
            second, third = threading.Event(), threading.Event()
            io.call_soon(lambda event: io.call_soon(threading.Event.set, event), second)
            assert second.wait(5), f"attempt {attempt}: the queued call did not run"
            io.call_soon(threading.Event.set, third)
            assert third.wait(5), f"attempt {attempt}: the thread slept through a call"
    finally:
        io.stop()
        io.join(10)


def test_a_handler_whose_descriptor_an_earlier_handler_stopped_watching_is_not_run():
    """Two descriptors ready in the same turn, each one's handler unregistering the other (as a
    handler closing another connection does): only the first may run.  The second's event was
    read before it was unregistered; running its handler anyway acted on a descriptor nobody
    watched any more (a listener told to stop accepting, a closed or reused descriptor)."""
    import selectors
    import socket

    from brokerless.io import IOThread

    io = IOThread("test-io-stale")
    pairs = [socket.socketpair() for _ in range(2)]
    watched = [ours for ours, _ in pairs]
    ran: list[int] = []

    def handler(i: int):
        def on_ready(_mask: int) -> None:
            ran.append(i)
            io.unregister(watched[1 - i])
            io.unregister(watched[i])

        return on_ready

    try:
        for i, sock in enumerate(watched):
            io.call_and_wait(lambda s, i=i: io.register(s, selectors.EVENT_READ, handler(i)), sock)
        # Hold the thread while both become readable, so one turn reports both.
        entered, gate = threading.Event(), threading.Event()
        io.call_soon(lambda _: (entered.set(), gate.wait(10)))
        assert entered.wait(10)
        for _, theirs in pairs:
            theirs.send(b"x")
        gate.set()
        io.call_and_wait(lambda _: None)  # queued after the turn that reports both: it ran
        io.call_and_wait(lambda _: None)
        assert len(ran) == 1, f"handlers run: {ran} (the second's descriptor was unwatched)"
    finally:
        io.stop()
        io.join(10)
        for pair in pairs:
            for sock in pair:
                sock.close()


@pytest.mark.parametrize("transport", ["tcp", "ipc"])
def test_a_burst_sent_to_a_peer_of_the_same_context_arrives_in_one_piece(transport, tmp_path):
    """A PUSH that sends ten messages at once to a PULL of the same context: once the PULL has
    the first, the other nine are there too, as with libzmq, whose I/O thread writes the burst
    in one batch (pyzmq's test_zmqstream.py::test_shadow_socket_close counts on it).  The
    socket's thread writes the first itself (direct output) and queues the rest for the I/O
    thread; when the I/O thread read the first before writing the rest -- its ready handlers
    ran before its queued calls -- the first always arrived alone.  Whether the I/O thread
    wins the GIL during the direct write's own system call is up to the OS, so this asks for
    most bursts, not all (20 of 20 in 16 runs here, one or two CPUs busy or not; before, 0-2
    of 20 over tcp, 8-14 over ipc)."""
    context = zmq.Context()
    whole = 0
    try:
        for trial in range(20):
            push, pull = context.socket(zmq.PUSH), context.socket(zmq.PULL)
            push.linger = pull.linger = 0
            if transport == "tcp":
                port = push.bind_to_random_port("tcp://127.0.0.1")
                endpoint = f"tcp://127.0.0.1:{port}"
            else:
                endpoint = f"ipc://{tmp_path}/burst-{trial}"
                push.bind(endpoint)
            pull.connect(endpoint)
            pull.rcvtimeo = 10_000
            push.send(b"up")  # the connection is up and idle when the burst starts
            assert pull.recv() == b"up"
            for i in range(10):
                push.send(b"%d" % i)
            assert pull.recv() == b"0"
            if pull.poll(0):
                whole += 1
            received = [pull.recv() for _ in range(9)]  # all come, whole or not
            assert received == [b"%d" % i for i in range(1, 10)]
            push.close()
            pull.close()
    finally:
        context.term()
    assert whole >= 17, f"only {whole} of 20 bursts were there once the first was received"
