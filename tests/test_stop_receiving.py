"""``Socket.stop_receiving()`` (brokerless only): the socket takes nothing more from the network
and queues for ``recv`` every message that had come in whole -- in its pipe and decoded but
waiting for room below RCVHWM -- while its connections stay up for what it sends.

The peer is libzmq (pyzmq), flooding a receiver that does not read.  Which messages the
receiving process took off the network is asked of the kernel (``tcp_accounting``): the bytes it
read, past the handshake, divided by the size of one frame.  So "every message that came in"
is an exact count, not a guess.
"""

from __future__ import annotations

import gc
import threading

import pytest
import zmq as libzmq
from zmq.utils.monitor import recv_monitor_message

import brokerless as zmq

from .stream_topologies import wait_for
from .tcp_accounting import connection

pytestmark = [pytest.mark.beyond_libzmq, pytest.mark.timeout(60)]

BODY = 100  # bytes: a short ZMTP frame of 2 + 100 bytes
FRAME = 2 + BODY
WAIT = 20.0


def message(i: int) -> bytes:
    return b"%010d" % i + bytes(BODY - 10)


def handshake(push: libzmq.Socket, monitor: libzmq.Socket) -> None:
    try:
        assert monitor.poll(int(WAIT * 1000)), "no handshake"
        assert recv_monitor_message(monitor)["event"] == libzmq.EVENT_HANDSHAKE_SUCCEEDED
    finally:
        push.disable_monitor()
        monitor.close(linger=0)


@pytest.mark.parametrize("receiver_binds", [True, False], ids=["bound", "connected"])
def test_every_message_that_came_in_is_received_and_no_more(make, lmake, receiver_binds):
    pull = make(zmq.PULL, RCVHWM=50)
    push = lmake(libzmq.PUSH, SNDHWM=100_000)
    monitor = push.get_monitor_socket(libzmq.EVENT_HANDSHAKE_SUCCEEDED)  # before it connects
    if receiver_binds:
        port = pull.bind_to_random_port("tcp://127.0.0.1")
        push.connect(f"tcp://127.0.0.1:{port}")
    else:
        port = push.bind_to_random_port("tcp://127.0.0.1")
        pull.connect(f"tcp://127.0.0.1:{port}")
    handshake(push, monitor)

    def receiving_end():
        ends = [c for c in _ends(port, receiver_binds) if c is not None]
        return ends[0] if ends else None

    # Everything the peer sent so far is its greeting and READY: once read, that is the start.
    start = wait_for(
        lambda: (end := receiving_end()) and end.recv_q == 0 and end.consumed, WAIT, "the handshake"
    )
    sent = 0
    while sent < 20_000:  # far more than the pipe, the engine and the kernels hold
        try:
            push.send(message(sent), libzmq.NOBLOCK)
        except libzmq.Again:
            break
        sent += 1
    # The receiver reads nothing: its pipe fills, its engine holds a decoded batch, and the
    # kernel buffers the rest.
    wait_for(lambda: (end := receiving_end()) and end.recv_q > 0, WAIT, "the kernel to hold data")
    pull.stop_receiving()
    read = receiving_end().consumed - start  # no longer moves: nothing is read any more
    got = []
    while True:
        try:
            got.append(pull.recv(zmq.NOBLOCK))
        except zmq.Again:
            break
    assert got == [message(i) for i in range(read // FRAME)]  # every whole one, in order
    assert len(got) > 50  # more than the pipe held: the engine's decoded batch too
    assert not pull.poll(300)  # nothing more arrives ...
    assert receiving_end().consumed - start == read  # ... and nothing more is read


def _ends(port: int, receiver_binds: bool):
    """The receiving end of the one connection: the socket at ``port`` when the receiver bound
    it, else the end whose peer is ``port``."""
    if receiver_binds:
        return [connection(port)]
    sender = connection(port)
    return [connection(sender.peer_port, port)] if sender is not None else []


def test_a_socket_that_stopped_receiving_still_sends(make, lmake):
    router = make(zmq.ROUTER)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    dealer = lmake(libzmq.DEALER)
    dealer.connect(f"tcp://127.0.0.1:{port}")
    dealer.send(b"question")
    peer, question = router.recv_multipart()
    router.stop_receiving()
    router.send_multipart([peer, b"answer to " + question])
    assert dealer.recv() == b"answer to question"
    dealer.send(b"too late")
    assert not router.poll(300)


def test_a_socket_that_stopped_receiving_between_connections_still_terminates(lmake):
    """The peer went away and the socket waits to reconnect when it stops receiving: the
    session that would have reconnected ends, so its context terminates."""
    push = lmake(libzmq.PUSH)
    port = push.bind_to_random_port("tcp://127.0.0.1")
    context = zmq.Context()
    pull = context.socket(zmq.PULL)
    monitor = pull.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED)
    pull.connect(f"tcp://127.0.0.1:{port}")
    push.send(b"before")
    assert pull.recv() == b"before"
    push.close(linger=0)  # the peer goes away: the socket will try to reconnect
    events = []
    while zmq.EVENT_DISCONNECTED not in events:
        assert monitor.poll(int(WAIT * 1000)), f"no disconnection: {events}"
        events.append(recv_monitor_message(monitor)["event"])
    pull.stop_receiving()
    pull.disable_monitor()
    monitor.close(linger=0)
    pull.close(linger=0)
    gc.collect()  # whatever nothing holds any more is gone
    ended = threading.Thread(target=context.term, daemon=True)
    ended.start()
    ended.join(WAIT)
    assert not ended.is_alive(), "the context waits for a session that will never end"
