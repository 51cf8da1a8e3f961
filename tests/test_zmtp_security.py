"""The security mechanisms at the codec level (PLAIN, CURVE, NULL with ZAP): bytes in, bytes out.

Two ``Connection`` objects talk through :func:`exchange`, which carries each side's output to
the other -- whole, or one octet at a time, so every step of every handshake is also seen split
at every point -- and answers ZAP requests with the given handler.  Hostile inputs are built
from real handshakes, altered where the test says.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import nacl.bindings as sodium
import pytest

from brokerless.constants import Event
from brokerless.constants import SocketType as T
from brokerless.zmtp import (
    ERROR_STATE,
    TRAFFIC,
    AuthenticationFailed,
    Connection,
    HandshakeError,
    Ping,
    Pong,
    ProtocolError,
    Ready,
    State,
    UnexpectedFrame,
    ZapRequest,
    ZapUnavailable,
)
from brokerless.zmtp.errors import CryptographicError, InvalidSequence, PeerError, ZapError
from brokerless.zmtp.mechanisms import NullMechanism, PlainClient, PlainServer
from brokerless.zmtp.mechanisms.curve import CookieKeys, CurveClient, CurveServer
from brokerless.zmtp.mechanisms.zap import ZapPolicy, parse_reply

from .test_zmtp_codec import greeting

pytestmark = pytest.mark.timeout(60)
_E = Event

SERVER_PUBLIC, SERVER_SECRET = sodium.crypto_box_keypair()
CLIENT_PUBLIC, CLIENT_SECRET = sodium.crypto_box_keypair()


def ok_reply(user: bytes = b"alice", metadata: bytes = b"") -> list[bytes]:
    return [b"", b"1.0", b"1", b"200", b"OK", user, metadata]


def refuse(status: bytes) -> Callable[[ZapRequest], list[bytes]]:
    return lambda request: [b"", b"1.0", b"1", status, b"no", b"", b""]


def plain_pair(zap: Callable | None = None, password: bytes = b"secret", policy=None):
    client = Connection(
        T.DEALER, b"cid", mechanism=partial(PlainClient, username=b"admin", password=password)
    )
    server = Connection(
        T.ROUTER,
        as_server=True,
        mechanism=partial(PlainServer, zap=policy or ZapPolicy(b"dom", b"sid", True)),
    )
    return client, server


def curve_pair(
    server_key: bytes = SERVER_PUBLIC,
    zap: ZapPolicy | None = None,
    cookies: CookieKeys | None = None,
    client_type: T = T.DEALER,
    server_type: T = T.ROUTER,
):
    client = Connection(
        client_type,
        b"cid",
        mechanism=partial(
            CurveClient, public_key=CLIENT_PUBLIC, secret_key=CLIENT_SECRET, server_key=server_key
        ),
    )
    extra = {"cookies": cookies} if cookies is not None else {}
    server = Connection(
        server_type,
        as_server=True,
        mechanism=partial(
            CurveServer, secret_key=SERVER_SECRET, zap=zap, **extra
        ),
    )
    return client, server


def greet(a: Connection, b: Connection) -> tuple[bytes, list, list]:
    """Exchange the greetings in their three steps (signature, major version, the rest: see
    greeting.py); returns a's whole greeting and what each side's last step returned (the ZAP
    request of a server that asks at once).  The first handshake commands are then queued."""
    sent_by_a = b""
    for _ in range(3):
        to_b, to_a = a.data_to_send(), b.data_to_send()
        sent_by_a += to_b
        got_a, got_b = a.receive_data(to_a), b.receive_data(to_b)
    return sent_by_a, got_a, got_b


class Side:
    """One connection and what it delivered."""

    def __init__(self, conn: Connection, zap: Callable | None) -> None:
        self.conn = conn
        self.zap = zap
        self.items: list = []
        self.requests: list[ZapRequest] = []

    def feed(self, data: bytes, bytewise: bool) -> None:
        pieces = [data[i : i + 1] for i in range(len(data))] if bytewise else [data]
        for piece in pieces:
            self._take(self.conn.receive_data(piece))

    def _take(self, items: list) -> None:
        for item in items:
            if isinstance(item, ZapRequest):
                self.requests.append(item)
                reply = self.zap(item) if self.zap else None
                self._take(self.conn.zap_reply(reply))
            else:
                self.items.append(item)


def exchange(
    a: Connection, b: Connection, bytewise: bool = False, zap: Callable | None = None
) -> tuple[Side, Side]:
    """Carry a's and b's output to each other until neither has more; ``zap`` answers the
    ZAP requests of either (None: no handler bound)."""
    sa, sb = Side(a, zap), Side(b, zap)
    for _ in range(20):
        out_a, out_b = a.data_to_send(), b.data_to_send()
        if not out_a and not out_b:
            break
        if out_a:
            sb.feed(out_a, bytewise)
        if out_b:
            sa.feed(out_b, bytewise)
    return sa, sb


def traffic(a: Side, b: Side, msgs: list) -> list:
    """Send ``msgs`` from a to b; what b delivers."""
    before = len(b.items)
    for msg in msgs:
        a.conn.send_message(msg)
    b.feed(a.conn.data_to_send(), bytewise=False)
    return b.items[before:]


# -- PLAIN ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("bytewise", [False, True])
def test_plain_handshake_with_zap_split_at_every_point(bytewise):
    client, server = plain_pair()
    c, s = exchange(client, server, bytewise, zap=lambda r: ok_reply(b"admin-user"))
    assert (client.state, server.state) == (TRAFFIC, TRAFFIC)
    (request,) = s.requests
    assert request.frames(b"10.0.0.1") == [
        b"", b"1.0", b"1", b"dom", b"10.0.0.1", b"sid", b"PLAIN", b"admin", b"secret"
    ]  # fmt: skip
    assert isinstance(c.items[0], Ready) and isinstance(s.items[0], Ready)
    assert s.items[0].properties["User-Id"] == b"admin-user"
    assert s.items[0].routing_id == b"cid"
    assert traffic(c, s, [[b"a", b""], b"b" * 300]) == [[b"a", b""], b"b" * 300]


@pytest.mark.parametrize("status", [400, 500])
def test_plain_refusal_sends_the_status_in_an_error_and_the_client_sees_it(status):
    client, server = plain_pair()
    with pytest.raises(AuthenticationFailed) as refused:
        exchange(client, server, zap=refuse(str(status).encode()))
    assert refused.value.status == status and server.state is ERROR_STATE
    # The ERROR command is queued for the peer; fed to the client it is an auth failure too.
    with pytest.raises(AuthenticationFailed) as seen:
        client.receive_data(server.data_to_send())
    assert seen.value.status == status


def test_a_temporary_failure_closes_without_an_error_command():
    client, server = plain_pair()
    with pytest.raises(AuthenticationFailed) as refused:
        exchange(client, server, zap=refuse(b"300"))
    assert refused.value.status == 300
    assert server.data_to_send() == b""


def test_plain_without_a_zap_handler_fails():
    client, server = plain_pair()
    with pytest.raises(ZapUnavailable):
        exchange(client, server, zap=None)


def test_input_waits_while_the_handshake_waits_for_zap():
    client, server = plain_pair()
    greet(client, server)
    hello = client.data_to_send()
    got = server.receive_data(hello + b"\x04\x06\x05READY")  # more input after HELLO
    assert [type(i) for i in got] == [ZapRequest]
    assert server.receive_data(b"more") == []  # held, not decoded
    with pytest.raises(UnexpectedFrame):  # the held command is taken once ZAP answered
        server.zap_reply(ok_reply())


@pytest.mark.parametrize(
    "data",
    [b"", b"\x05admin", b"\x05admin\x06secre", b"\x05admin\x06secretX", b"\x09admin"],
    ids=["empty", "no-password", "short-password", "trailing", "short-username"],
)
def test_malformed_plain_hello_is_refused(data):
    _, server = plain_pair()
    server.receive_data(greeting(mechanism=b"PLAIN"))
    body = b"\x05HELLO" + data
    with pytest.raises(HandshakeError) as refused:
        server.receive_data(b"\x04" + bytes((len(body),)) + body)
    assert refused.value.code == _E.PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_HELLO


def test_libzmqs_plain_error_spelling_is_understood():
    """libzmq's PLAIN server sends ERROR as 0x5E "RROR" (a C hex escape eats the E)."""
    client, server = plain_pair()
    greet(client, server)
    body = b"\x5eRROR\x03400"
    with pytest.raises(AuthenticationFailed) as refused:
        client.receive_data(b"\x04" + bytes((len(body),)) + body)
    assert refused.value.status == 400


def test_an_error_reason_that_is_not_a_status_is_a_plain_refusal():
    client, server = plain_pair()
    greet(client, server)
    body = b"\x05ERROR\x07go away"
    with pytest.raises(PeerError, match="go away"):
        client.receive_data(b"\x04" + bytes((len(body),)) + body)


def test_zap_user_id_cannot_be_replaced_by_the_peers_metadata():
    client = Connection(
        T.DEALER,
        mechanism=partial(PlainClient, username=b"u", password=b"p"),
        metadata={"User-Id": b"root", "X-Peer": b"v"},
    )
    _, server = plain_pair()
    _, s = exchange(client, server, zap=lambda r: ok_reply(b"alice", b"\x05Hello\0\0\0\x05World"))
    props = s.items[0].properties
    assert props["User-Id"] == b"alice"
    assert (props["Hello"], props["X-Peer"]) == (b"World", b"v")


# -- ZAP replies ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frames", "code"),
    [
        ([b"", b"1.0", b"1", b"200", b"", b""], _E.PROTOCOL_ERROR_ZAP_MALFORMED_REPLY),
        ([b"x", b"1.0", b"1", b"200", b"", b"", b""], _E.PROTOCOL_ERROR_ZAP_UNSPECIFIED),
        ([b"", b"2.0", b"1", b"200", b"", b"", b""], _E.PROTOCOL_ERROR_ZAP_BAD_VERSION),
        ([b"", b"1.0", b"7", b"200", b"", b"", b""], _E.PROTOCOL_ERROR_ZAP_BAD_REQUEST_ID),
        ([b"", b"1.0", b"1", b"201", b"", b"", b""], _E.PROTOCOL_ERROR_ZAP_INVALID_STATUS_CODE),
        ([b"", b"1.0", b"1", b"OK", b"", b"", b""], _E.PROTOCOL_ERROR_ZAP_INVALID_STATUS_CODE),
        ([b"", b"1.0", b"1", b"200", b"", b"", b"\x05Hel"], _E.PROTOCOL_ERROR_ZAP_INVALID_METADATA),
    ],
    ids=["six-frames", "delimiter", "version", "request-id", "status-201", "status-text", "meta"],
)
def test_a_malformed_zap_reply_fails_the_handshake_with_libzmqs_code(frames, code):
    with pytest.raises(ZapError) as bad:
        parse_reply(frames)
    assert bad.value.code == code
    client, server = plain_pair()
    with pytest.raises(ZapError):
        exchange(client, server, zap=lambda r: frames)
    assert server.state is ERROR_STATE and server.data_to_send() == b""


# -- NULL with ZAP --------------------------------------------------------------------------------


def test_null_with_a_domain_sends_ready_only_once_zap_accepted():
    server = Connection(T.PULL, mechanism=partial(NullMechanism, zap=ZapPolicy(b"d", b"", False)))
    client = Connection(T.PUSH)
    _, _, got = greet(client, server)
    assert [type(i) for i in got] == [ZapRequest]
    assert server.state is State.ZAP and server.receive_data(client.data_to_send()) == []  # held
    assert got[0].frames(b"a") == [b"", b"1.0", b"1", b"d", b"a", b"", b"NULL"]
    assert server.data_to_send() == b""
    items = server.zap_reply(ok_reply())
    assert [type(i) for i in items] == [Ready] and server.state is TRAFFIC
    assert client.receive_data(server.data_to_send())[0].socket_type == T.PULL


def test_null_refused_by_zap_tells_the_client():
    server = Connection(T.PULL, mechanism=partial(NullMechanism, zap=ZapPolicy(b"d", b"", False)))
    with pytest.raises(AuthenticationFailed):
        exchange(Connection(T.PUSH), server, zap=refuse(b"400"))


@pytest.mark.parametrize("required", [False, True])
def test_null_without_a_handler_goes_on_unless_required(required):
    policy = ZapPolicy(b"d", b"", required)
    server = Connection(T.PULL, mechanism=partial(NullMechanism, zap=policy))
    if required:
        with pytest.raises(ZapUnavailable):
            exchange(Connection(T.PUSH), server, zap=None)
    else:
        exchange(Connection(T.PUSH), server, zap=None)
        assert server.state is TRAFFIC


# -- CURVE ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("bytewise", [False, True])
@pytest.mark.parametrize("with_zap", [False, True])
def test_curve_handshake_split_at_every_point_and_traffic(bytewise, with_zap):
    policy = ZapPolicy(b"", b"sid", False) if with_zap else None
    client, server = curve_pair(zap=policy)
    c, s = exchange(client, server, bytewise, zap=lambda r: ok_reply(b"bob"))
    assert (client.state, server.state) == (TRAFFIC, TRAFFIC)
    if with_zap:
        (request,) = s.requests
        assert request.mechanism == b"CURVE" and request.credentials == (CLIENT_PUBLIC,)
        assert s.items[0].properties["User-Id"] == b"bob"
    msgs = [b"", b"x", [b"a", b"", b"b" * 300], b"y" * 70000]
    assert traffic(c, s, msgs) == msgs
    assert traffic(s, c, msgs) == msgs
    # The wire carries no plaintext: every frame is a MESSAGE in a data frame.
    client.send_message(b"secret-secret")
    wire = client.data_to_send()
    assert b"secret-secret" not in wire and wire[0] == 0x00 and wire[2:10] == b"\x07MESSAGE"
    s.feed(wire, bytewise)
    assert s.items[-1] == b"secret-secret"


def test_curve_carries_commands_in_boxes():
    client, server = curve_pair(client_type=T.SUB, server_type=T.PUB)
    c, s = exchange(client, server)
    assert traffic(c, s, [b"\x01topic", b"\x00topic"]) == [b"\x01topic", b"\x00topic"]
    client.send_ping(10, b"ctx")
    wire = client.data_to_send()
    assert b"PING" not in wire
    s.feed(wire, False)
    assert s.items[-1] == Ping(10, b"ctx")
    c.feed(server.data_to_send(), False)  # the PONG, boxed too
    assert c.items[-1] == Pong(b"ctx")


def handshaken():
    client, server = curve_pair()
    c, s = exchange(client, server)
    return c, s


def frames_of(conn: Connection, msgs: list) -> list[bytes]:
    """Each message's wire bytes, separately."""
    out = []
    for msg in msgs:
        conn.send_message(msg)
        out.append(conn.data_to_send())
    return out


def test_a_replayed_message_drops_the_connection():
    c, s = handshaken()
    (first,) = frames_of(c.conn, [b"once"])
    s.feed(first, False)
    with pytest.raises(InvalidSequence) as replayed:
        s.feed(first, False)
    assert replayed.value.code == _E.PROTOCOL_ERROR_ZMTP_INVALID_SEQUENCE
    assert s.conn.state is ERROR_STATE and s.items[-1] == b"once"


def test_a_reordered_message_drops_the_connection_after_delivering_the_first():
    c, s = handshaken()
    one, two = frames_of(c.conn, [b"one", b"two"])
    with pytest.raises(InvalidSequence) as reordered:
        s.conn.receive_data(two + one)
    assert reordered.value.messages == [b"two"]


@pytest.mark.parametrize("where", [-1, -20, 12])
def test_an_altered_box_drops_the_connection(where):
    c, s = handshaken()
    (wire,) = frames_of(c.conn, [b"payload-payload-payload"])
    altered = bytearray(wire)
    altered[where] ^= 0x01
    with pytest.raises((CryptographicError, InvalidSequence)):
        s.conn.receive_data(bytes(altered))
    assert s.conn.state is ERROR_STATE


def test_unencrypted_frames_after_the_handshake_are_refused():
    _c, s = handshaken()
    with pytest.raises(ProtocolError):
        s.conn.receive_data(b"\x00\x05hello")
    _c2, s2 = handshaken()
    with pytest.raises(UnexpectedFrame):
        s2.conn.receive_data(b"\x04\x06\x04PING\x00\x00")


def test_a_short_message_command_is_malformed():
    _c, s = handshaken()
    body = b"\x07MESSAGE" + (99).to_bytes(8, "big") + bytes(16)
    with pytest.raises(ProtocolError) as bad:
        s.conn.receive_data(b"\x00" + bytes((len(body),)) + body)
    assert bad.value.code == _E.PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_MESSAGE


def test_a_wrong_server_key_is_refused_at_hello():
    other_public, _ = sodium.crypto_box_keypair()
    client, server = curve_pair(server_key=other_public)
    with pytest.raises(CryptographicError) as refused:
        exchange(client, server)
    assert refused.value.code == _E.PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC


def run_until_initiate(cookies: CookieKeys):
    """A client and server up to the client's INITIATE (returned, not yet delivered)."""
    client, server = curve_pair(cookies=cookies)
    client_greeting, _, _ = greet(client, server)
    hello = client.data_to_send()
    server.receive_data(hello)
    welcome = server.data_to_send()
    client.welcome_for_test = (welcome, client.mechanism._short_secret)
    client.receive_data(welcome)
    initiate = client.data_to_send()
    return client, server, client_greeting, hello, initiate


def test_a_tampered_cookie_is_refused():
    _client, server, _, _, initiate = run_until_initiate(CookieKeys())
    header = 9  # a long frame: flags and 8 size octets
    altered = bytearray(initiate)
    altered[header + 9 + 20] ^= 0x01  # inside the cookie box
    with pytest.raises(CryptographicError, match="cookie"):
        server.receive_data(bytes(altered))


def test_a_replayed_initiate_on_another_connection_is_refused():
    keys = CookieKeys()
    _client, server, greeting, hello, initiate = run_until_initiate(keys)
    server.receive_data(initiate)
    assert server.state is TRAFFIC
    attacker = Connection(
        T.ROUTER,
        as_server=True,
        mechanism=partial(CurveServer, secret_key=SERVER_SECRET, cookies=keys),
    )  # fmt: skip
    attacker.receive_data(greeting + hello)
    with pytest.raises(CryptographicError, match="spent"):
        attacker.receive_data(initiate)


def test_a_cookie_made_for_another_connection_is_refused():
    keys = CookieKeys()
    _, _server_a, _, _, initiate_a = run_until_initiate(keys)
    _, server_b, _, _, _ = run_until_initiate(keys)
    with pytest.raises(CryptographicError, match="another connection"):
        server_b.receive_data(initiate_a)


def test_an_expired_cookie_is_refused():
    now = [0.0]
    keys = CookieKeys(lifetime=60, clock=lambda: now[0])
    _, server, _, _, initiate = run_until_initiate(keys)
    now[0] = 130.0  # two rotations later
    with pytest.raises(CryptographicError, match="expired"):
        server.receive_data(initiate)


def test_a_cookie_from_the_previous_key_still_opens():
    now = [0.0]
    keys = CookieKeys(lifetime=60, clock=lambda: now[0])
    _, server, _, _, initiate = run_until_initiate(keys)
    now[0] = 70.0  # one rotation later
    server.receive_data(initiate)
    assert server.state is TRAFFIC


def rebox_initiate(client: Connection, initiate: bytes, change: Callable[[bytes], bytes]) -> bytes:
    """The client's INITIATE with its box's plaintext changed (sealed again with the client's
    short-term secret, which a client has: this is what a malicious client can send)."""
    body = initiate[9:]  # after the long frame's header
    short, box = body[105:113], body[113:]  # after the name (9) and the cookie (96)
    nonce = b"CurveZMQINITIATE" + short
    k = client.mechanism._precomputed
    plain = change(sodium.crypto_box_open_easy_afternm(box, nonce, k))
    body = body[:113] + sodium.crypto_box_easy_afternm(plain, nonce, k)
    return b"\x06" + len(body).to_bytes(8, "big") + body


def test_a_forged_vouch_is_refused():
    client, server, _, _, initiate = run_until_initiate(CookieKeys())
    forged = rebox_initiate(client, initiate, lambda p: p[:60] + bytes([p[60] ^ 1]) + p[61:])
    with pytest.raises(CryptographicError, match="vouch"):
        server.receive_data(forged)


def test_a_vouch_for_another_server_is_refused():
    client, server, _, _, initiate = run_until_initiate(CookieKeys())
    other_public, _ = sodium.crypto_box_keypair()
    welcome, short_secret = client.welcome_for_test
    data = welcome[10:]  # after the header and the name
    server_short = sodium.crypto_box_open(
        data[16:], b"WELCOME-" + data[:16], SERVER_PUBLIC, short_secret
    )[:32]

    def vouch_elsewhere(plain: bytes) -> bytes:
        # A vouch the client remakes for another server key: C' + S_other.
        vouch_nonce = plain[32:48]
        vouch = sodium.crypto_box(
            client.mechanism._short_public + other_public,
            b"VOUCH---" + vouch_nonce,
            server_short,
            CLIENT_SECRET,
        )
        return plain[:48] + vouch + plain[128:]

    forged = rebox_initiate(client, initiate, vouch_elsewhere)
    with pytest.raises(HandshakeError) as refused:
        server.receive_data(forged)
    assert refused.value.code == _E.PROTOCOL_ERROR_ZMTP_KEY_EXCHANGE


@pytest.mark.parametrize("size", [199, 201, 5000])
def test_a_malformed_or_oversized_hello_is_refused(size):
    _, server = curve_pair()
    body = b"\x05HELLO\x01\x00" + bytes(size - 8)
    frame = (b"\x04" + bytes((len(body),)) if len(body) < 256 else
             b"\x06" + len(body).to_bytes(8, "big")) + body  # fmt: skip
    with pytest.raises(HandshakeError) as refused:
        server.receive_data(greeting(mechanism=b"CURVE") + frame)
    assert refused.value.code == _E.PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_HELLO


def test_a_hello_of_another_version_is_refused():
    client, server = curve_pair()
    greet(client, server)
    altered = bytearray(client.data_to_send())  # HELLO
    altered[8] = 2  # major version (after the 2 header octets and "\x05HELLO")
    with pytest.raises(HandshakeError) as refused:
        server.receive_data(bytes(altered))
    assert refused.value.code == _E.PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_HELLO


@pytest.mark.parametrize("size", [100, 256, 1 << 20])
def test_a_short_or_oversized_bogus_initiate_is_refused(size):
    _client, server, _, _, _ = run_until_initiate(CookieKeys())
    body = b"\x08INITIATE" + bytes(size)
    with pytest.raises(HandshakeError) as refused:
        server.receive_data(b"\x06" + len(body).to_bytes(8, "big") + body)
    expected = (
        _E.PROTOCOL_ERROR_ZMTP_MALFORMED_COMMAND_INITIATE
        if size < 248
        else _E.PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC
    )
    assert refused.value.code == expected
    assert server.decoder.buffered == 0


def test_nothing_before_ready_reaches_the_application():
    client, _server, _greeting, _hello, _initiate = run_until_initiate(CookieKeys())
    # A data frame from the server before READY: refused from its header.
    with pytest.raises(UnexpectedFrame):
        client.receive_data(b"\x00\x05early")
    # A MESSAGE command before READY is not READY either.
    client2, _server2, *_ = run_until_initiate(CookieKeys())
    body = b"\x07MESSAGE" + bytes(8) + bytes(17)
    with pytest.raises(UnexpectedFrame):
        client2.receive_data(b"\x04" + bytes((len(body),)) + body)


@pytest.mark.parametrize("length", [0, 31, 33, 40])
def test_key_lengths_are_checked(length):
    with pytest.raises(ValueError, match="32 octets"):
        CurveClient({}, False, CLIENT_PUBLIC, CLIENT_SECRET, bytes(length))
    with pytest.raises(ValueError, match="32 octets"):
        CurveServer({}, True, bytes(length))


def test_curve_without_zap_handler_goes_on_unless_required():
    client, server = curve_pair(zap=ZapPolicy(b"", b"", False))
    exchange(client, server, zap=None)
    assert server.state is TRAFFIC
    client, server = curve_pair(zap=ZapPolicy(b"d", b"", True))
    with pytest.raises(ZapUnavailable):
        exchange(client, server, zap=None)


def test_unknown_client_key_refused_by_zap():
    client, server = curve_pair(zap=ZapPolicy(b"", b"", False))
    with pytest.raises(AuthenticationFailed) as refused:
        exchange(client, server, zap=refuse(b"400"))
    assert refused.value.status == 400
    with pytest.raises(AuthenticationFailed):  # the ERROR reaches the client
        client.receive_data(server.data_to_send())


def test_maxmsgsize_bounds_encrypted_frames_as_they_arrive():
    client, server = curve_pair()
    server.decoder.max_msg_size = 1000
    c, s = exchange(client, server)
    c.conn.send_message(b"z" * 2000)
    with pytest.raises(ProtocolError):
        s.conn.receive_data(c.conn.data_to_send()[:20])
