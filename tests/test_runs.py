"""Runs of equal-size messages (brokerless.runs): the decoder hands them on whole, the pipe counts
their messages against the HWM and its reader cuts them, and every socket receives them as the
messages they are -- over the fast path, the patterns' paths, filtered and prefixed -- from a
libzmq peer."""

from __future__ import annotations

import pytest
import zmq as libzmq

import brokerless as zmq
from brokerless.pipe import ACTIVATE_WRITE, pipepair
from brokerless.runs import Run
from brokerless.zmtp import FrameDecoder
from brokerless.zmtp.frames import LAZY_RUN_MIN

from .test_pipe import Owner, owned_pair
from .test_zmtp_codec import wire

pytestmark = pytest.mark.timeout(30)


def run_of(n: int, size: int = 5) -> Run:
    """A run of ``n`` messages b"00000", b"11111", ... at stride ``size + 2``."""
    msgs = [bytes([48 + i % 10]) * size for i in range(n)]
    return Run(b"".join(wire(m) for m in msgs), 2, size + 2, size, n)


# -- the decoder ---------------------------------------------------------------------------------


def cut(items: list) -> list:
    """Decoded items with every run cut into its messages."""
    return [m for i in items for m in (i.messages() if type(i) is Run else [i])]


def test_the_decoder_hands_runs_on_whole_and_everything_else_as_before():
    short = [bytes([i % 256]) * 100 for i in range(LAZY_RUN_MIN * 2)]
    long = [bytes([i % 256]) * 300 for i in range(LAZY_RUN_MIN * 2)]
    msgs = [*short, b"odd one", [b"multi", b"part"], *long, b"tail"]
    stream = b"".join(wire(m) for m in msgs)

    dec = FrameDecoder(runs=True)
    items = dec.feed(memoryview(bytearray(stream)))
    assert dec.runs
    assert cut(items) == msgs
    runs = [i for i in items if type(i) is Run]
    assert {r.size for r in runs} == {100, 300}  # short frames and long ones
    assert all(r.n >= LAZY_RUN_MIN for r in runs)

    assert FrameDecoder().feed(stream) == msgs  # by default: messages only
    assert dec.feed(wire(b"x")) == [b"x"] and not dec.runs  # said for each feed


def test_a_run_is_never_part_of_a_multipart_message_nor_shorter_than_lazy_run_min():
    msgs = [[b"a" * 10] * 3] * LAZY_RUN_MIN + [b"b" * 10] * (LAZY_RUN_MIN - 1)
    dec = FrameDecoder(runs=True)
    assert dec.feed(b"".join(wire(m) for m in msgs)) == msgs
    assert not dec.runs


# -- the pipe ------------------------------------------------------------------------------------


def test_the_pipe_counts_a_runs_messages_and_its_reader_cuts_it():
    a, b, writer, _ = owned_pair(hwm=9)  # capacity 10
    run = run_of(30)
    assert a.write_many([run], runs=True) == 1  # admitted as one item ...
    assert b.pending_in() == 30  # ... counted as its 30 messages
    assert not a.check_write() and a.write_many([b"x"], runs=True) == 0
    got = [b.read() for _ in range(24)]
    assert got == list(run.messages()[:24])
    assert writer.commands == []  # 6 left: above the low-water mark (5)
    assert b.read() == run.messages()[24]
    assert writer.commands == [ACTIVATE_WRITE]
    assert [b.read() for _ in range(5)] == list(run.messages()[25:])
    assert b.read() is None and b.pending_in() == 0


def test_a_run_written_one_message_at_a_time_and_one_dropped_unread_keep_the_count():
    a, b = pipepair((0, 0), (0, 0))
    a.owner, b.owner = Owner(), Owner()
    assert a.write(run_of(20)) and a.write(b"after")
    assert b.pending_in() == 21
    assert b.read() == b"00000" and b.pending_in() == 20
    b.drop_inbound()
    assert b.pending_in() == 0
    assert a.write_many([run_of(3)], runs=True) == 1 and b.pending_in() == 3


def test_a_conflating_pipe_keeps_only_a_runs_last_message():
    a, b = pipepair((0, 0), (0, 0), conflate=True)
    a.owner, b.owner = Owner(), Owner()
    assert a.write_many([b"first", run_of(12)], runs=True) == 2
    assert b.pending_in() == 1 and b.read() == b"11111"


# -- sockets, fed by libzmq ----------------------------------------------------------------------

BURST = 3000  # messages of one size: many runs, across reads


def bound(sock) -> str:
    """Bind ``sock`` to a free tcp port on 127.0.0.1; returns the endpoint."""
    return f"tcp://127.0.0.1:{sock.bind_to_random_port('tcp://127.0.0.1')}"


def burst(size: int) -> list[bytes]:
    return [i.to_bytes(4, "big") * (size // 4) for i in range(BURST)]


@pytest.fixture
def peer():
    ctx = libzmq.Context()
    yield ctx
    ctx.destroy(linger=0)


@pytest.mark.parametrize("size", [8, 100, 1024])
@pytest.mark.parametrize("how", ["recv", "recv_multipart", "copy=False", "poll"])
def test_a_pull_receives_bursts_of_equal_messages_in_order(ctx, peer, size, how):
    pull = ctx.socket(zmq.PULL)
    pull.rcvtimeo = 10_000
    push = peer.socket(libzmq.PUSH)
    push.sndhwm = 0  # the whole burst is sent before anything is received
    push.connect(bound(pull))
    sent = burst(size)
    for msg in sent:
        push.send(msg)
    got = []
    for _ in sent:
        if how == "recv":
            got.append(pull.recv())
        elif how == "recv_multipart":
            (part,) = pull.recv_multipart()
            got.append(part)
        elif how == "copy=False":
            got.append(pull.recv(copy=False).bytes)
        else:
            assert pull.poll(10_000) == zmq.POLLIN
            got.append(pull.recv(zmq.NOBLOCK))
    assert got == sent


@pytest.mark.parametrize("sender", ["libzmq", "brokerless"])
def test_a_curve_server_opens_every_box_of_a_burst_of_equal_messages(ctx, peer, sender):
    """Over CURVE every message travels as an equal-size box when the messages are of one
    size: the decoder must hand such a run on cut into boxes, which the connection opens, never
    as a Run (the boxes are not the messages).  It did, and the connection failed on it."""
    (_, server_secret), (client_public, client_secret) = zmq.curve_keypair(), zmq.curve_keypair()
    pull = ctx.socket(zmq.PULL)
    pull.rcvtimeo = 10_000
    pull.curve_server = True
    pull.curve_secretkey = server_secret
    address = bound(pull)
    impl = libzmq if sender == "libzmq" else zmq
    context = peer if sender == "libzmq" else ctx
    push = context.socket(impl.PUSH)
    push.sndhwm = 0
    push.curve_serverkey = zmq.curve_public(server_secret)
    push.curve_secretkey = client_secret
    push.curve_publickey = client_public
    push.connect(address)
    sent = burst(100)
    try:
        for msg in sent:
            push.send(msg)
        assert [pull.recv() for _ in sent] == sent
    finally:
        push.close(linger=0)


def test_a_pull_with_a_small_rcvhwm_gets_every_message_of_long_runs(ctx, peer):
    pull = ctx.socket(zmq.PULL)
    pull.rcvhwm = 10
    pull.rcvtimeo = 10_000
    push = peer.socket(libzmq.PUSH)
    push.sndhwm = 0  # what the PULL does not take waits in libzmq: sending never blocks
    push.connect(bound(pull))
    sent = burst(100) * 10
    for msg in sent:
        push.send(msg)
    assert [pull.recv() for _ in sent] == sent


def test_a_sub_filters_runs_message_by_message(ctx, peer):
    sub = ctx.socket(zmq.SUB)
    sub.rcvtimeo = 10_000
    sub.rcvhwm = 0  # lossless: nothing dropped at either end
    sub.subscribe(b"\x00\x00\x00")  # messages 0-255 of the burst (their first 3 octets are 0)
    pub = peer.socket(libzmq.PUB)
    pub.sndhwm = 0
    pub.bind("tcp://127.0.0.1:*")
    sub.connect(pub.last_endpoint.decode())
    while True:  # until the subscription is in place
        pub.send(b"\x00\x00\x00probe")
        if sub.poll(100):
            break
    while sub.poll(50):
        assert sub.recv() == b"\x00\x00\x00probe"
    sent = burst(100)
    for msg in sent:
        pub.send(msg)
    pub.send(b"\x00\x00\x00end")
    got = []
    while (msg := sub.recv()) != b"\x00\x00\x00end":
        got.append(msg)
    assert got == [m for m in sent if m.startswith(b"\x00\x00\x00")]
    assert len(got) == 256


def test_a_router_prefixes_every_message_of_a_run_with_its_peer(ctx, peer):
    router = ctx.socket(zmq.ROUTER)
    router.rcvtimeo = 10_000
    dealer = peer.socket(libzmq.DEALER)
    dealer.routing_id = b"peer-1"
    dealer.sndhwm = 0
    dealer.connect(bound(router))
    sent = burst(100)
    for msg in sent:
        dealer.send(msg)
    assert [router.recv_multipart() for _ in sent] == [[b"peer-1", m] for m in sent]
