"""Security at the socket level: options, keys and Z85, PLAIN and CURVE with ZAP, properties on
received frames, refusals on the monitor.  Written against pyzmq's API; every test here passes
against libzmq too (BROKERLESS_TEST_AGAINST=pyzmq), which is how the behaviour is checked to be
libzmq's."""

from __future__ import annotations

import errno

import pytest
import zmq as libzmq
from zmq.utils import z85 as libzmq_z85

import brokerless as zmq
from brokerless.utils import z85
from tests.helpers import recv_within
from tests.security_helpers import (
    PASSWORD,
    ZapHandler,
    keys_policy,
    make_keys,
    next_event,
    plain_policy,
    secure,
)

pytestmark = pytest.mark.timeout(30)

AUTH = zmq.EVENT_HANDSHAKE_FAILED_AUTH
PROTOCOL = zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
NO_DETAIL = zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
SUCCEEDED = zmq.EVENT_HANDSHAKE_SUCCEEDED
HANDSHAKE = AUTH | PROTOCOL | NO_DETAIL | SUCCEEDED


@pytest.fixture
def zap(ctx):
    handlers = []

    def start(decide=plain_policy):
        handler = ZapHandler(zmq, ctx, decide)
        handlers.append(handler)
        return handler

    yield start
    for handler in handlers:
        handler.close()


# -- options ------------------------------------------------------------------------------------


def test_options_choose_the_mechanism_as_libzmq(make):
    public, secret = zmq.curve_keypair()

    def after(*steps):
        sock = make(zmq.DEALER)
        for option, value in steps:
            sock.setsockopt(option, value)
        return (sock.mechanism, sock.curve_server, sock.plain_server)

    assert after() == (zmq.NULL, 0, 0)
    assert after((zmq.CURVE_PUBLICKEY, public)) == (zmq.CURVE, 0, 0)
    assert after((zmq.CURVE_SERVER, 1), (zmq.CURVE_SERVERKEY, public)) == (zmq.CURVE, 0, 0)
    assert after((zmq.CURVE_SERVER, 1), (zmq.PLAIN_USERNAME, b"u")) == (zmq.PLAIN, 0, 0)
    assert after((zmq.PLAIN_SERVER, 1), (zmq.CURVE_SECRETKEY, secret)) == (zmq.CURVE, 1, 0)
    assert after((zmq.PLAIN_SERVER, 1), (zmq.CURVE_SERVER, 0)) == (zmq.NULL, 0, 0)
    assert after((zmq.PLAIN_USERNAME, b"u"), (zmq.CURVE_SERVER, 1)) == (zmq.CURVE, 1, 0)
    assert after((zmq.PLAIN_SERVER, 1)) == (zmq.PLAIN, 0, 1)


def test_security_options_read_back(make):
    sock = make(zmq.DEALER)
    sock.plain_username = b"admin"
    sock.plain_password = b"pw"
    sock.zap_domain = b"global"
    sock.zap_enforce_domain = 5
    assert (sock.plain_username, sock.plain_password) == (b"admin", b"pw")
    assert (sock.zap_domain, sock.zap_enforce_domain) == (b"global", 1)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("CURVE_SERVERKEY", b"x" * 31),
        ("CURVE_PUBLICKEY", b'"' * 40),
        ("CURVE_SECRETKEY", b""),
        ("PLAIN_USERNAME", b""),
        ("PLAIN_PASSWORD", b"x" * 256),
        ("ZAP_DOMAIN", b""),
        ("ZAP_DOMAIN", b"x" * 256),
        ("CURVE_SERVER", 2),
        ("PLAIN_SERVER", -1),
        ("METADATA", b"Y-a:b"),
        ("METADATA", b"X-a:"),
        ("METADATA", b"X-:b"),
        ("METADATA", b":b"),
        ("METADATA", b"X-" + b"a" * 254 + b":v"),
    ],
)
def test_invalid_security_values_are_einval(make, option, value):
    with pytest.raises(zmq.ZMQError) as refused:
        make(zmq.DEALER).setsockopt(getattr(zmq, option), value)
    assert refused.value.errno == zmq.EINVAL


@pytest.mark.parametrize("form", ["raw", "z85", "z85+nul"])
def test_curve_keys_are_taken_raw_or_z85(make, form):
    public, _ = zmq.curve_keypair()
    value = {"raw": z85.decode(public), "z85": public, "z85+nul": public + b"\x00"}[form]
    sock = make(zmq.DEALER)
    sock.setsockopt(zmq.CURVE_SERVERKEY, value)
    assert sock.mechanism == zmq.CURVE


@pytest.mark.parametrize("option", ["CURVE_PUBLICKEY", "CURVE_SECRETKEY", "CURVE_SERVERKEY"])
def test_curve_keys_cannot_be_read_back_through_pyzmqs_api(make, option):
    sock = make(zmq.DEALER)
    sock.setsockopt(getattr(zmq, option), zmq.curve_keypair()[0])
    with pytest.raises(zmq.ZMQError) as refused:
        sock.getsockopt(getattr(zmq, option))
    assert refused.value.errno == zmq.EINVAL


def test_unicode_security_values_need_the_string_setter(make):
    sock = make(zmq.DEALER)
    with pytest.raises(TypeError):
        sock.setsockopt(zmq.PLAIN_USERNAME, "admin")
    sock.setsockopt_string(zmq.PLAIN_USERNAME, "admin")
    assert sock.plain_username == b"admin"


# -- keys and Z85 -------------------------------------------------------------------------------


def test_z85_matches_the_rfc_and_libzmq():
    # RFC 32's test vector, and a key encoded by libzmq's reference (pyzmq's test vector).
    assert z85.encode(bytes.fromhex("864FD26FB559F75B")) == b"HelloWorld"
    assert z85.decode("HelloWorld") == bytes.fromhex("864FD26FB559F75B")
    key = bytes.fromhex("bb88471d65e2659b30c55a5321cebb5aab2b70a398645c26dca2b2fcb43fc518")
    assert z85.encode(key) == b"Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID"
    assert z85.decode(b"Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID") == key


def test_z85_errors_as_pyzmq():
    with pytest.raises(ValueError):
        z85.encode(b"abc")
    with pytest.raises(ValueError):
        z85.decode(b"abcd")
    with pytest.raises(ValueError):
        z85.decode("héllo")
    with pytest.raises(KeyError):
        z85.decode(b"abc d")


def test_keys_agree_with_libzmq():
    public, secret = zmq.curve_keypair()
    assert len(public) == len(secret) == 40
    assert libzmq.curve_public(secret) == public == zmq.curve_public(secret.decode())
    l_public, l_secret = libzmq.curve_keypair()
    assert zmq.curve_public(l_secret) == l_public
    assert libzmq_z85.encode(z85.decode(public)) == public


def test_curve_public_needs_a_z85_secret():
    with pytest.raises(ValueError):
        zmq.curve_public(b"x" * 32)


def test_capabilities_as_libzmq_names_them():
    assert zmq.has("curve") and zmq.has("ipc")
    assert not zmq.has("gssapi") and not zmq.has("plain")  # PLAIN is not a capability


# -- handshakes over the wire -------------------------------------------------------------------


def pair(make, mechanism, keys=None, password=PASSWORD, server_type=None, client_type=None):
    server = make(server_type or zmq.DEALER)
    client = make(client_type or zmq.DEALER)
    server.setsockopt(zmq.ROUTING_ID, b"IDENT")
    secure(mechanism, server, client, zmq, zmq, keys or make_keys(zmq), password)
    return server, client


@pytest.mark.parametrize("mechanism", ["plain", "curve"])
@pytest.mark.parametrize("transport", ["tcp", "ipc"])
def test_bounce_with_zap_and_properties(make, zap, tmp_path, mechanism, transport):
    handler = zap()
    server, client = pair(make, mechanism)
    client.setsockopt(zmq.METADATA, b"X-App:demo")
    if transport == "tcp":
        port = server.bind_to_random_port("tcp://127.0.0.1")
        client.connect(f"tcp://127.0.0.1:{port}")
    else:
        server.bind(f"ipc://{tmp_path}/s")
        client.connect(f"ipc://{tmp_path}/s")
    client.send_multipart([b"a" * 64, b"b" * 64])
    assert server.poll(5000)
    frames = server.recv_multipart(copy=False)
    assert [f.bytes for f in frames] == [b"a" * 64, b"b" * 64]
    for frame in frames:
        assert frame.get("User-Id") == "anonymous"
        assert frame.get("Hello") == "World"
        assert frame["Socket-Type"] == "DEALER"
        assert frame.get("X-App") == "demo"
        assert frame.get(zmq.MORE) == int(frame is frames[0])
    peer = frames[0].get("Peer-Address")
    assert peer == "127.0.0.1" if transport == "tcp" else peer.startswith("localhost")
    server.send_multipart([b"back"])
    assert recv_within(client, 5000) == b"back"
    (request,) = handler.requests
    assert request[:6] == [
        b"1.0", b"1", b"", request[3], b"IDENT", mechanism.upper().encode()
    ]  # fmt: skip


def test_properties_are_per_connection_and_names_as_spelled(make, zap):
    zap()
    server = make(zmq.ROUTER)
    server.setsockopt(zmq.PLAIN_SERVER, 1)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    for name in (b"one", b"two"):
        client = make(zmq.DEALER)
        client.setsockopt(zmq.PLAIN_USERNAME, b"admin")
        client.setsockopt(zmq.PLAIN_PASSWORD, PASSWORD)
        client.setsockopt(zmq.ROUTING_ID, name)
        client.connect(f"tcp://127.0.0.1:{port}")
        client.send(b"hi")
        assert server.poll(5000)
        routing_id, body = server.recv_multipart(copy=False)
        assert routing_id.bytes == name and body.get("Identity") == name.decode()
        with pytest.raises(zmq.ZMQError):
            body.get("socket-type")  # lower case is another name


def test_frames_over_inproc_have_no_properties(make):
    server, client = make(zmq.PAIR), make(zmq.PAIR)
    server.bind("inproc://props")
    client.connect("inproc://props")
    client.send(b"x")
    frame = server.recv(copy=False)
    with pytest.raises(zmq.ZMQError) as missing:
        frame.get("Socket-Type")
    assert missing.value.errno == errno.EINVAL


def watch(sock):
    return sock.get_monitor_socket(HANDSHAKE)


def test_wrong_password_is_refused_and_seen_by_both_monitors(make, zap):
    zap()
    server, client = pair(make, "plain", password=b"wrong")
    server_events, client_events = watch(server), watch(client)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    client.connect(f"tcp://127.0.0.1:{port}")
    assert next_event(server_events, 5000, HANDSHAKE) == (AUTH, 400)
    assert next_event(client_events, 5000, HANDSHAKE) == (AUTH, 400)
    try:  # no reconnection after a refusal, so the pipe goes (libzmq's a moment later)
        client.send(b"lost", zmq.NOBLOCK)
    except zmq.Again:
        pass
    assert not server.poll(200)


def test_wrong_server_key_is_refused_and_seen_on_the_monitor(make):
    keys = make_keys(zmq)
    keys["server_public"], _ = zmq.curve_keypair()  # the client trusts another key
    server, client = pair(make, "curve", keys)
    server.setsockopt(zmq.CURVE_PUBLICKEY, make_keys(zmq)["server_public"])
    server_events = watch(server)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    client.connect(f"tcp://127.0.0.1:{port}")
    event = next_event(server_events, 5000, HANDSHAKE)
    assert event == (PROTOCOL, zmq.PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)


def test_unknown_client_key_is_refused_and_seen_by_both_monitors(make, zap):
    keys = make_keys(zmq)
    zap(keys_policy({z85.decode(zmq.curve_keypair()[0])}))  # some other client
    server, client = pair(make, "curve", keys)
    server_events, client_events = watch(server), watch(client)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    client.connect(f"tcp://127.0.0.1:{port}")
    assert next_event(server_events, 5000, HANDSHAKE) == (AUTH, 400)
    assert next_event(client_events, 5000, HANDSHAKE) == (AUTH, 400)


def test_known_client_key_is_accepted(make, zap):
    keys = make_keys(zmq)
    zap(keys_policy({z85.decode(keys["client_public"])}))
    server, client = pair(make, "curve", keys)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    client.connect(f"tcp://127.0.0.1:{port}")
    client.send(b"hi")
    assert server.poll(5000)
    assert server.recv(copy=False).get("User-Id") == "known"


def test_curve_without_a_zap_handler_accepts_any_client(make):
    server, client = pair(make, "curve")
    port = server.bind_to_random_port("tcp://127.0.0.1")
    client.connect(f"tcp://127.0.0.1:{port}")
    client.send(b"hi")
    assert recv_within(server, 5000) == b"hi"


def test_plain_without_a_zap_handler_is_refused(make):
    server, client = pair(make, "plain")
    server_events = watch(server)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    client.connect(f"tcp://127.0.0.1:{port}")
    assert next_event(server_events, 5000, HANDSHAKE) == (NO_DETAIL, errno.EFAULT)


@pytest.mark.parametrize("enforce", [0, 1])
def test_curve_with_enforced_domain_and_no_handler(make, enforce):
    server, client = pair(make, "curve")
    server.setsockopt(zmq.ZAP_DOMAIN, b"global")
    server.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, enforce)
    server_events = watch(server)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    client.connect(f"tcp://127.0.0.1:{port}")
    expected = (NO_DETAIL, errno.EFAULT) if enforce else (SUCCEEDED, 0)
    assert next_event(server_events, 5000, HANDSHAKE) == expected


@pytest.mark.parametrize("status", [b"200", b"400"])
def test_null_with_a_zap_domain_asks_the_handler(make, zap, status):
    handler = zap(lambda request: (status, b"u", b""))
    server, client = make(zmq.PULL), make(zmq.PUSH)
    server.setsockopt(zmq.ZAP_DOMAIN, b"test")
    server_events = watch(server)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    client.connect(f"tcp://127.0.0.1:{port}")
    event = next_event(server_events, 5000, HANDSHAKE)
    assert event == ((SUCCEEDED, 0) if status == b"200" else (AUTH, 400))
    assert handler.requests[0][:6] == [b"1.0", b"1", b"test", b"127.0.0.1", b"", b"NULL"]


def test_null_without_a_domain_does_not_ask(make, zap):
    handler = zap(lambda request: (b"400", b"", b""))
    server, client = make(zmq.PULL), make(zmq.PUSH)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    client.connect(f"tcp://127.0.0.1:{port}")
    client.send(b"hi")
    assert recv_within(server, 5000) == b"hi"
    assert handler.requests == []


def test_a_temporary_zap_failure_refuses_with_status_300(make, zap):
    zap(lambda request: (b"300", b"", b""))
    server, client = pair(make, "curve")
    server_events = watch(server)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    client.connect(f"tcp://127.0.0.1:{port}")
    assert next_event(server_events, 5000, HANDSHAKE) == (AUTH, 300)


def test_a_temporary_zap_failure_stalls_the_handshake_instead_of_closing(make, zap):
    """libzmq neither answers a status 300 nor closes: the handshake stalls until HANDSHAKE_IVL
    ends it, and only then does the client come back.  brokerless closed at once, and the
    client reconnected every RECONNECT_IVL, asking the handler again each time."""
    handler = zap(lambda request: (b"300", b"", b""))
    server, client = pair(make, "curve")
    client.reconnect_ivl = 20
    server_events = watch(server)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    client.connect(f"tcp://127.0.0.1:{port}")
    assert next_event(server_events, 5000, HANDSHAKE) == (AUTH, 300)
    assert not server_events.poll(500), "the connection went"  # (HANDSHAKE_IVL is 30 s)
    assert len(handler.requests) == 1


def test_a_malformed_zap_reply_is_a_protocol_error(make, zap):
    zap(lambda request: (b"2OO", b"", b""))
    server, client = pair(make, "curve")
    server_events = watch(server)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    client.connect(f"tcp://127.0.0.1:{port}")
    event = next_event(server_events, 5000, HANDSHAKE)
    assert event == (PROTOCOL, zmq.PROTOCOL_ERROR_ZAP_INVALID_STATUS_CODE)
