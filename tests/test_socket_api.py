"""The Socket API: lifecycle, endpoints, and every send/recv flavour pyzmq offers."""

from __future__ import annotations

import array
import errno
import pickle
import threading

import pytest

import brokerless as zmq
from tests.helpers import bind, connect, recv_within


@pytest.fixture
def pair(make, endpoint):
    """Two connected PAIR sockets (sender, receiver)."""
    a, b = make(zmq.PAIR), make(zmq.PAIR)
    connect(b, bind(a, endpoint()), a)
    return a, b


# -- lifecycle -------------------------------------------------------------------------------


def test_new_socket_is_open(make):
    assert make(zmq.PAIR).closed is False


def test_close_marks_the_socket_closed(ctx):
    sock = ctx.socket(zmq.PAIR)
    sock.close()
    assert sock.closed is True


def test_close_with_linger_zero_drops_undeliverable_messages(ctx, endpoint):
    push = ctx.socket(zmq.PUSH)  # LINGER defaults to -1: keep trying to deliver forever
    push.connect(endpoint())  # nobody binds: the message below can never be delivered
    push.send(b"undeliverable")
    push.close(linger=0)
    assert push.closed
    terminator = threading.Thread(target=ctx.term, daemon=True)
    terminator.start()
    terminator.join(5)
    assert not terminator.is_alive(), "term() waited for a message close(linger=0) dropped"


def test_socket_as_context_manager_closes_it(ctx):
    with ctx.socket(zmq.PAIR) as sock:
        assert not sock.closed
    assert sock.closed


def test_socket_context_manager_closes_on_error(ctx):
    with pytest.raises(RuntimeError), ctx.socket(zmq.PAIR) as sock:
        raise RuntimeError("boom")
    assert sock.closed


def test_socket_knows_its_context(ctx, make):
    assert make(zmq.PAIR).context is ctx


def test_socket_class_can_be_instantiated_directly(ctx):
    sock = zmq.Socket(ctx, zmq.PULL)
    try:
        assert sock.type == zmq.PULL
        assert not sock.closed
    finally:
        sock.close(linger=0)


def test_context_socket_accepts_a_socket_subclass(ctx):
    class Tagged(zmq.Socket):
        pass

    sock = ctx.socket(zmq.PAIR, socket_class=Tagged)
    try:
        assert isinstance(sock, Tagged)
        assert sock.type == zmq.PAIR
    finally:
        sock.close(linger=0)


# -- endpoints -------------------------------------------------------------------------------


def test_bind_connect_and_exchange(pair):
    a, b = pair
    a.send(b"ping")
    assert recv_within(b) == b"ping"
    b.send(b"pong")
    assert recv_within(a) == b"pong"


def test_one_socket_binds_several_endpoints(make, endpoint):
    pull = make(zmq.PULL)
    first, second = bind(pull, endpoint()), bind(pull, endpoint())
    push1, push2 = make(zmq.PUSH), make(zmq.PUSH)
    push1.connect(first)
    push2.connect(second)
    push1.send(b"via first")
    push2.send(b"via second")
    assert {recv_within(pull), recv_within(pull)} == {b"via first", b"via second"}


def test_unbind_stops_new_connections(make, endpoint):
    pull, push = make(zmq.PULL), make(zmq.PUSH)
    addr = bind(pull, endpoint())
    pull.unbind(addr)
    push.connect(addr)  # now an unbound inproc name: the message waits for a binder
    push.send(b"after unbind")
    assert pull.poll(100) == 0
    rebound = make(zmq.PULL)
    rebound.bind(addr)
    assert recv_within(rebound) == b"after unbind"


def test_disconnect_stops_sending_to_that_peer(make, endpoint):
    kept, dropped, push = make(zmq.PULL), make(zmq.PULL), make(zmq.PUSH)
    kept_addr, dropped_addr = bind(kept, endpoint()), bind(dropped, endpoint())
    push.connect(kept_addr)
    push.connect(dropped_addr)
    push.disconnect(dropped_addr)
    for i in range(4):
        push.send(b"%d" % i)
    assert [recv_within(kept) for _ in range(4)] == [b"0", b"1", b"2", b"3"]
    assert dropped.poll(50) == 0


# -- send / recv -----------------------------------------------------------------------------


def test_send_and_recv_bytes(pair):
    a, b = pair
    a.send(b"bytes")
    assert recv_within(b) == b"bytes"


def test_empty_message(pair):
    a, b = pair
    a.send(b"")
    assert recv_within(b) == b""


def test_recv_returns_bytes(pair):
    a, b = pair
    a.send(bytearray(b"data"))
    assert type(recv_within(b)) is bytes


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (bytearray(b"bytearray"), b"bytearray"),
        (memoryview(b"memoryview"), b"memoryview"),
        (memoryview(b"_slice_")[1:-1], b"slice"),
        (array.array("B", [1, 2, 3]), b"\x01\x02\x03"),
        (array.array("i", [1]), array.array("i", [1]).tobytes()),
    ],
    ids=["bytearray", "memoryview", "memoryview-slice", "array-B", "array-i"],
)
def test_any_buffer_can_be_sent(pair, payload, expected):
    a, b = pair
    a.send(payload)
    assert recv_within(b) == expected


def test_sent_buffer_can_change_afterwards(pair):
    a, b = pair
    data = bytearray(b"original")
    a.send(data)
    data[:] = b"modified"
    assert recv_within(b) == b"original"


def test_sending_a_frame(pair):
    a, b = pair
    a.send(zmq.Frame(b"in a frame"))
    assert recv_within(b) == b"in a frame"


@pytest.mark.parametrize("bad", ["text", 5, None, {}], ids=["str", "int", "None", "dict"])
def test_sending_a_non_buffer_raises_type_error(pair, bad):
    a, _ = pair
    with pytest.raises(TypeError) as info:
        a.send(bad)
    assert str(info.value)


def test_sending_str_names_send_string_as_the_way_out(pair):
    a, _ = pair
    with pytest.raises(TypeError, match="send_string"):
        a.send("text")


def test_recv_copy_false_returns_a_frame(pair):
    a, b = pair
    a.send(b"framed")
    assert b.poll(2000)
    frame = b.recv(copy=False)
    assert isinstance(frame, zmq.Frame)
    assert frame.bytes == b"framed"
    assert isinstance(frame.buffer, memoryview)
    assert frame.buffer.tobytes() == b"framed"
    assert bytes(frame) == b"framed"
    assert len(frame) == 6
    assert frame.more is False


def test_frame_more_marks_all_but_the_last_part(pair):
    a, b = pair
    a.send_multipart([b"1", b"2", b"3"])
    assert b.poll(2000)
    frames = b.recv_multipart(copy=False)
    assert all(isinstance(f, zmq.Frame) for f in frames)
    assert [f.bytes for f in frames] == [b"1", b"2", b"3"]
    assert [f.more for f in frames] == [True, True, False]


def test_frame_built_by_hand():
    frame = zmq.Frame(b"hand made")
    assert frame.bytes == b"hand made"
    assert frame.more is False


def test_send_copy_false_delivers_the_same_bytes(pair):
    a, b = pair
    a.send(b"zero copy", copy=False)
    assert recv_within(b) == b"zero copy"


def test_tracked_send_is_done_once_the_message_is_consumed(pair):
    a, b = pair
    tracker = a.send(b"x" * 100_000, copy=False, track=True)
    assert recv_within(b) == b"x" * 100_000
    tracker.wait(2)
    assert tracker.done


def test_send_returns_none_by_default(pair):
    a, b = pair
    assert a.send(b"plain") is None
    recv_within(b)


def test_multipart_round_trip(pair):
    a, b = pair
    a.send_multipart([b"a", b"", bytearray(b"c"), memoryview(b"d"), zmq.Frame(b"e")])
    assert recv_within(b, multipart=True) == [b"a", b"", b"c", b"d", b"e"]


def test_sndmore_builds_a_multipart_message(pair):
    a, b = pair
    a.send(b"first", zmq.SNDMORE)
    a.send(b"second", flags=zmq.SNDMORE)
    a.send(b"last")
    assert recv_within(b, multipart=True) == [b"first", b"second", b"last"]


def test_send_multipart_with_sndmore_continues_the_message(pair):
    a, b = pair
    a.send_multipart([b"1", b"2"], zmq.SNDMORE)
    a.send(b"3")
    assert recv_within(b, multipart=True) == [b"1", b"2", b"3"]


def test_multipart_parts_arrive_together(pair):
    a, b = pair
    a.send(b"head", zmq.SNDMORE)
    assert b.poll(50) == 0  # nothing is delivered until the last part is sent
    a.send(b"tail")
    assert recv_within(b, multipart=True) == [b"head", b"tail"]


def test_send_multipart_with_a_str_part_raises_type_error(pair):
    a, _ = pair
    with pytest.raises(TypeError):
        a.send_multipart([b"ok", "not ok"])


def test_nonblocking_recv_flavours_raise_again(pair):
    _, b = pair
    for recv in (b.recv, b.recv_multipart, b.recv_string, b.recv_json, b.recv_pyobj):
        with pytest.raises(zmq.Again):
            recv(zmq.NOBLOCK)


def test_string_round_trip_in_utf8(pair):
    a, b = pair
    a.send_string("héllo wörld")
    assert b.poll(2000)
    assert b.recv_string() == "héllo wörld"


def test_send_string_encodes_utf8_by_default(pair):
    a, b = pair
    a.send_string("é")
    assert recv_within(b) == b"\xc3\xa9"


def test_string_round_trip_with_an_encoding(pair):
    a, b = pair
    a.send_string("héllo", encoding="latin-1")
    assert recv_within(b) == b"h\xe9llo"
    a.send_string("héllo", encoding="latin-1")
    assert b.poll(2000)
    assert b.recv_string(encoding="latin-1") == "héllo"


def test_send_string_rejects_bytes(pair):
    a, _ = pair
    with pytest.raises(TypeError):
        a.send_string(b"bytes")


def test_recv_string_of_invalid_utf8_raises_unicode_error(pair):
    a, b = pair
    a.send(b"\xff\xfe")
    assert b.poll(2000)
    with pytest.raises(UnicodeDecodeError):
        b.recv_string()


def test_json_round_trip(pair):
    a, b = pair
    a.send_json({"name": "x", "values": [1, 2.5, None, True]})
    assert b.poll(2000)
    assert b.recv_json() == {"name": "x", "values": [1, 2.5, None, True]}


def test_send_json_passes_options_to_json(pair):
    a, b = pair
    a.send_json({"b": 1, "a": 2}, sort_keys=True)
    assert recv_within(b) == b'{"a": 2, "b": 1}'


def test_pyobj_round_trip(pair):
    a, b = pair
    a.send_pyobj({"set": {1, 2}, "tuple": (1, "x")})
    assert b.poll(2000)
    assert b.recv_pyobj() == {"set": {1, 2}, "tuple": (1, "x")}


def test_send_pyobj_pickles(pair):
    a, b = pair
    a.send_pyobj([1, 2], protocol=2)
    assert pickle.loads(recv_within(b)) == [1, 2]


def test_serialized_round_trip(pair):
    a, b = pair

    def serialize(msg):
        return [msg["key"].encode(), repr(msg["n"]).encode()]

    def deserialize(frames):
        key, n = frames
        return {"key": key.decode(), "n": int(n)}

    a.send_serialized({"key": "k", "n": 42}, serialize)
    assert recv_within(b, multipart=True) == [b"k", b"42"]
    a.send_serialized({"key": "k", "n": 42}, serialize)
    assert b.poll(2000)
    assert b.recv_serialized(deserialize) == {"key": "k", "n": 42}


def test_recv_serialized_copy_false_hands_frames_to_the_deserializer(pair):
    a, b = pair
    a.send_multipart([b"x", b"y"])
    assert b.poll(2000)
    assert b.recv_serialized(lambda frames: [f.bytes for f in frames], copy=False) == [b"x", b"y"]


# -- recv_into -------------------------------------------------------------------------------


def test_recv_into_fills_the_buffer_and_returns_the_size(pair):
    a, b = pair
    a.send(b"abc")
    assert b.poll(2000)
    buf = bytearray(5)
    assert b.recv_into(buf) == 3
    assert buf == b"abc\x00\x00"


def test_recv_into_truncates_and_returns_the_full_size(pair):
    a, b = pair
    a.send(b"abcdef")
    assert b.poll(2000)
    buf = bytearray(3)
    assert b.recv_into(buf) == 6
    assert buf == b"abc"


def test_recv_into_discards_the_truncated_rest(pair):
    a, b = pair
    a.send(b"abcdef")
    a.send(b"next")
    assert b.poll(2000)
    b.recv_into(bytearray(3))
    assert recv_within(b) == b"next"


def test_recv_into_honours_nbytes(pair):
    a, b = pair
    a.send(b"abcdef")
    assert b.poll(2000)
    buf = bytearray(10)
    assert b.recv_into(buf, nbytes=2) == 6
    assert buf == b"ab" + bytes(8)


def test_recv_into_an_empty_buffer_discards_a_frame(pair):
    a, b = pair
    a.send(b"dropped")
    a.send(b"kept")
    assert b.poll(2000)
    assert b.recv_into(bytearray()) == 7
    assert recv_within(b) == b"kept"


def test_recv_into_a_memoryview_slice(pair):
    a, b = pair
    a.send(b"xy")
    assert b.poll(2000)
    buf = bytearray(b"....")
    assert b.recv_into(memoryview(buf)[1:3]) == 2
    assert buf == b".xy."


def test_recv_into_an_array(pair):
    a, b = pair
    a.send(array.array("i", [7, 8]).tobytes())
    assert b.poll(2000)
    target = array.array("i", [0, 0])
    b.recv_into(target)
    assert target.tolist() == [7, 8]


def test_recv_into_sets_rcvmore(pair):
    a, b = pair
    a.send_multipart([b"1", b"2"])
    assert b.poll(2000)
    buf = bytearray(1)
    b.recv_into(buf)
    assert b.rcvmore == 1
    b.recv_into(buf)
    assert b.rcvmore == 0


def test_recv_into_with_nothing_queued_raises_again(pair):
    _, b = pair
    with pytest.raises(zmq.Again):
        b.recv_into(bytearray(4), flags=zmq.NOBLOCK)


def test_recv_into_a_read_only_buffer_raises(pair):
    _, b = pair
    with pytest.raises(BufferError):
        b.recv_into(b"read only", flags=zmq.NOBLOCK)


def test_recv_into_nbytes_larger_than_the_buffer_raises_value_error(pair):
    _, b = pair
    with pytest.raises(ValueError):
        b.recv_into(bytearray(2), nbytes=5, flags=zmq.NOBLOCK)


# -- Socket.poll -----------------------------------------------------------------------------


def test_poll_times_out_with_zero(pair):
    _, b = pair
    assert b.poll(0) == 0
    assert b.poll(10, zmq.POLLIN) == 0


def test_poll_reports_pollin_for_a_waiting_message(pair):
    a, b = pair
    a.send(b"x")
    assert b.poll(2000) == zmq.POLLIN
    assert b.poll(0, zmq.POLLIN) == zmq.POLLIN  # still unread


def test_poll_reports_pollout_when_sending_is_possible(pair):
    a, _ = pair
    assert a.poll(0, zmq.POLLOUT) == zmq.POLLOUT


def test_poll_reports_both_when_asked_for_both(pair):
    a, b = pair
    a.send(b"x")
    assert b.poll(2000)
    assert b.poll(0, zmq.POLLIN | zmq.POLLOUT) == zmq.POLLIN | zmq.POLLOUT


def test_poll_with_no_timeout_returns_when_a_message_is_there(pair):
    a, b = pair
    a.send(b"x")
    assert b.poll() == zmq.POLLIN
    assert b.poll(None) == zmq.POLLIN


# -- subscribe / unsubscribe -----------------------------------------------------------------


def settle_subscriptions(pub, sub, marker: bytes) -> None:
    """Send ``marker`` until ``sub`` gets it, so all ``sub`` asked for so far has reached ``pub``.

    ``sub`` must be subscribed to ``marker``; marker copies still in flight are drained later
    with ``recv_skipping``.
    """
    for _ in range(200):
        pub.send(marker)
        if sub.poll(10):
            assert sub.recv() == marker
            return
    raise AssertionError("subscriptions never reached the publisher")


def recv_skipping(sub, marker: bytes) -> bytes:
    while (msg := recv_within(sub)) == marker:
        pass
    return msg


def test_subscribe_takes_str_and_bytes(make, endpoint):
    pub, sub = make(zmq.PUB), make(zmq.SUB)
    sub.subscribe("text-")
    sub.subscribe(b"bytes-")
    sub.subscribe(b"~")
    sub.connect(bind(pub, endpoint()))
    settle_subscriptions(pub, sub, b"~")
    for topic in (b"other-1", b"text-1", b"bytes-1", b"other-2"):
        pub.send(topic)
    assert recv_skipping(sub, b"~") == b"text-1"
    assert recv_within(sub) == b"bytes-1"
    assert sub.poll(50) == 0


def test_unsubscribe_takes_str_and_bytes(make, endpoint):
    pub, sub = make(zmq.PUB), make(zmq.SUB)
    for topic in ("a-", b"b-", b"c-", b"~1"):
        sub.subscribe(topic)
    sub.connect(bind(pub, endpoint()))
    settle_subscriptions(pub, sub, b"~1")
    sub.unsubscribe("a-")
    sub.unsubscribe(b"b-")
    sub.subscribe(b"~2")
    settle_subscriptions(pub, sub, b"~2")
    for topic in (b"a-1", b"b-1", b"c-1"):
        pub.send(topic)
    assert recv_skipping(sub, b"~2") == b"c-1"


def test_bind_and_connect_as_context_managers_undo_on_exit(make, endpoint):
    pull, push = make(zmq.PULL), make(zmq.PUSH)
    with pull.bind(endpoint()) as bound:
        assert bound is pull
        addr = pull.last_endpoint.decode()
        with push.connect(addr):
            push.send(b"inside")
            assert recv_within(pull) == b"inside"
        with pytest.raises(zmq.ZMQError) as info:
            push.disconnect(addr)  # already disconnected by the with block
        assert info.value.errno == errno.ENOENT
    with pytest.raises(zmq.ZMQError) as info:
        pull.unbind(addr)  # already unbound
    assert info.value.errno == errno.ENOENT


@pytest.mark.parametrize("transport", ["ipc", "tcp"])
def test_empty_message_arriving_while_recv_waits_is_returned(make, endpoint):
    """Over the wire the message reaches the socket while ``recv`` already waits for it; an
    empty one is a message like any other (a wait that looked for a truthy result dropped it
    and waited on)."""
    a, b = make(zmq.PAIR), make(zmq.PAIR)
    connect(b, bind(a, endpoint()), a)
    a.send(b"")
    assert b.recv() == b""
    a.send(b"after")
    assert b.recv() == b"after"


@pytest.mark.parametrize("transport", ["ipc", "tcp"])
def test_req_rep_exchange_of_empty_messages(make, endpoint):
    rep, req = make(zmq.REP), make(zmq.REQ)
    connect(req, bind(rep, endpoint()), rep)
    for _ in range(3):
        req.send(b"")
        assert rep.recv() == b""
        rep.send(b"")
        assert req.recv() == b""


@pytest.mark.parametrize("transport", ["inproc"])
def test_empty_message_sent_to_a_waiting_receiver_is_not_skipped(make, endpoint):
    """The receiver thread is already waiting (RCVTIMEO) when the empty message comes."""
    a, b = make(zmq.PAIR), make(zmq.PAIR)
    connect(b, bind(a, endpoint()), a)
    got: list = []
    waiting = threading.Event()

    def receive() -> None:
        waiting.set()
        got.append(b.recv())
        got.append(b.recv())

    thread = threading.Thread(target=receive, daemon=True)
    thread.start()
    assert waiting.wait(2)
    a.send(b"")
    a.send(b"next")
    thread.join(5)
    assert got == [b"", b"next"]
