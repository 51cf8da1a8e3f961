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
