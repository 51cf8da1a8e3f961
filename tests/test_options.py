"""Socket options: the get/set spellings, libzmq's defaults, validation, and the read-only ones."""

from __future__ import annotations

import pytest

import brokerless as zmq
from tests.helpers import bind, recv_within

# The twelve standard socket types.
SOCKET_TYPES = [
    zmq.PAIR, zmq.PUB, zmq.SUB, zmq.REQ, zmq.REP, zmq.DEALER, zmq.ROUTER, zmq.PULL, zmq.PUSH,
    zmq.XPUB, zmq.XSUB, zmq.STREAM,
]  # fmt: skip


@pytest.fixture
def fresh(ctx):
    """A DEALER with every option at its default (closed with linger 0 after the test)."""
    sock = ctx.socket(zmq.DEALER)
    yield sock
    sock.close(linger=0)


def pair(make, endpoint):
    a, b = make(zmq.PAIR), make(zmq.PAIR)
    b.connect(bind(a, endpoint()))
    return a, b


# -- defaults --------------------------------------------------------------------------------

DEFAULTS = {
    "SNDHWM": 1000,
    "RCVHWM": 1000,
    "LINGER": -1,
    "RCVTIMEO": -1,
    "SNDTIMEO": -1,
    "RCVMORE": 0,
    "EVENTS": 0,
    "ROUTING_ID": b"",
    "LAST_ENDPOINT": b"",
    "MAXMSGSIZE": -1,
    "RECONNECT_IVL": 100,
    "RECONNECT_IVL_MAX": 0,
    "HEARTBEAT_IVL": 0,
    "HEARTBEAT_TTL": 0,
    "HEARTBEAT_TIMEOUT": -1,
    "HANDSHAKE_IVL": 30000,
    "IMMEDIATE": 0,
    "CONFLATE": 0,
    "IPV6": 0,
    "TCP_KEEPALIVE": -1,
    "INVERT_MATCHING": 0,
}


@pytest.mark.parametrize(("name", "default"), DEFAULTS.items(), ids=list(DEFAULTS))
def test_default_matches_libzmq(fresh, name, default):
    value = fresh.getsockopt(getattr(zmq, name))
    assert value == default
    assert isinstance(value, type(default))


@pytest.mark.parametrize("kind", SOCKET_TYPES, ids=[zmq.SocketType(k).name for k in SOCKET_TYPES])
def test_type_option_reports_the_socket_type(make, kind):
    sock = make(kind)
    assert sock.getsockopt(zmq.TYPE) == kind
    assert sock.type == kind


def test_type_attribute_is_a_socket_type_member(make):
    assert make(zmq.PULL).type is zmq.SocketType.PULL


# -- the spellings ---------------------------------------------------------------------------

INT_VALUES = {
    "LINGER": 0,
    "SNDHWM": 5,
    "RCVHWM": 7,
    "RCVTIMEO": 150,
    "SNDTIMEO": 250,
    "MAXMSGSIZE": 4096,
    "RECONNECT_IVL": 50,
    "RECONNECT_IVL_MAX": 500,
    "HEARTBEAT_IVL": 1000,
    "HEARTBEAT_TIMEOUT": 3000,
    "HANDSHAKE_IVL": 1234,
    "IMMEDIATE": 1,
    "CONFLATE": 1,
}


@pytest.mark.parametrize(("name", "value"), INT_VALUES.items(), ids=list(INT_VALUES))
def test_setsockopt_then_getsockopt_round_trips(fresh, name, value):
    option = getattr(zmq, name)
    fresh.setsockopt(option, value)
    assert fresh.getsockopt(option) == value


@pytest.mark.parametrize(("name", "value"), INT_VALUES.items(), ids=list(INT_VALUES))
def test_set_then_get_round_trips(fresh, name, value):
    option = getattr(zmq, name)
    fresh.set(option, value)
    assert fresh.get(option) == value


@pytest.mark.parametrize(("name", "value"), INT_VALUES.items(), ids=list(INT_VALUES))
def test_option_attribute_round_trips(fresh, name, value):
    setattr(fresh, name.lower(), value)
    assert getattr(fresh, name.lower()) == value
    assert fresh.getsockopt(getattr(zmq, name)) == value


def test_linger_attribute(fresh):
    fresh.linger = 0
    assert fresh.linger == 0
    assert fresh.getsockopt(zmq.LINGER) == 0


def test_timeout_attributes(fresh):
    fresh.rcvtimeo = 10
    fresh.sndtimeo = 20
    assert (fresh.rcvtimeo, fresh.sndtimeo) == (10, 20)
    assert (fresh.getsockopt(zmq.RCVTIMEO), fresh.getsockopt(zmq.SNDTIMEO)) == (10, 20)


def test_hwm_attributes(fresh):
    fresh.sndhwm = 3
    fresh.rcvhwm = 4
    assert (fresh.sndhwm, fresh.rcvhwm) == (3, 4)


def test_option_set_on_one_socket_leaves_others_alone(make):
    a, b = make(zmq.PAIR), make(zmq.PAIR)
    a.sndhwm = 3
    assert b.sndhwm == 1000


def test_routing_id_round_trips_as_bytes(fresh):
    fresh.setsockopt(zmq.ROUTING_ID, b"peer-1")
    assert fresh.getsockopt(zmq.ROUTING_ID) == b"peer-1"
    assert fresh.routing_id == b"peer-1"


def test_identity_is_the_old_name_of_routing_id(fresh):
    fresh.identity = b"ident"
    assert fresh.routing_id == b"ident"
    fresh.routing_id = b"rid"
    assert fresh.identity == b"rid"
    assert fresh.getsockopt(zmq.IDENTITY) == b"rid"


def test_routing_id_may_hold_any_bytes(fresh):
    fresh.routing_id = b"\xff\x00 binary"
    assert fresh.routing_id == b"\xff\x00 binary"


def test_setsockopt_string_encodes_utf8_by_default(fresh):
    fresh.setsockopt_string(zmq.ROUTING_ID, "héllo")
    assert fresh.getsockopt(zmq.ROUTING_ID) == "héllo".encode()
    assert fresh.getsockopt_string(zmq.ROUTING_ID) == "héllo"


def test_string_options_take_an_encoding(fresh):
    fresh.setsockopt_string(zmq.ROUTING_ID, "é", encoding="latin-1")
    assert fresh.getsockopt(zmq.ROUTING_ID) == b"\xe9"
    assert fresh.getsockopt_string(zmq.ROUTING_ID, encoding="latin-1") == "é"


def test_set_string_and_get_string_are_aliases(fresh):
    fresh.set_string(zmq.ROUTING_ID, "alias")
    assert fresh.get_string(zmq.ROUTING_ID) == "alias"


def test_getsockopt_string_of_an_int_option_raises_type_error(fresh):
    with pytest.raises(TypeError):
        fresh.getsockopt_string(zmq.LINGER)


def test_unknown_option_attribute_raises_attribute_error(fresh):
    with pytest.raises(AttributeError):
        _ = fresh.no_such_option
    with pytest.raises(AttributeError):
        fresh.no_such_option = 1


def test_bool_is_accepted_for_an_int_option(fresh):
    fresh.setsockopt(zmq.IMMEDIATE, True)
    assert fresh.getsockopt(zmq.IMMEDIATE) == 1


# -- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["getsockopt", "setsockopt"])
def test_unknown_option_number_raises_einval(fresh, method):
    args = (9999,) if method == "getsockopt" else (9999, 1)
    with pytest.raises(zmq.ZMQError) as info:
        getattr(fresh, method)(*args)
    assert info.value.errno == zmq.EINVAL


@pytest.mark.parametrize(
    ("option", "value"),
    [
        (zmq.LINGER, "5"),
        (zmq.LINGER, b"5"),
        (zmq.LINGER, 1.5),
        (zmq.LINGER, None),
        (zmq.RCVTIMEO, 1.0),
        (zmq.ROUTING_ID, 5),
        (zmq.ROUTING_ID, "text"),
    ],
    ids=["str-for-int", "bytes-for-int", "float-for-int", "None-for-int", "whole-float-for-int",
         "int-for-bytes", "str-for-bytes"],
)  # fmt: skip
def test_value_of_the_wrong_type_raises_type_error(fresh, option, value):
    with pytest.raises(TypeError):
        fresh.setsockopt(option, value)


def test_str_for_an_option_attribute_raises_type_error(fresh):
    with pytest.raises(TypeError):
        fresh.identity = "text"


@pytest.mark.parametrize(
    ("option", "value"),
    [
        (zmq.LINGER, -2),
        (zmq.RCVTIMEO, -2),
        (zmq.SNDTIMEO, -2),
        (zmq.SNDHWM, -1),
        (zmq.RCVHWM, -1),
        (zmq.ROUTING_ID, b""),
        (zmq.ROUTING_ID, b"x" * 256),
    ],
    ids=["linger-2", "rcvtimeo-2", "sndtimeo-2", "sndhwm-1", "rcvhwm-1", "empty-routing-id",
         "256-byte-routing-id"],
)  # fmt: skip
def test_out_of_range_value_raises_einval(fresh, option, value):
    with pytest.raises(zmq.ZMQError) as info:
        fresh.setsockopt(option, value)
    assert info.value.errno == zmq.EINVAL


def test_limits_that_are_valid(fresh):
    fresh.setsockopt(zmq.LINGER, -1)
    fresh.setsockopt(zmq.RCVTIMEO, -1)
    fresh.setsockopt(zmq.SNDHWM, 0)  # 0 means no limit
    fresh.setsockopt(zmq.ROUTING_ID, b"x" * 255)
    assert fresh.getsockopt(zmq.SNDHWM) == 0
    assert len(fresh.getsockopt(zmq.ROUTING_ID)) == 255


def test_rejected_value_leaves_the_option_unchanged(fresh):
    fresh.linger = 5
    with pytest.raises(zmq.ZMQError):
        fresh.setsockopt(zmq.LINGER, -2)
    assert fresh.linger == 5


@pytest.mark.parametrize("name", ["TYPE", "RCVMORE", "EVENTS", "LAST_ENDPOINT", "FD"])
def test_read_only_option_cannot_be_set(fresh, name):
    value = b"x" if name == "LAST_ENDPOINT" else 1
    with pytest.raises(zmq.ZMQError) as info:
        fresh.setsockopt(getattr(zmq, name), value)
    assert info.value.errno == zmq.EINVAL


@pytest.mark.parametrize("name", ["SUBSCRIBE", "UNSUBSCRIBE"])
def test_write_only_option_cannot_be_read(make, name):
    sub = make(zmq.SUB)
    with pytest.raises(zmq.ZMQError) as info:
        sub.getsockopt(getattr(zmq, name))
    assert info.value.errno == zmq.EINVAL


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        (zmq.PULL, "SUBSCRIBE"),
        (zmq.PUSH, "UNSUBSCRIBE"),
        (zmq.DEALER, "ROUTER_MANDATORY"),
        (zmq.SUB, "XPUB_VERBOSE"),
        (zmq.DEALER, "REQ_RELAXED"),
    ],
)
def test_option_of_another_socket_type_raises_einval(make, kind, name):
    sock = make(kind)
    value = b"" if name.endswith("SUBSCRIBE") else 1
    with pytest.raises(zmq.ZMQError) as info:
        sock.setsockopt(getattr(zmq, name), value)
    assert info.value.errno == zmq.EINVAL


# -- the read-only options follow the socket's state -----------------------------------------


def test_events_reflects_pollin_and_pollout(make, endpoint):
    a, b = pair(make, endpoint)
    assert b.getsockopt(zmq.EVENTS) == zmq.POLLOUT
    a.send(b"hello")
    assert b.poll(2000) == zmq.POLLIN
    assert b.getsockopt(zmq.EVENTS) == zmq.POLLIN | zmq.POLLOUT
    assert b.events == zmq.POLLIN | zmq.POLLOUT
    b.recv()
    assert b.events == zmq.POLLOUT


def test_events_is_zero_for_a_push_without_peers(make):
    push = make(zmq.PUSH)
    assert push.events == 0


def test_events_has_pollout_for_a_pub_without_peers(make):
    pub = make(zmq.PUB)
    assert pub.events == zmq.POLLOUT


def test_last_endpoint_is_the_latest_bind(make, endpoint):
    sock = make(zmq.PULL)
    first, second = endpoint(), endpoint()
    sock.bind(first)
    assert sock.getsockopt(zmq.LAST_ENDPOINT) == first.encode()
    sock.bind(second)
    assert sock.last_endpoint == second.encode()
    assert sock.getsockopt_string(zmq.LAST_ENDPOINT) == second


def test_last_endpoint_follows_connect_too(make, endpoint):
    sock = make(zmq.PUSH)
    addr = endpoint()
    sock.connect(addr)
    assert sock.last_endpoint == addr.encode()


def test_rcvmore_is_set_between_parts(make, endpoint):
    a, b = pair(make, endpoint)
    a.send_multipart([b"one", b"two", b"three"])
    assert recv_within(b) == b"one"
    assert b.getsockopt(zmq.RCVMORE) == 1
    assert b.recv() == b"two"
    assert b.rcvmore == 1
    assert b.recv() == b"three"
    assert b.rcvmore == 0


def test_rcvmore_is_clear_for_a_single_part_message(make, endpoint):
    a, b = pair(make, endpoint)
    a.send(b"single")
    recv_within(b)
    assert b.rcvmore == 0


def test_rcvtimeo_bounds_a_blocking_recv(make, endpoint):
    pull = make(zmq.PULL, bounded=False)
    pull.bind(endpoint())
    pull.rcvtimeo = 20
    with pytest.raises(zmq.Again):
        pull.recv()


def test_sndtimeo_bounds_a_blocking_send(make):
    push = make(zmq.PUSH, bounded=False)  # no peers: a send would wait forever
    push.sndtimeo = 20
    with pytest.raises(zmq.Again):
        push.send(b"nobody listens")


def test_rcvtimeo_zero_means_nonblocking(make, endpoint):
    pull = make(zmq.PULL, bounded=False)
    pull.bind(endpoint())
    pull.rcvtimeo = 0
    with pytest.raises(zmq.Again):
        pull.recv()
