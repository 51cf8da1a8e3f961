"""Context.term() while other threads are blocked on the context's sockets.

Each blocked call gets ContextTerminated (errno ETERM); the thread then closes its socket and
term() returns.  Every blocking call is bounded (5 s), so a missing ETERM shows as zmq.Again or
an empty poll result, not as a hang.
"""

from __future__ import annotations

import threading

import pytest

import brokerless as zmq
from tests.helpers import WIRE_BEYOND_LIBZMQ

BOUND_MS = 5000


class Blocked:
    """Runs ``block(sock)`` in a thread on a socket made by ``setup(ctx)``, closing it after."""

    def __init__(self, ctx, setup, block):
        self.ready = threading.Event()
        self.outcome: dict = {}
        self.thread = threading.Thread(target=self._run, args=(ctx, setup, block), daemon=True)
        self.thread.start()
        assert self.ready.wait(5), "the blocking thread did not start"
        self.thread.join(0.1)  # give it time to block: it must still be waiting
        assert self.thread.is_alive(), f"the call did not block: {self.outcome}"

    def _run(self, ctx, setup, block):
        sock = setup(ctx)
        try:
            self.ready.set()
            self.outcome["result"] = block(sock)
        except BaseException as exc:
            self.outcome["error"] = exc
            try:
                sock.recv(zmq.NOBLOCK)
            except BaseException as again:
                self.outcome["error after"] = again
        finally:
            sock.close(linger=0)

    def join(self):
        self.thread.join(BOUND_MS / 1000 + 5)
        assert not self.thread.is_alive(), "the blocked thread never returned"

    def assert_got_eterm(self):
        error = self.outcome.get("error")
        assert isinstance(error, zmq.ContextTerminated), f"expected ETERM, got {self.outcome}"
        assert isinstance(error, zmq.ZMQError)
        assert error.errno == zmq.ETERM


def start_term(ctx) -> threading.Thread:
    terminator = threading.Thread(target=ctx.term, daemon=True)
    terminator.start()
    return terminator


def assert_term_returns(terminator, ctx):
    terminator.join(5)
    assert not terminator.is_alive(), "term() did not return after the sockets were closed"
    assert ctx.closed


def bound_pull(endpoint):
    def setup(ctx):
        sock = ctx.socket(zmq.PULL)
        sock.rcvtimeo = BOUND_MS
        sock.bind(endpoint)
        return sock

    return setup


def poll_with(sock):
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    return poller.poll(BOUND_MS)


@pytest.mark.parametrize(
    "block",
    [
        lambda s: s.recv(),
        lambda s: s.recv_multipart(),
        lambda s: s.recv_string(),
        lambda s: s.recv_into(bytearray(8)),
    ],
    ids=["recv", "recv_multipart", "recv_string", "recv_into"],
)
def test_term_interrupts_a_blocked_recv(ctx, endpoint, block):
    blocked = Blocked(ctx, bound_pull(endpoint()), block)
    terminator = start_term(ctx)
    blocked.join()
    blocked.assert_got_eterm()
    assert_term_returns(terminator, ctx)


def test_socket_keeps_raising_eterm_until_closed(ctx, endpoint):
    blocked = Blocked(ctx, bound_pull(endpoint()), lambda s: s.recv())
    terminator = start_term(ctx)
    blocked.join()
    again = blocked.outcome.get("error after")
    assert isinstance(again, zmq.ContextTerminated), blocked.outcome
    assert_term_returns(terminator, ctx)


def test_term_waits_until_the_interrupted_thread_closes_its_socket(ctx, endpoint):
    may_close = threading.Event()
    got_eterm = threading.Event()

    def block(sock):
        try:
            sock.recv()
        except zmq.ContextTerminated:
            got_eterm.set()
            assert may_close.wait(10)
            raise

    blocked = Blocked(ctx, bound_pull(endpoint()), block)
    terminator = start_term(ctx)
    assert got_eterm.wait(BOUND_MS / 1000 + 5), f"no ETERM: {blocked.outcome}"
    terminator.join(0.2)
    assert terminator.is_alive(), "term() returned while the socket was still open"
    may_close.set()
    blocked.join()
    assert_term_returns(terminator, ctx)


def test_term_interrupts_a_blocked_poller(ctx, endpoint):
    blocked = Blocked(ctx, bound_pull(endpoint()), poll_with)
    terminator = start_term(ctx)
    blocked.join()
    blocked.assert_got_eterm()
    assert_term_returns(terminator, ctx)


def test_term_interrupts_a_blocked_socket_poll(ctx, endpoint):
    blocked = Blocked(ctx, bound_pull(endpoint()), lambda s: s.poll(BOUND_MS))
    terminator = start_term(ctx)
    blocked.join()
    blocked.assert_got_eterm()
    assert_term_returns(terminator, ctx)


def test_term_interrupts_a_blocked_select(ctx, endpoint):
    blocked = Blocked(
        ctx, bound_pull(endpoint()), lambda s: zmq.select([s], [], [], BOUND_MS / 1000)
    )
    terminator = start_term(ctx)
    blocked.join()
    blocked.assert_got_eterm()
    assert_term_returns(terminator, ctx)


@pytest.mark.parametrize("transport", WIRE_BEYOND_LIBZMQ)
def test_term_interrupts_a_send_blocked_at_the_high_water_mark(ctx, endpoint):
    addr = endpoint()
    pull = ctx.socket(zmq.PULL)  # owned by this thread; never reads
    pull.rcvhwm = 1
    pull.bind(addr)

    def full_push(ctx):
        push = ctx.socket(zmq.PUSH)
        push.sndhwm = 1
        push.sndtimeo = BOUND_MS
        push.connect(addr)
        payload = b"f" * 65536  # over ipc/tcp the kernel's buffers must fill up too
        for _ in range(10_000):
            try:
                push.send(payload, zmq.NOBLOCK)
            except zmq.Again:
                if not push.poll(200, zmq.POLLOUT):  # no room comes back: truly blocked
                    return push
        raise AssertionError("the PUSH never blocked at its high-water mark")

    blocked = Blocked(ctx, full_push, lambda s: s.send(b"one too many"))
    terminator = start_term(ctx)
    blocked.join()  # before the PULL closes: the ETERM cannot come from losing the peer
    blocked.assert_got_eterm()
    with pytest.raises(zmq.ContextTerminated):
        pull.recv(zmq.NOBLOCK)
    pull.close(linger=0)
    assert_term_returns(terminator, ctx)


def test_term_interrupts_a_send_with_no_peer(ctx):
    def lonely_push(ctx):
        push = ctx.socket(zmq.PUSH)
        push.sndtimeo = BOUND_MS
        return push

    blocked = Blocked(ctx, lonely_push, lambda s: s.send(b"nobody"))
    terminator = start_term(ctx)
    blocked.join()
    blocked.assert_got_eterm()
    assert_term_returns(terminator, ctx)


def test_term_interrupts_blocked_threads_on_several_sockets(ctx, endpoint):
    blocked = [Blocked(ctx, bound_pull(endpoint()), lambda s: s.recv()) for _ in range(3)]
    terminator = start_term(ctx)
    for b in blocked:
        b.join()
        b.assert_got_eterm()
    assert_term_returns(terminator, ctx)


def test_nonblocking_calls_after_term_started_raise_eterm(ctx, endpoint):
    pull = ctx.socket(zmq.PULL)
    pull.bind(endpoint())
    terminator = start_term(ctx)
    terminator.join(0.2)
    assert terminator.is_alive()
    with pytest.raises(zmq.ContextTerminated):
        pull.recv(zmq.NOBLOCK)
    with pytest.raises(zmq.ContextTerminated):
        pull.poll(0)
    pull.close()
    assert_term_returns(terminator, ctx)


@pytest.mark.parametrize("kind", ["SUB", "XSUB"])
def test_a_subscriber_does_not_hold_term_for_a_publisher_that_left(ctx, kind):
    """libzmq gives SUB and XSUB a default LINGER of 0 (other sockets: -1): subscriptions still
    queued for a publisher that has gone do not hold term() for ever."""
    subscriber_ctx = zmq.Context()
    sub = subscriber_ctx.socket(getattr(zmq, kind))
    assert sub.getsockopt(zmq.LINGER) == 0

    def subscribe(topic: bytes) -> None:
        if kind == "XSUB":
            sub.send(b"\x01" + topic)
        else:
            sub.subscribe(topic)

    publisher = ctx.socket(zmq.XPUB)
    port = publisher.bind_to_random_port("tcp://127.0.0.1")
    monitor = sub.get_monitor_socket(zmq.EVENT_DISCONNECTED)
    sub.connect(f"tcp://127.0.0.1:{port}")
    subscribe(b"first")
    assert publisher.poll(BOUND_MS), "the subscription never reached the publisher"
    assert publisher.recv() == b"\x01first"
    publisher.close(linger=0)
    assert monitor.poll(BOUND_MS), "the subscriber never saw the publisher leave"
    sub.disable_monitor()
    monitor.close()
    subscribe(b"second")  # for a publisher that is gone
    sub.close()
    assert_term_returns(start_term(subscriber_ctx), subscriber_ctx)
