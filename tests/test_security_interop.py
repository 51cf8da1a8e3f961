"""PLAIN and CURVE between brokerless and libzmq (through pyzmq), both ways, with and without a
ZAP handler, for PUSH/PULL, REQ/REP, DEALER/ROUTER and PUB/SUB -- subscriptions and envelopes
travel inside the boxes -- and refusals seen on the monitor with libzmq's values."""

from __future__ import annotations

import time

import pytest
import zmq as libzmq

import brokerless as zmq
from tests.security_helpers import (
    ZapHandler,
    handshake_events,
    keys_policy,
    make_keys,
    next_event,
    plain_policy,
    secure,
)

pytestmark = pytest.mark.timeout(30)

HANDSHAKE = handshake_events(zmq)
PATTERNS = {
    "push-pull": ("PULL", "PUSH"),
    "req-rep": ("REP", "REQ"),
    "dealer-router": ("ROUTER", "DEALER"),
    "pub-sub": ("PUB", "SUB"),
}


@pytest.fixture
def sides(ctx, lctx):
    """(module, context) of brokerless and libzmq, by name; ZAP handlers closed at the end."""
    handlers: list[ZapHandler] = []
    yield {"brokerless": (zmq, ctx), "libzmq": (libzmq, lctx)}, handlers
    for handler in handlers:
        handler.close()


def socket(mod, ctx, kind):
    sock = ctx.socket(getattr(mod, kind))
    sock.setsockopt(mod.LINGER, 0)
    sock.setsockopt(mod.RCVTIMEO, 5000)
    sock.setsockopt(mod.SNDTIMEO, 5000)
    return sock


def recv(sock, mod, timeout_ms=5000):
    assert sock.poll(timeout_ms, mod.POLLIN), "nothing received"
    return sock.recv_multipart()


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
@pytest.mark.parametrize(
    ("mechanism", "zap"),
    # PLAIN always needs a ZAP handler (without one it is refused: test_security.py).
    [("plain", "zap"), ("curve", "zap"), ("curve", "no-zap")],
)
@pytest.mark.parametrize("server_side", ["brokerless", "libzmq"])
def test_secure_patterns_interoperate(sides, server_side, mechanism, zap, pattern):
    impls, handlers = sides
    client_side = "libzmq" if server_side == "brokerless" else "brokerless"
    smod, sctx = impls[server_side]
    cmod, cctx = impls[client_side]
    if zap == "zap":
        handlers.append(ZapHandler(smod, sctx, plain_policy))
    server_type, client_type = PATTERNS[pattern]
    server, client = socket(smod, sctx, server_type), socket(cmod, cctx, client_type)
    secure(mechanism, server, client, smod, cmod, make_keys(zmq))
    if client_type == "DEALER":
        client.setsockopt(cmod.ROUTING_ID, b"dealer-1")
    port = server.bind_to_random_port("tcp://127.0.0.1")
    client.connect(f"tcp://127.0.0.1:{port}")
    try:
        if pattern == "push-pull":
            client.send_multipart([b"part-1", b"", b"x" * 70000])
            assert recv(server, smod) == [b"part-1", b"", b"x" * 70000]
        elif pattern == "req-rep":
            for i in range(3):
                client.send(b"request %d" % i)
                assert recv(server, smod) == [b"request %d" % i]
                server.send(b"reply %d" % i)
                assert recv(client, cmod) == [b"reply %d" % i]
        elif pattern == "dealer-router":
            client.send_multipart([b"", b"hello"])
            assert recv(server, smod) == [b"dealer-1", b"", b"hello"]
            server.send_multipart([b"dealer-1", b"", b"back"])
            assert recv(client, cmod) == [b"", b"back"]
        else:
            client.setsockopt(cmod.SUBSCRIBE, b"wanted")
            deadline = time.monotonic() + 5
            while not client.poll(20, cmod.POLLIN):  # until the subscription is in
                assert time.monotonic() < deadline, "the subscription never arrived"
                server.send_multipart([b"unwanted", b"0"])
                server.send_multipart([b"wanted", b"1"])
            for _ in range(3):
                assert recv(client, cmod) == [b"wanted", b"1"]
                server.send_multipart([b"unwanted", b"0"])
                server.send_multipart([b"wanted", b"1"])
    finally:
        server.close(linger=0)
        client.close(linger=0)
    if zap == "zap":
        (handler,) = handlers
        assert handler.requests and handler.requests[0][5] == mechanism.upper().encode()


@pytest.mark.parametrize("server_side", ["brokerless", "libzmq"])
def test_wrong_password_between_implementations(sides, server_side):
    impls, handlers = sides
    client_side = "libzmq" if server_side == "brokerless" else "brokerless"
    smod, sctx = impls[server_side]
    cmod, cctx = impls[client_side]
    handlers.append(ZapHandler(smod, sctx, plain_policy))
    server, client = socket(smod, sctx, "PULL"), socket(cmod, cctx, "PUSH")
    secure("plain", server, client, smod, cmod, {}, password=b"wrong")
    server_events = server.get_monitor_socket(HANDSHAKE)
    client_events = client.get_monitor_socket(HANDSHAKE)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    client.connect(f"tcp://127.0.0.1:{port}")
    assert next_event(server_events, 5000, HANDSHAKE) == (zmq.EVENT_HANDSHAKE_FAILED_AUTH, 400)
    event, _ = next_event(client_events, 5000, HANDSHAKE)
    # libzmq's PLAIN misspells ERROR (see brokerless.zmtp.commands); brokerless reads libzmq's
    # spelling, but sends the RFC's, which a libzmq client reports as a protocol error.
    assert event != zmq.EVENT_HANDSHAKE_SUCCEEDED
    if client_side == "brokerless":
        assert event == zmq.EVENT_HANDSHAKE_FAILED_AUTH
    for sock in (server_events, client_events, server, client):
        sock.close(linger=0)


@pytest.mark.parametrize("server_side", ["brokerless", "libzmq"])
@pytest.mark.parametrize("refusal", ["wrong-server-key", "unknown-client-key"])
def test_curve_refusals_between_implementations(sides, server_side, refusal):
    impls, handlers = sides
    client_side = "libzmq" if server_side == "brokerless" else "brokerless"
    smod, sctx = impls[server_side]
    cmod, cctx = impls[client_side]
    keys = make_keys(zmq)
    if refusal == "unknown-client-key":
        handlers.append(ZapHandler(smod, sctx, keys_policy(set())))
    server, client = socket(smod, sctx, "PULL"), socket(cmod, cctx, "PUSH")
    secure("curve", server, client, smod, cmod, keys)
    if refusal == "wrong-server-key":
        client.setsockopt(cmod.CURVE_SERVERKEY, zmq.curve_keypair()[0])
    server_events = server.get_monitor_socket(HANDSHAKE)
    client_events = client.get_monitor_socket(HANDSHAKE)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    client.connect(f"tcp://127.0.0.1:{port}")
    if refusal == "wrong-server-key":
        assert next_event(server_events, 5000, HANDSHAKE) == (
            zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL,
            zmq.PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC,
        )
    else:
        expected = (zmq.EVENT_HANDSHAKE_FAILED_AUTH, 400)
        assert next_event(server_events, 5000, HANDSHAKE) == expected
        assert next_event(client_events, 5000, HANDSHAKE) == expected
    for sock in (server_events, client_events, server, client):
        sock.close(linger=0)


@pytest.mark.parametrize("server_side", ["brokerless", "libzmq"])
def test_heartbeats_travel_boxed_between_implementations(sides, server_side):
    """PING and PONG go inside CURVE boxes (libzmq marks them as commands there): with
    heartbeats faster than the timeout, the connection stays up with no traffic."""
    impls, _ = sides
    client_side = "libzmq" if server_side == "brokerless" else "brokerless"
    smod, sctx = impls[server_side]
    cmod, cctx = impls[client_side]
    server, client = socket(smod, sctx, "PULL"), socket(cmod, cctx, "PUSH")
    # A timeout well above a loaded machine's stalls: a side whose I/O thread is held up past
    # it drops the connection on waking, PINGs understood or not (a 200 ms timeout did once).
    for sock, mod in ((server, smod), (client, cmod)):
        sock.setsockopt(mod.HEARTBEAT_IVL, 50)
        sock.setsockopt(mod.HEARTBEAT_TIMEOUT, 1000)
    secure("curve", server, client, smod, cmod, make_keys(zmq))
    events = server.get_monitor_socket(HANDSHAKE | zmq.EVENT_DISCONNECTED)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    client.connect(f"tcp://127.0.0.1:{port}")
    assert next_event(events, 5000, HANDSHAKE) == (zmq.EVENT_HANDSHAKE_SUCCEEDED, 0)
    # Three heartbeat timeouts of silence: a PING not understood would have dropped it by now.
    assert not events.poll(3000), "the connection dropped while idle"
    client.send(b"still here")
    assert recv(server, smod) == [b"still here"]
    for sock in (events, server, client):
        sock.close(linger=0)


@pytest.mark.parametrize("client_side", ["brokerless", "libzmq"])
@pytest.mark.parametrize("server_side", ["brokerless", "libzmq"])
def test_a_curve_server_needs_only_its_secret_key(sides, server_side, client_side):
    # libzmq's server never reads CURVE_PUBLICKEY: one set up with its secret key alone is
    # common (and worked with libzmq, not with brokerless, whose server checked the vouch
    # against the unset option and failed every handshake with ZMTP_KEY_EXCHANGE).
    impls, _ = sides
    smod, sctx = impls[server_side]
    cmod, cctx = impls[client_side]
    keys = make_keys(zmq)
    server, client = socket(smod, sctx, "PULL"), socket(cmod, cctx, "PUSH")
    server.setsockopt(smod.CURVE_SERVER, 1)
    server.setsockopt(smod.CURVE_SECRETKEY, keys["server_secret"])
    client.setsockopt(cmod.CURVE_SERVERKEY, keys["server_public"])
    client.setsockopt(cmod.CURVE_PUBLICKEY, keys["client_public"])
    client.setsockopt(cmod.CURVE_SECRETKEY, keys["client_secret"])
    port = server.bind_to_random_port("tcp://127.0.0.1")
    client.connect(f"tcp://127.0.0.1:{port}")
    try:
        client.send(b"through the boxes")
        assert recv(server, smod) == [b"through the boxes"]
    finally:
        server.close()
        client.close()
