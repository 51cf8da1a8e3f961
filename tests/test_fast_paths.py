"""``recv`` on a socket with one pipe whose pattern passes messages through (PULL, DEALER,
PAIR) takes single-part messages from the pipe itself, and ``send`` on one whose pattern sends
them through (PUSH, DEALER, PAIR) queues them there itself: the same messages, in the same
order, with the same end-of-stream, HWM and termination behaviour as the pattern's own path."""

from __future__ import annotations

import threading

import pytest

import brokerless as zmq

from .helpers import recv_within

PAIRS = [(zmq.PUSH, zmq.PULL), (zmq.DEALER, zmq.DEALER), (zmq.PAIR, zmq.PAIR)]


def fast_path(sock, expected: bool, lane: str = "_inlane") -> bool:
    """Whether ``recv`` takes messages from the pipe itself (``send``, with ``_outlane``), as
    ``expected`` (against libzmq, BROKERLESS_TEST_AGAINST=pyzmq, there is no such path)."""
    if not hasattr(sock, lane):
        return True
    return (getattr(sock, lane) is not None) == expected


def push_pull(ctx, endpoint: str):
    """A PULL bound at ``endpoint`` and a PUSH connected to it."""
    pull = ctx.socket(zmq.PULL)
    pull.bind(endpoint)
    push = ctx.socket(zmq.PUSH)
    push.connect(endpoint)
    return pull, push


@pytest.fixture(params=["inproc", "tcp"])
def link(request, ctx):
    """Yields a function making a connected (sender, receiver) of the given types."""

    def make(sender_type: int, receiver_type: int):
        receiver = ctx.socket(receiver_type)
        sender = ctx.socket(sender_type)
        if request.param == "inproc":
            receiver.bind(f"inproc://fast-{id(receiver)}")
        else:
            receiver.bind("tcp://127.0.0.1:*")
        sender.connect(receiver.LAST_ENDPOINT.decode())
        return sender, receiver

    return make


@pytest.mark.parametrize(("sender_type", "receiver_type"), PAIRS)
def test_single_and_multipart_messages_keep_their_order(link, sender_type, receiver_type):
    sender, receiver = link(sender_type, receiver_type)
    sender.send(b"a")
    sender.send_multipart([b"b1", b"b2", b"b3"])
    sender.send(b"")
    sender.send(b"c")
    assert recv_within(receiver) == b"a"
    assert fast_path(receiver, True)
    assert receiver.recv() == b"b1" and receiver.RCVMORE
    assert receiver.recv() == b"b2" and receiver.RCVMORE
    assert receiver.recv() == b"b3" and not receiver.RCVMORE
    assert receiver.recv() == b""
    assert receiver.recv() == b"c"
    with pytest.raises(zmq.Again):
        receiver.recv(zmq.NOBLOCK)


def test_a_terminated_context_fails_recv_though_messages_are_queued(ctx):
    pull, push = push_pull(ctx, "inproc://fast-term")
    for i in range(10):
        push.send(b"%d" % i)
    assert pull.recv() == b"0"
    push.close()
    term = threading.Thread(target=ctx.term)
    term.start()
    try:
        with pytest.raises(zmq.ContextTerminated):
            for _ in range(10):
                pull.recv()  # the STOP command is seen before the next queued message
    finally:
        pull.close()
        term.join(10)
    assert not term.is_alive()


def test_the_pipe_ends_after_its_queued_messages(ctx):
    pull, push = push_pull(ctx, "inproc://fast-end")
    push.send(b"last")
    assert recv_within(pull) == b"last"
    push.send(b"after")
    push.close()  # its delimiter follows "after" in the pipe
    assert pull.recv() == b"after"
    pull.rcvtimeo = 50
    with pytest.raises(zmq.Again):
        pull.recv()
    assert fast_path(pull, False)  # the pipe is gone


def test_a_second_peer_turns_the_fast_path_off_and_both_are_served(ctx):
    pull, first = push_pull(ctx, "inproc://fast-two")
    first.send(b"1")
    assert recv_within(pull) == b"1"
    assert fast_path(pull, True)
    second = ctx.socket(zmq.PUSH)
    second.connect("inproc://fast-two")
    first.send(b"a")
    second.send(b"b")
    got = {pull.recv(), pull.recv()}
    assert got == {b"a", b"b"}
    assert fast_path(pull, False)


@pytest.mark.beyond_libzmq
@pytest.mark.parametrize("sender_type", [zmq.PUSH, zmq.DEALER])
def test_send_to_a_peer_that_left_is_not_lost_silently(ctx, sender_type):
    """The only peer closed: the next send finds no pipe (EAGAIN), it is not queued in the
    dead pipe as if delivered.  (libzmq looks at its commands only now and then while sending,
    so it may still queue it there: lost.)"""
    receiver = ctx.socket(zmq.PULL if sender_type == zmq.PUSH else zmq.DEALER)
    receiver.bind("inproc://fast-gone")
    sender = ctx.socket(sender_type)
    sender.connect("inproc://fast-gone")
    sender.send(b"seen")
    assert recv_within(receiver) == b"seen"
    assert fast_path(sender, True, "_outlane")
    receiver.close()
    with pytest.raises(zmq.Again):
        sender.send(b"lost?", zmq.NOBLOCK)


def test_send_stops_at_the_hwm_and_goes_on_once_drained(ctx):
    pull = ctx.socket(zmq.PULL)
    pull.rcvhwm = 3
    pull.bind("inproc://fast-hwm")
    push = ctx.socket(zmq.PUSH)
    push.sndhwm = 2
    push.connect("inproc://fast-hwm")
    sent = 0
    with pytest.raises(zmq.Again):
        while sent < 100:
            push.send(b"%d" % sent, zmq.NOBLOCK)
            sent += 1
    assert sent == 5  # SNDHWM + RCVHWM over inproc
    assert [pull.recv() for _ in range(sent)] == [b"%d" % i for i in range(sent)]
    push.sndtimeo = 2000  # the room made by the reader is announced to the writer by a command
    push.send(b"more")
    assert pull.recv() == b"more"


def test_a_sub_takes_everything_itself_only_while_subscribed_to_everything(ctx):
    pub = ctx.socket(zmq.PUB)
    pub.bind("inproc://fast-sub")
    sub = ctx.socket(zmq.SUB)
    sub.connect("inproc://fast-sub")
    sub.subscribe(b"")
    sub.rcvtimeo = 2000
    assert fast_path(sub, True)
    pub.send(b"any")
    assert sub.recv() == b"any"
    sub.subscribe(b"a")  # everything still passes
    assert fast_path(sub, True)
    sub.unsubscribe(b"")  # now only "a...": filtered by the pattern
    assert fast_path(sub, False)
    for topic in (b"b1", b"a1", b"b2", b"a2"):
        pub.send(topic)
    assert [sub.recv(), sub.recv()] == [b"a1", b"a2"]


def test_a_message_a_poll_held_back_comes_first_when_everything_passes_again(ctx):
    """A SUB that filtered looked ahead for a matching message (poll); subscribing to
    everything then must not let the messages behind it overtake it."""
    pub = ctx.socket(zmq.PUB)
    pub.bind("inproc://fast-held")
    sub = ctx.socket(zmq.SUB)
    sub.connect("inproc://fast-held")
    sub.subscribe(b"a")
    sub.rcvtimeo = 2000
    for topic in (b"a-first", b"a-second", b"a-third"):
        pub.send(topic)
    assert sub.poll(2000) == zmq.POLLIN  # the SUB holds "a-first" now
    sub.subscribe(b"")
    assert [sub.recv(), sub.recv(), sub.recv()] == [b"a-first", b"a-second", b"a-third"]


def test_invert_matching_is_never_passed_through(ctx):
    pub = ctx.socket(zmq.PUB)
    pub.bind("inproc://fast-invert")
    sub = ctx.socket(zmq.SUB)
    sub.invert_matching = 1
    pub.invert_matching = 1
    sub.connect("inproc://fast-invert")
    sub.subscribe(b"")  # inverted: nothing passes
    sub.subscribe(b"")
    assert fast_path(sub, False)
