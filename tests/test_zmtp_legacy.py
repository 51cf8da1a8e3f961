"""Older peers: the greeting exchanged in libzmq's steps, ZMTP 2.0 (RFC 15) and 1.0 (RFC 13).

Codec-level tests feed a ``Connection`` what a peer of each protocol sends, written out by hand
from the RFCs, whole and split at every point; the last tests run brokerless sockets over tcp
against raw peers speaking 2.0 and 1.0.  JeroMQ 0.3.6, a real ZMTP 2.0 implementation, is in
test_jeromq_interop.py.
"""

from __future__ import annotations

import select
import socket
import time
from functools import partial

import nacl.bindings as sodium
import pytest
from hypothesis import given
from hypothesis import strategies as st

import brokerless as zmq
from brokerless.constants import SocketType as T
from brokerless.zmtp import (
    ERROR_STATE,
    GREETING,
    IDENTITY,
    MAX_FRAME_SIZE,
    TRAFFIC,
    VALID_PEERS,
    Connection,
    FrameDecoder,
    HandshakeError,
    MessageTooLarge,
    Protocol,
    ProtocolError,
    Ready,
)
from brokerless.zmtp.frames_v1 import V1FrameDecoder, encode_message_v1
from brokerless.zmtp.mechanisms import NullMechanism, PlainClient, PlainServer
from brokerless.zmtp.mechanisms.curve import CurveClient, CurveServer
from brokerless.zmtp.mechanisms.zap import ZapPolicy

from .helpers import bind
from .security_helpers import ZapHandler
from .test_zmtp_codec import FAST, command, feed_in_chunks, frame, greeting, message_lists, wire
from .test_zmtp_codec import ready as ready_command

pytestmark = pytest.mark.timeout(60)

# -- wire bytes, written by hand -----------------------------------------------------------------


def signature(routing_id_size: int = 0) -> bytes:
    """RFC 23's pseudo-signature: 0xFF, the routing id's length + 1 (8 octets), 0x7F."""
    return b"\xff" + (routing_id_size + 1).to_bytes(8, "big") + b"\x7f"


def frame1(body: bytes, more: bool = False, flags: int | None = None) -> bytes:
    """An RFC 13 frame: length (counting the flags octet), flags, body."""
    length = len(body) + 1
    flag = bytes((0x01 if more else 0x00,) if flags is None else (flags,))
    if length < 255:
        return bytes((length,)) + flag + body
    return b"\xff" + length.to_bytes(8, "big") + flag + body


def wire1(msg) -> bytes:
    if isinstance(msg, list):
        return b"".join(frame1(p, more=i < len(msg) - 1) for i, p in enumerate(msg))
    return frame1(msg)


def rest3(as_server: bool = False) -> bytes:
    """Octets 11-63 of a ZMTP 3.1 NULL greeting."""
    return greeting(as_server=as_server)[11:]


MESSAGES = [b"hello", [b"a", b""], b"x" * 300, [b"", b"y" * 256, b"z"]]

# What a PUSH peer of each kind opens with (its routing id is b"peer"), what a
# ``Connection(T.PULL, b"me")`` must send back, and the READY it must report.
OPENINGS = {
    "zmtp3.1": (
        greeting(minor=1, padding=(5).to_bytes(8, "big")) + ready_command(b"PUSH"),
        signature(2) + b"\x03" + rest3() + ready_command(b"PULL"),
        (T.PUSH, b"", 1, Protocol.ZMTP_3),
    ),
    "zmtp3.0": (
        greeting(minor=0) + ready_command(b"PUSH"),
        signature(2) + b"\x03" + rest3() + ready_command(b"PULL"),
        (T.PUSH, b"", 0, Protocol.ZMTP_3),
    ),
    "zmtp2.0": (
        signature(4) + b"\x01\x08" + frame(b"peer"),  # revision 1, PUSH (8), identity
        signature(2) + b"\x03\x07" + frame(b"me"),  # major 3, PULL (7), identity
        (T.PUSH, b"peer", 0, Protocol.ZMTP_2_0),
    ),
    "zmtp2.0-revision-2": (  # RFC 23: "If this is 1 or 2, we have a ZMTP 2.0 peer"
        signature(4) + b"\x02\x08" + frame(b"peer"),
        signature(2) + b"\x03\x07" + frame(b"me"),
        (T.PUSH, b"peer", 0, Protocol.ZMTP_2_0),
    ),
    "zmtp1.0-revision-0": (  # a greeting with revision 0, then RFC 13 framing (as libzmq)
        signature(4) + b"\x00\x08" + frame1(b"peer"),
        signature(2) + b"\x03\x07" + frame1(b"me"),
        (T.PUSH, b"peer", 0, Protocol.ZMTP_1_0),
    ),
    "zmtp1.0-short": (  # no greeting: the identity frame, short length
        frame1(b"peer"),
        signature(2) + b"me",  # the signature was read as our identity frame's header
        (None, b"peer", 0, Protocol.ZMTP_1_0),
    ),
    "zmtp1.0-long": (
        b"\xff" + (5).to_bytes(8, "big") + b"\x00peer",  # long length: bit 0 of octet 10 clear
        signature(2) + b"me",
        (None, b"peer", 0, Protocol.ZMTP_1_0),
    ),
    "zmtp1.0-anonymous": (
        b"\x01\x00",
        signature(2) + b"me",
        (None, b"", 0, Protocol.ZMTP_1_0),
    ),
}


def traffic(kind: str) -> bytes:
    encode = wire1 if kind.startswith("zmtp1") else wire
    return b"".join(encode(m) for m in MESSAGES)


def ready_fields(item: Ready) -> tuple:
    return (item.socket_type, item.routing_id, item.minor_version, item.protocol)


def run(conn: Connection, pieces: list[bytes]) -> tuple[list, bytes]:
    """Feed ``pieces`` in turn; (what came out, everything the connection sent)."""
    got: list = []
    sent = conn.data_to_send()
    for piece in pieces:
        got += conn.receive_data(piece)
        sent += conn.data_to_send()
    return got, sent


# -- the greeting, step by step ------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(OPENINGS))
def test_every_opening_split_at_every_point(kind):
    """Whatever the peer speaks and however its octets arrive: the same READY, the same
    messages after it, and the same octets sent back."""
    opening, expected_sent, expected_ready = OPENINGS[kind]
    stream = opening + traffic(kind)
    for cut in range(len(stream) + 1):
        conn = Connection(T.PULL, b"me")
        got, sent = run(conn, [stream[:cut], stream[cut:]])
        assert ready_fields(got[0]) == expected_ready, cut
        assert got[1:] == MESSAGES, cut
        assert sent == expected_sent, cut
        assert conn.state is TRAFFIC and conn.peer is got[0]


@pytest.mark.parametrize("kind", list(OPENINGS))
def test_every_opening_byte_by_byte(kind):
    opening, expected_sent, expected_ready = OPENINGS[kind]
    stream = opening + traffic(kind)
    conn = Connection(T.PULL, b"me")
    got, sent = run(conn, [stream[i : i + 1] for i in range(len(stream))])
    assert [ready_fields(got[0]), *got[1:]] == [expected_ready, *MESSAGES]
    assert sent == expected_sent


@FAST
@given(kind=st.sampled_from(list(OPENINGS)), data=st.data())
def test_every_opening_split_anywhere(kind, data):
    opening, _, expected_ready = OPENINGS[kind]
    stream = opening + traffic(kind)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=20), label="cuts")
    conn = Connection(T.PULL, b"me")
    batches = feed_in_chunks(conn, stream, cuts)
    got = [item for batch in batches for item in batch]
    assert [ready_fields(got[0]), *got[1:]] == [expected_ready, *MESSAGES]


@pytest.mark.parametrize(
    ("peer", "replies"),
    [
        pytest.param(
            greeting(),
            {10: b"\x03", 11: rest3(), 64: ready_command(b"PULL")},
            id="zmtp3",
        ),
        pytest.param(
            signature() + b"\x01\x08" + frame(b""),
            {10: b"\x03", 11: b"\x07", 12: frame(b"me")},
            id="zmtp2.0",
        ),
        pytest.param(
            signature() + b"\x00\x08" + frame1(b""),
            {10: b"\x03", 11: b"\x07", 12: frame1(b"me")},
            id="zmtp1.0-revision-0",
        ),
        pytest.param(frame1(b""), {1: b"me"}, id="zmtp1.0"),
    ],
)
def test_each_step_waits_for_the_octets_that_decide_it(peer, replies):
    """libzmq's order (RFC 23, "Backwards Interoperability"): the signature at once; the major
    version once the peer's signature shows it is versioned; then, once its version is in, the
    rest of a ZMTP 3 greeting or a 2.0 socket type (and the identity with the peer's greeting
    whole); a ZMTP 1.0 peer gets the body of our identity frame at once."""
    conn = Connection(T.PULL, b"me")
    assert conn.data_to_send() == signature(2)
    for i in range(1, len(peer) + 1):
        conn.receive_data(peer[i - 1 : i])
        assert conn.data_to_send() == replies.get(i, b""), f"after octet {i}"


def test_the_signature_pads_with_the_routing_id_length():
    assert Connection(T.DEALER).data_to_send() == signature(0)
    assert Connection(T.DEALER, b"x" * 255).data_to_send() == signature(255)


def test_states_on_the_way_to_a_zmtp_2_peer():
    conn = Connection(T.PULL)
    opening = signature() + b"\x01\x08" + frame(b"peer")
    for i in range(len(opening)):
        assert conn.state is (GREETING if i < 12 else IDENTITY)
        assert conn.receive_data(opening[i : i + 1]) == (
            [] if i < len(opening) - 1 else [conn.peer]
        )
    assert conn.state is TRAFFIC


# -- identities -----------------------------------------------------------------------------------


@pytest.mark.parametrize("socket_type", [T.PUSH, T.PULL, T.PUB, T.SUB, T.DEALER, T.PAIR])
def test_every_socket_type_sends_its_routing_id_to_an_old_peer(socket_type):
    """libzmq sends its routing id to ZMTP 2.0 / 1.0 peers whatever the socket type."""
    peer_type = min(VALID_PEERS[socket_type])
    conn = Connection(socket_type, b"rid")
    _, sent = run(conn, [signature() + bytes((1, peer_type))])
    assert sent == signature(3) + bytes((3, socket_type)) + frame(b"rid")


def test_a_router_learns_a_zmtp_2_dealers_identity():
    conn = Connection(T.ROUTER)
    got, _ = run(conn, [signature(8) + b"\x01\x05" + frame(b"dealer-7") + wire([b"", b"hi"])])
    assert ready_fields(got[0]) == (T.DEALER, b"dealer-7", 0, Protocol.ZMTP_2_0)
    assert got[1:] == [[b"", b"hi"]]


def test_a_multipart_zmtp_2_identity_is_refused():
    """RFC 15: ``identity = final-short body``."""
    conn = Connection(T.PULL)
    with pytest.raises(HandshakeError, match="identity"):
        conn.receive_data(signature() + b"\x01\x08" + frame(b"id", more=True) + frame(b"x"))
    assert conn.state is ERROR_STATE


@pytest.mark.parametrize("flags", [0x00, 0x01, 0x7F, 0xFF])
def test_the_flags_of_a_zmtp_1_identity_are_not_validated(flags):
    """RFC 13: "The flags octet (idflags) of an identity frame SHALL not be validated"."""
    conn = Connection(T.PULL)
    got, _ = run(conn, [frame1(b"peer", flags=flags) + wire1(b"next")])
    assert got[0].routing_id == b"peer" and got[1:] == [b"next"]


def test_messages_that_came_with_the_identity_survive_a_fault_after_them():
    conn = Connection(T.PULL, max_msg_size=100)
    with pytest.raises(MessageTooLarge) as info:
        conn.receive_data(frame1(b"") + wire1(b"good") + b"\xff" + (102).to_bytes(8, "big"))
    ready, *messages = info.value.messages
    assert isinstance(ready, Ready) and messages == [b"good"]
    assert conn.state is ERROR_STATE and conn.decoder.buffered == 0


# -- socket types (RFC 15) ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ours", "theirs"), [(a, b) for a in VALID_PEERS for b in VALID_PEERS[a]], ids=str
)
def test_valid_zmtp_2_peer_types_are_accepted(ours, theirs):
    """RFC 15 numbers the types as libzmq does (an XPUB or XSUB sends its own, 9 or 10)."""
    conn = Connection(ours)
    got, _ = run(conn, [signature() + bytes((1, theirs)) + frame(b"")])
    assert got[0].socket_type is theirs


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [(a, b) for a in VALID_PEERS for b in VALID_PEERS if b not in VALID_PEERS[a]],
    ids=str,
)
@pytest.mark.parametrize("revision", [0, 1])
def test_invalid_zmtp_2_peer_types_are_refused(ours, theirs, revision):
    """RFC 15, "Socket Compatibility": dropped at once, nothing said (no commands in 2.0)."""
    conn = Connection(ours)
    conn.data_to_send()
    with pytest.raises(HandshakeError, match="cannot talk"):
        conn.receive_data(signature() + bytes((revision, theirs)))
    assert conn.data_to_send() == b"\x03" + bytes((ours,))  # major version and socket type
    assert conn.state is ERROR_STATE


@pytest.mark.parametrize("number", [11, 12, 19, 20, 255])
def test_unknown_zmtp_2_socket_types_are_refused(number):
    conn = Connection(T.PULL)
    with pytest.raises(HandshakeError, match=f"unknown socket type {number}"):
        conn.receive_data(signature() + bytes((1, number)))


# -- security -------------------------------------------------------------------------------------


KEYS = sodium.crypto_box_keypair()
ZAP_POLICY = ZapPolicy(b"domain", b"", False)

#: Every mechanism libzmq counts as "ZAP enabled": they refuse peers without security.
SECURE = {
    "plain-client": partial(PlainClient, username=b"u", password=b"p"),
    "plain-server": partial(PlainServer, zap=ZapPolicy(b"", b"", True)),
    "curve-client": partial(
        CurveClient, public_key=KEYS[0], secret_key=KEYS[1], server_key=KEYS[0]
    ),
    "curve-server": partial(CurveServer, secret_key=KEYS[1], zap=None),
    "null-with-zap-domain": partial(NullMechanism, zap=ZAP_POLICY),
}


@pytest.mark.parametrize("mechanism", SECURE)
@pytest.mark.parametrize(
    "opening",
    [
        pytest.param(signature() + b"\x01", id="zmtp2.0"),
        pytest.param(signature() + b"\x00", id="zmtp1.0-revision-0"),
        pytest.param(b"\x01", id="zmtp1.0"),
        pytest.param(b"\xff" + bytes(8) + b"\x00", id="zmtp1.0-long"),
    ],
)
def test_old_peers_are_refused_when_security_is_on(opening, mechanism):
    """RFC 23: a ZMTP 1.0 or 2.0 peer can only do NULL; with anything else it MUST be dropped
    at once -- nothing past the signature and version is sent to it.  libzmq drops it too with
    NULL when ZAP is asked (ZAP_DOMAIN), so that old peers cannot bypass the handler
    (CVE-2014-9721); no ZAP request is made for it."""
    as_server = mechanism.endswith("server") or mechanism.startswith("null")
    conn = Connection(T.PULL, b"me", as_server=as_server, mechanism=SECURE[mechanism])
    signature_sent = conn.data_to_send()
    with pytest.raises(HandshakeError, match="which has no security: the"):
        conn.receive_data(opening)
    assert signature_sent + conn.data_to_send() in (signature(2), signature(2) + b"\x03")
    assert conn.state is ERROR_STATE and conn.mechanism.zap_request is None


# -- subscriptions --------------------------------------------------------------------------------


@pytest.mark.parametrize("sub_type", [T.SUB, T.XSUB])
def test_subscriptions_to_a_zmtp_2_publisher_are_messages(sub_type):
    conn = Connection(sub_type)
    run(conn, [signature() + b"\x01\x01" + frame(b"")])
    conn.send_message(b"\x01topic")
    conn.send_message(b"\x00topic")
    assert conn.data_to_send() == frame(b"\x01topic") + frame(b"\x00topic")
    batch = conn.encode_batch([b"\x01a", [b"x", b"y"]], 1 << 16)
    assert b"".join(batch) == wire(b"\x01a") + wire([b"x", b"y"])


@pytest.mark.parametrize("pub_type", [T.PUB, T.XPUB])
def test_a_publisher_takes_subscription_messages_from_a_zmtp_2_subscriber(pub_type):
    conn = Connection(pub_type)
    got, _ = run(conn, [signature() + b"\x01\x02" + frame(b"") + wire(b"\x01news")])
    assert got[1:] == [b"\x01news"]


@pytest.mark.parametrize("pub_type", [T.PUB, T.XPUB])
@pytest.mark.parametrize("opening", [frame1(b""), b"\xff" + (1).to_bytes(8, "big") + b"\x00"])
def test_a_zmtp_1_subscriber_is_subscribed_to_everything_in_its_name(pub_type, opening):
    """ZMTP 1.0 subscribers filter on their side and send no subscriptions: libzmq's PUB
    injects a subscription to everything right after their identity."""
    conn = Connection(pub_type)
    got, _ = run(conn, [opening + wire1(b"\x01ignored")])
    assert got[1:] == [b"\x01", b"\x01ignored"]


@pytest.mark.parametrize(
    ("socket_type", "opening"),
    [
        pytest.param(T.PUB, signature() + b"\x01\x02" + frame(b""), id="pub-zmtp2.0"),
        pytest.param(T.PUB, signature() + b"\x00\x02" + frame1(b""), id="pub-zmtp1.0-revision-0"),
        pytest.param(T.SUB, frame1(b""), id="sub-zmtp1.0"),
    ],
)
def test_no_subscription_is_injected_otherwise(socket_type, opening):
    conn = Connection(socket_type)
    got, _ = run(conn, [opening])
    assert len(got) == 1 and isinstance(got[0], Ready)


# -- no commands, no heartbeats -------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(OPENINGS))
def test_heartbeats_only_with_zmtp_3(kind):
    conn = Connection(T.PULL)
    run(conn, [OPENINGS[kind][0]])
    assert conn.heartbeats is kind.startswith("zmtp3")
    if not conn.heartbeats:
        with pytest.raises(RuntimeError, match="no heartbeats"):
            conn.send_ping(10)


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(command(b"PING", b"\x00\x00"), id="command"),
        pytest.param(b"\x06" + (7).to_bytes(8, "big") + b"\x04PING\x00\x00", id="long-command"),
        pytest.param(b"\x08\x00", id="reserved"),
        pytest.param(b"\x80\x00", id="reserved-high"),
    ],
)
@pytest.mark.parametrize("state", ["identity", "traffic"])
def test_zmtp_2_has_no_commands(bad, state):
    """RFC 15: flag bits 2-7 are reserved and MUST be zero, the COMMAND bit among them."""
    conn = Connection(T.PULL)
    opening = signature() + b"\x01\x08" + (frame(b"") + wire(b"ok") if state == "traffic" else b"")
    with pytest.raises(ProtocolError, match="reserved flag bits"):
        conn.receive_data(opening + bad)
    assert conn.state is ERROR_STATE


def test_zmtp_1_ignores_reserved_flag_bits():
    """RFC 13 says they SHOULD be zero; libzmq reads only the MORE bit."""
    stream = frame1(b"", flags=0xFE) + frame1(b"a", flags=0x81) + frame1(b"b", flags=0x7E)
    assert V1FrameDecoder().feed(stream) == [b"", [b"a", b"b"]]


# -- ZMTP 1.0 framing -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("msg", "expected"),
    [
        (b"", b"\x01\x00"),
        (b"abc", b"\x04\x00abc"),
        (b"x" * 253, b"\xfe\x00" + b"x" * 253),
        (b"x" * 254, b"\xff" + (255).to_bytes(8, "big") + b"\x00" + b"x" * 254),
        ([b"a", b""], b"\x02\x01a\x01\x00"),
        (
            [b"y" * 300, b"z"],
            b"\xff" + (301).to_bytes(8, "big") + b"\x01" + b"y" * 300 + b"\x02\x00z",
        ),
    ],
)
def test_zmtp_1_wire_form(msg, expected):
    out: list = []
    encode_message_v1(out, msg)
    assert b"".join(out) == expected
    assert V1FrameDecoder().feed(frame1(b"") + expected) == [b"", msg]


def test_zmtp_1_lengths_never_read_as_large_frames():
    """A 1.0 length octet with bit 1 set is not a 3.x LONG flag: the decoder never says a read
    began with a large frame (what a PULL goes by to read its connection itself)."""
    dec = V1FrameDecoder()
    for data in (frame1(b"id"), frame1(b"ab"), frame1(b"y" * 1000), frame1(b"\xff" * 9)):
        for chunk in (data, memoryview(data)):
            dec.feed(chunk)
            assert not dec.large


@FAST
@given(msgs=message_lists, data=st.data())
def test_zmtp_1_round_trip_split_anywhere(msgs, data):
    out: list = [frame1(b"id")]
    for m in msgs:
        encode_message_v1(out, m)
    stream = b"".join(out)
    assert stream == frame1(b"id") + b"".join(wire1(m) for m in msgs)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=30), label="cuts")
    batches = feed_in_chunks(V1FrameDecoder(), stream, cuts)
    assert [m for batch in batches for m in batch] == [b"id", *msgs]


@FAST
@given(msgs=message_lists)
def test_a_zmtp_1_connection_encodes_batches_in_its_framing(msgs):
    conn = Connection(T.PUSH)
    run(conn, [frame1(b"")])
    assert b"".join(conn.encode_batch(msgs, 1 << 16)) == b"".join(wire1(m) for m in msgs)
    for m in msgs:
        conn.send_message(m)
    assert conn.data_to_send() == b"".join(wire1(m) for m in msgs)


@pytest.mark.parametrize(
    "header", [b"\x00", b"\xff" + bytes(8)], ids=["short-length-0", "long-length-0"]
)
def test_a_zmtp_1_frame_of_length_0_is_refused(header):
    """The length counts the flags octet, so 0 is malformed (libzmq refuses it)."""
    conn = Connection(T.PULL)
    with pytest.raises(ProtocolError, match="length 0"):
        conn.receive_data(frame1(b"") + header + b"\x00")
    assert conn.state is ERROR_STATE


def test_zmtp_1_maxmsgsize_is_checked_from_the_header():
    dec = V1FrameDecoder(max_msg_size=10)
    assert dec.feed(frame1(b"id") + frame1(b"x" * 10)) == [b"id", b"x" * 10]
    with pytest.raises(MessageTooLarge, match="MAXMSGSIZE 10"):
        dec.feed(b"\x0c")  # 11 octets of body announced: refused before any of them
    with pytest.raises(MessageTooLarge):
        V1FrameDecoder(max_msg_size=10).feed(frame1(b"") + b"\xff" + (12).to_bytes(8, "big"))


def test_a_zmtp_1_frame_no_process_could_hold_is_refused_without_a_limit():
    header = b"\xff" + (MAX_FRAME_SIZE + 2).to_bytes(8, "big")
    with pytest.raises(MessageTooLarge, match="more than any process can hold"):
        V1FrameDecoder().feed(frame1(b"") + header)
    dec = V1FrameDecoder()
    assert dec.feed(frame1(b"") + b"\xff" + (MAX_FRAME_SIZE + 1).to_bytes(8, "big")) == [b""]
    assert dec.buffered == 9  # the ceiling itself waits, without allocating it


def test_closing_a_zmtp_1_connection_drops_its_partial_frame():
    conn = Connection(T.PULL)
    conn.receive_data(frame1(b"") + b"\xff" + (1 << 30).to_bytes(8, "big") + bytes(1 << 16))
    assert conn.decoder.buffered > 1 << 16
    conn.close()
    assert conn.decoder.buffered == 0 and conn.state is ERROR_STATE


def test_zmtp_2_framing_limits_are_the_zmtp_3_ones():
    conn = Connection(T.PULL, max_msg_size=10)
    with pytest.raises(MessageTooLarge, match="MAXMSGSIZE 10"):
        conn.receive_data(
            signature() + b"\x01\x08" + frame(b"") + b"\x02" + (11).to_bytes(8, "big")
        )
    dec = FrameDecoder(command_frames=False)
    with pytest.raises(MessageTooLarge, match="more than any process can hold"):
        dec.feed(b"\x02" + (MAX_FRAME_SIZE + 1).to_bytes(8, "big"))


# -- over tcp, against raw peers ------------------------------------------------------------------

TIMEOUT = 5.0


def read_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))  # bounded by the socket's timeout
        assert chunk, f"connection closed after {len(data)} of {n} octets"
        data += chunk
    return data


def raw_peer(addr: str) -> socket.socket:
    host, port = addr[len("tcp://") :].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=TIMEOUT)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def zmtp2_handshake(sock: socket.socket, peer_type: T, our_type: T, identity: bytes) -> None:
    """Open as a ZMTP 2.0 peer (libzmq 3.2 / JeroMQ 0.3 order) and check brokerless's side."""
    sock.sendall(signature(len(identity)))
    assert read_exact(sock, 10)[0] == 0xFF
    sock.sendall(bytes((1, peer_type)) + frame(identity))
    assert read_exact(sock, 2) == bytes((3, our_type))
    assert read_exact(sock, 2) == b"\x00\x00"  # its (empty) routing id


def test_a_pull_receives_from_a_zmtp_2_push(make):
    pull = make(zmq.PULL)
    with raw_peer(bind(pull, "tcp://127.0.0.1:*")) as raw:
        zmtp2_handshake(raw, T.PUSH, T.PULL, b"")
        raw.sendall(wire(b"one") + wire([b"two", b"x" * 300]))
        assert pull.recv() == b"one"
        assert pull.recv_multipart() == [b"two", b"x" * 300]


def test_a_router_talks_to_a_zmtp_2_dealer_by_its_identity(make):
    router = make(zmq.ROUTER)
    with raw_peer(bind(router, "tcp://127.0.0.1:*")) as raw:
        zmtp2_handshake(raw, T.DEALER, T.ROUTER, b"dealer-7")
        raw.sendall(wire([b"", b"request"]))
        assert router.recv_multipart() == [b"dealer-7", b"", b"request"]
        router.send_multipart([b"dealer-7", b"", b"reply"])
        assert read_exact(raw, len(wire([b"", b"reply"]))) == wire([b"", b"reply"])


def test_a_null_socket_asking_zap_drops_a_zmtp_2_peer_without_asking(make, ctx):
    """With ZAP_DOMAIN set, NULL asks the ZAP handler about every peer; a ZMTP 2.0 peer has no
    handshake to ask about, so it is dropped after our signature and version, as libzmq drops
    it (CVE-2014-9721), and the handler hears nothing of it."""
    handler = ZapHandler(zmq, ctx, lambda request: (b"200", b"", b""))
    try:
        pull = make(zmq.PULL, ZAP_DOMAIN=b"domain")
        with raw_peer(bind(pull, "tcp://127.0.0.1:*")) as raw:
            raw.sendall(signature(0))
            assert read_exact(raw, 11) == signature(0) + b"\x03"
            raw.sendall(b"\x01")  # revision 1: ZMTP 2.0
            assert raw.recv(1) == b"", "the ZMTP 2.0 peer was not dropped"
        assert handler.requests == []
    finally:
        handler.close()


def test_a_connecting_push_speaks_zmtp_1_to_an_unversioned_peer(make):
    """Our PUSH connects to a ZMTP 1.0 PULL that opens with its identity frame."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(TIMEOUT)
        push = make(zmq.PUSH, ROUTING_ID=b"pusher")
        push.connect(f"tcp://127.0.0.1:{listener.getsockname()[1]}")
        push.send_multipart([b"m", b"y" * 300])
        raw, _ = listener.accept()
        with raw:
            raw.settimeout(TIMEOUT)
            raw.sendall(frame1(b"zmtp1-pull"))
            assert read_exact(raw, 10) == signature(6)  # our identity frame's header...
            assert read_exact(raw, 6) == b"pusher"  # ...and its body
            expected = wire1([b"m", b"y" * 300])
            assert read_exact(raw, len(expected)) == expected


def test_a_pub_publishes_to_a_zmtp_1_subscriber_in_its_framing(make):
    pub = make(zmq.PUB)
    with raw_peer(bind(pub, "tcp://127.0.0.1:*")) as raw:
        raw.sendall(frame1(b""))  # anonymous, and it will send no subscription
        assert read_exact(raw, 10 + 0) == signature(0)
        deadline = time.monotonic() + TIMEOUT
        while not select.select([raw], [], [], 0.01)[0]:  # until its pipe is attached
            assert time.monotonic() < deadline, "nothing published reached the peer"
            pub.send(b"news")
        assert read_exact(raw, 6) == wire1(b"news")


def test_no_ping_to_a_zmtp_2_peer_and_no_heartbeat_timeout(make, capfd):
    """libzmq sends no PING to ZMTP 2.0 / 1.0 peers (they have no commands), so it cannot
    expect their PONGs: a silent old peer stays connected past several heartbeat timeouts,
    and the I/O thread does not even try (it would report the error on stderr)."""
    pull = make(zmq.PULL, HEARTBEAT_IVL=50, HEARTBEAT_TIMEOUT=100)
    monitor = pull.get_monitor_socket(zmq.EVENT_DISCONNECTED)
    with raw_peer(bind(pull, "tcp://127.0.0.1:*")) as raw:
        zmtp2_handshake(raw, T.PUSH, T.PULL, b"")
        assert not monitor.poll(600), "the silent ZMTP 2.0 peer was dropped"
        assert select.select([raw], [], [], 0)[0] == [], "something (a PING?) was sent"
        raw.sendall(wire(b"still here"))
        assert pull.recv() == b"still here"
    pull.disable_monitor()
    monitor.close(linger=0)
    assert "Traceback" not in capfd.readouterr().err
