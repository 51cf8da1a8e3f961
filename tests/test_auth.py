"""zmq.auth (brokerless.auth): the ZAP handler's policy served from a thread or an asyncio loop,
certificate files, and both directions with libzmq (through pyzmq).

A handshake's outcome is read on the authenticating server's monitor: HANDSHAKE_SUCCEEDED, or
HANDSHAKE_FAILED_AUTH whose value is the ZAP status (400 refused, 500 the policy failed).  The
server binds and authenticates (PULL), the client connects (PUSH), so the frames the server
receives carry the User-Id the policy gave.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest
import zmq as libzmq
import zmq.auth.certs as libzmq_auth_certs
import zmq.auth.thread as libzmq_auth_thread

import brokerless as zmq
import brokerless.asyncio as zmq_asyncio
from brokerless.auth import (
    CURVE_ALLOW_ANY,
    Authenticator,
    create_certificates,
    load_certificate,
    load_certificates,
)
from brokerless.auth.asyncio import AsyncioAuthenticator
from brokerless.auth.thread import ThreadAuthenticator
from tests.security_helpers import ZAP_ENDPOINT, handshake_events, next_event

with warnings.catch_warnings():  # the module warns that it is deprecated, as pyzmq's does
    warnings.simplefilter("ignore", DeprecationWarning)
    from brokerless.auth.ioloop import IOLoopAuthenticator

pytestmark = pytest.mark.timeout(30)

HANDSHAKE = handshake_events(zmq)
SUCCEEDED = (int(zmq.EVENT_HANDSHAKE_SUCCEEDED), 0)
REFUSED = (int(zmq.EVENT_HANDSHAKE_FAILED_AUTH), 400)


# -- helpers -------------------------------------------------------------------------------------


def sockets(mod, ctx):
    """(server PULL, client PUSH) of ``mod`` in ``ctx``: linger 0, blocking calls bounded."""
    server, client = ctx.socket(mod.PULL), ctx.socket(mod.PUSH)
    for sock in (server, client):
        sock.linger = 0
        sock.rcvtimeo = sock.sndtimeo = 5000
    return server, client


def handshake(server, client) -> tuple[int, int]:
    """Bind ``server`` on tcp, connect ``client``; the server's handshake outcome."""
    monitor = server.get_monitor_socket(HANDSHAKE)
    try:
        port = server.bind_to_random_port("tcp://127.0.0.1")
        client.connect(f"tcp://127.0.0.1:{port}")
        return next_event(monitor, 5000, HANDSHAKE)
    finally:
        server.disable_monitor()
        monitor.close(linger=0)


def user_id(server, client) -> str:
    """The User-Id on a message the client sends the server (after a successful handshake)."""
    client.send(b"hello")
    frame = server.recv(copy=False)
    assert frame.bytes == b"hello"
    return frame.get("User-Id")


def curve(server, client, server_keys, client_keys) -> None:
    server.curve_secretkey, server.curve_publickey = server_keys[1], server_keys[0]
    server.curve_server = True
    client.curve_publickey, client.curve_secretkey = client_keys
    client.curve_serverkey = server_keys[0]


def plain(server, client, username: bytes, password: bytes) -> None:
    server.plain_server = True
    client.plain_username, client.plain_password = username, password


@pytest.fixture
def auth(ctx):
    authenticator = ThreadAuthenticator(ctx)
    authenticator.start()
    yield authenticator
    authenticator.stop()


@pytest.fixture
def pair(ctx):
    server, client = sockets(zmq, ctx)
    yield server, client
    server.close(linger=0)
    client.close(linger=0)


@pytest.fixture
def store(tmp_path):
    """Certificates of a server and a client in ``public/`` and ``private/`` (as pyzmq's
    examples keep them): {"public": dir, "server": (public, secret), "client": ...}."""
    public, private = tmp_path / "public", tmp_path / "private"
    public.mkdir()
    private.mkdir()
    for name in ("server", "client"):
        public_file, secret_file = create_certificates(tmp_path, name)
        shutil.move(public_file, public)
        shutil.move(secret_file, private)
    return {
        "public": public,
        "server": load_certificate(private / "server.key_secret"),
        "client": load_certificate(private / "client.key_secret"),
    }


class Replies:
    """Stands in for the ZAP socket: keeps the replies ``handle_zap_message`` sends."""

    def __init__(self) -> None:
        self.sent: list[list[bytes]] = []

    def send_multipart(self, frames: list[bytes]) -> None:
        self.sent.append(frames)


def request(mechanism: bytes, *credentials: bytes, domain=b"", address=b"127.0.0.1"):
    return [b"1.0", b"7", domain, address, b"", mechanism, *credentials]


def decide(auth, *requests: list[bytes]) -> list[list[bytes]]:
    """The policy alone: (status, text) of each reply ``auth`` gives to ``requests``, with no
    ZAP socket and no handshake."""
    auth.zap_socket = replies = Replies()
    for frames in requests:
        asyncio.run(auth.handle_zap_message(frames))
    return [reply[2:4] for reply in replies.sent]


# -- addresses -----------------------------------------------------------------------------------


def test_null_with_a_zap_domain_from_an_allowed_address_connects_as_anonymous(auth, pair):
    auth.allow("127.0.0.1")
    server, client = pair
    server.zap_domain = b"global"
    assert handshake(server, client) == SUCCEEDED
    assert user_id(server, client) == "anonymous"


@pytest.mark.parametrize("policy", ["deny 127.0.0.1", "allow 127.0.0.2"])
def test_an_address_denied_or_not_allowed_is_refused(auth, pair, policy):
    verb, address = policy.split()
    getattr(auth, verb)(address)
    server, client = pair
    server.zap_domain = b"global"
    assert handshake(server, client) == REFUSED


def test_allow_and_deny_exclude_each_other(ctx):
    auth = Authenticator(ctx)
    auth.allow("127.0.0.1")
    with pytest.raises(ValueError, match="not both"):
        auth.deny("127.0.0.2")
    auth = Authenticator(ctx)
    auth.deny("127.0.0.1")
    with pytest.raises(ValueError, match="not both"):
        auth.allow("127.0.0.2")


def test_an_address_not_denied_still_passes_the_mechanism_check(auth, pair):
    auth.deny("127.0.0.2")
    auth.configure_plain(passwords={"admin": "secret"})
    server, client = pair
    plain(server, client, b"admin", b"wrong")
    assert handshake(server, client) == REFUSED


# -- PLAIN ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("username", "password", "outcome"),
    [
        (b"admin", b"secret", SUCCEEDED),
        (b"admin", b"wrong", REFUSED),
        (b"nobody", b"secret", REFUSED),
    ],
)
def test_plain_passwords(auth, pair, username, password, outcome):
    auth.configure_plain(domain="*", passwords={"admin": "secret"})
    server, client = pair
    plain(server, client, username, password)
    assert handshake(server, client) == outcome
    if outcome == SUCCEEDED:
        assert user_id(server, client) == "admin"


@pytest.mark.parametrize(("password", "outcome"), [(b"secret", SUCCEEDED), (b"wrong", REFUSED)])
def test_a_password_configured_as_bytes_is_compared_not_an_internal_error(
    auth, pair, password, outcome
):
    """``configure_plain(passwords={"admin": b"secret"})``: the handler raised on it and every
    client got status 500 (pyzmq's refuses every one with 400); it is compared as octets."""
    auth.configure_plain(domain="*", passwords={"admin": b"secret"})
    server, client = pair
    plain(server, client, b"admin", password)
    assert handshake(server, client) == outcome


def test_plain_without_passwords_or_for_another_domain_is_refused(ctx):
    auth = Authenticator(ctx)
    credentials = request(b"PLAIN", b"admin", b"secret")
    assert decide(auth, credentials) == [[b"400", b"No passwords defined"]]
    auth.configure_plain(domain="other", passwords={"admin": "secret"})
    assert decide(auth, credentials, request(b"PLAIN", b"admin", b"secret", domain=b"other")) == [
        [b"400", b"Invalid domain"],
        [b"200", b"OK"],
    ]


# -- CURVE ---------------------------------------------------------------------------------------


def test_curve_clients_with_a_certificate_in_the_directory_get_in(auth, pair, store):
    auth.configure_curve(domain="*", location=store["public"])
    server, client = pair
    curve(server, client, store["server"], store["client"])
    assert handshake(server, client) == SUCCEEDED
    assert user_id(server, client) == store["client"][0].decode()


def test_curve_clients_without_a_certificate_are_refused(auth, pair, store):
    auth.configure_curve(domain="*", location=store["public"])
    server, client = pair
    curve(server, client, store["server"], zmq.curve_keypair())
    assert handshake(server, client) == REFUSED


def test_configure_curve_again_reads_certificates_added_since(auth, ctx, store, tmp_path):
    auth.configure_curve(domain="*", location=store["public"])
    newcomer_public, newcomer_secret = create_certificates(tmp_path, "newcomer")
    shutil.move(newcomer_public, store["public"])
    auth.configure_curve(domain="*", location=store["public"])
    server, client = sockets(zmq, ctx)
    curve(server, client, store["server"], load_certificate(newcomer_secret))
    assert handshake(server, client) == SUCCEEDED


def test_curve_allow_any_lets_every_client_in(auth, pair, store):
    auth.configure_curve(domain="*", location=CURVE_ALLOW_ANY)
    server, client = pair
    client_keys = zmq.curve_keypair()
    curve(server, client, store["server"], client_keys)
    assert handshake(server, client) == SUCCEEDED
    assert user_id(server, client) == client_keys[0].decode()


def test_curve_user_id_can_be_mapped(auth, pair, store):
    auth.configure_curve(domain="*", location=store["public"])
    auth.curve_user_id = lambda key: f"user-{len(key)}"
    server, client = pair
    curve(server, client, store["server"], store["client"])
    assert handshake(server, client) == SUCCEEDED
    assert user_id(server, client) == "user-32"


class Provider:
    """A credentials provider knowing one key; ``callback`` may be a coroutine."""

    def __init__(self, known: bytes, asynchronous: bool) -> None:
        self.known = known
        self.asked: list[tuple[str, bytes]] = []
        self.callback = self.async_check if asynchronous else self.check

    def check(self, domain: str, key: bytes) -> bool:
        self.asked.append((domain, key))
        return key == self.known

    async def async_check(self, domain: str, key: bytes) -> bool:
        await asyncio.sleep(0)  # a coroutine that really suspends
        return self.check(domain, key)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("known", [True, False], ids=["known", "unknown"])
def test_curve_callback_decides(auth, pair, store, asynchronous, known):
    provider = Provider(store["client"][0] if known else b"someone else", asynchronous)
    auth.configure_curve_callback(domain="*", credentials_provider=provider)
    server, client = pair
    curve(server, client, store["server"], store["client"])
    assert handshake(server, client) == (SUCCEEDED if known else REFUSED)
    assert provider.asked == [("*", store["client"][0])]


# -- bad requests and failing policies -----------------------------------------------------------


@pytest.fixture
def asker(auth, ctx):
    """A REQ socket connected to the running ThreadAuthenticator, to send it requests by hand."""
    sock = ctx.socket(zmq.REQ)
    sock.linger = 0
    sock.rcvtimeo = 5000
    sock.connect(ZAP_ENDPOINT)
    yield sock
    sock.close()


def test_malformed_zap_requests_are_refused_and_the_handler_goes_on(asker):
    asker.send_multipart([b"1.0", b"1", b"domain"])
    assert asker.recv_multipart() == [b"1.0", b"1", b"400", b"Not enough frames", b"", b""]
    asker.send_multipart([b"2.0", *request(b"NULL")[1:]])
    assert asker.recv_multipart()[2:4] == [b"400", b"Invalid version"]
    asker.send_multipart(request(b"PLAIN", b"only a username"))
    assert asker.recv_multipart()[2:4] == [b"400", b"Invalid credentials"]
    asker.send_multipart(request(b"NULL"))
    assert asker.recv_multipart() == [b"1.0", b"7", b"200", b"OK", b"anonymous", b""]


@pytest.mark.beyond_pyzmq  # pyzmq does not answer, and its thread dies on the next request
def test_a_request_of_one_frame_is_answered_and_the_handler_goes_on(asker):
    asker.send(b"1.0")
    assert asker.recv_multipart() == [b"1.0", b"", b"400", b"Not enough frames", b"", b""]
    asker.send_multipart(request(b"NULL"))
    assert asker.recv_multipart()[2:4] == [b"200", b"OK"]


@pytest.mark.beyond_pyzmq  # pyzmq's thread dies with the callback's exception
def test_a_failing_curve_callback_refuses_with_500_and_the_handler_goes_on(auth, ctx, store):
    class Broken:
        def callback(self, domain, key):
            raise RuntimeError("the key store is down")

    auth.configure_curve_callback(credentials_provider=Broken())
    for _ in range(2):
        server, client = sockets(zmq, ctx)
        curve(server, client, store["server"], store["client"])
        assert handshake(server, client) == (int(zmq.EVENT_HANDSHAKE_FAILED_AUTH), 500)
    assert auth.is_alive()


@pytest.mark.beyond_pyzmq  # pyzmq's configure_gssapi does nothing; it lets GSSAPI requests in
def test_gssapi_is_refused_clearly(ctx):
    auth = Authenticator(ctx)
    with pytest.raises(NotImplementedError, match="no GSSAPI"):
        auth.configure_gssapi()
    auth.allow("127.0.0.1")
    assert decide(auth, request(b"GSSAPI", b"principal")) == [[b"400", b"Unsupported mechanism"]]


@pytest.mark.beyond_pyzmq  # pyzmq logs the password
def test_passwords_never_reach_the_log(ctx, caplog):
    auth = Authenticator(ctx)
    auth.configure_plain(passwords={"admin": "hunter2"})
    with caplog.at_level("DEBUG", logger="zmq.auth"):
        decide(auth, request(b"PLAIN", b"admin", b"hunter2"), request(b"PLAIN", b"admin", b"x"))
    assert "ALLOWED (PLAIN)" in caplog.text
    assert "hunter" not in caplog.text


# -- with libzmq ---------------------------------------------------------------------------------


@pytest.mark.parametrize("known", [True, False], ids=["known", "unknown"])
def test_libzmq_client_to_a_brokerless_server_guarded_by_brokerless_auth(
    auth, pair, lctx, store, known
):
    auth.configure_curve(domain="*", location=store["public"])
    server, _ = pair
    _, client = sockets(libzmq, lctx)
    curve(server, client, store["server"], store["client"] if known else libzmq.curve_keypair())
    assert handshake(server, client) == (SUCCEEDED if known else REFUSED)
    if known:
        assert user_id(server, client) == store["client"][0].decode()


def test_libzmq_plain_client_to_a_brokerless_server_guarded_by_brokerless_auth(auth, pair, lctx):
    auth.configure_plain(passwords={"admin": "secret"})
    server, _ = pair
    _, client = sockets(libzmq, lctx)
    plain(server, client, b"admin", b"secret")
    assert handshake(server, client) == SUCCEEDED
    assert user_id(server, client) == "admin"


@pytest.mark.parametrize("known", [True, False], ids=["known", "unknown"])
def test_brokerless_client_to_a_libzmq_server_guarded_by_pyzmq_auth(ctx, lctx, store, known):
    guard = libzmq_auth_thread.ThreadAuthenticator(lctx)
    guard.start()
    try:
        guard.configure_curve(domain="*", location=str(store["public"]))
        server, _ = sockets(libzmq, lctx)
        _, client = sockets(zmq, ctx)
        curve(server, client, store["server"], store["client"] if known else zmq.curve_keypair())
        assert handshake(server, client) == (SUCCEEDED if known else REFUSED)
        if known:
            assert user_id(server, client) == store["client"][0].decode()
        client.close(linger=0)
        server.close(linger=0)
    finally:
        guard.stop()


# -- asyncio and the (deprecated) IOLoop authenticator -------------------------------------------


async def async_handshake(server, client) -> tuple[int, int]:
    monitor = server.get_monitor_socket(HANDSHAKE)
    try:
        port = server.bind_to_random_port("tcp://127.0.0.1")
        client.connect(f"tcp://127.0.0.1:{port}")
        while await monitor.poll(5000):
            head, _endpoint = await monitor.recv_multipart()
            event, value = struct.unpack("=HI", head[:6])
            if event & HANDSHAKE:
                return event, value
        raise AssertionError("no handshake event within 5 s")
    finally:
        server.disable_monitor()
        monitor.close(linger=0)


@pytest.mark.parametrize("kind", ["asyncio", "ioloop"])
async def test_asyncio_authenticators_serve_from_the_running_loop(kind):
    actx = zmq_asyncio.Context()
    auth = (AsyncioAuthenticator if kind == "asyncio" else IOLoopAuthenticator)(actx)
    auth.start()
    try:
        auth.configure_plain(passwords={"admin": "secret"})
        for password, outcome in [(b"secret", SUCCEEDED), (b"wrong", REFUSED)]:
            server, client = sockets(zmq, actx)
            plain(server, client, b"admin", password)
            assert await async_handshake(server, client) == outcome
            if outcome == SUCCEEDED:
                await client.send(b"hello")
                assert (await server.recv(copy=False)).get("User-Id") == "admin"
            server.close(linger=0)
            client.close(linger=0)
    finally:
        auth.stop()
        actx.term()


def test_an_asyncio_authenticator_started_before_its_loop_runs_serves_once_it_runs():
    """As pyzmq's (``asyncio.ensure_future``): started with the loop set but not running yet
    (``start()`` then ``loop.run_until_complete``, tornado's ``run_sync``), it serves once the
    loop runs.  brokerless's raised RuntimeError."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    actx = zmq_asyncio.Context()
    auth = AsyncioAuthenticator(actx)
    try:
        auth.start()
        auth.configure_plain(passwords={"admin": "secret"})
        server, client = sockets(zmq, actx)
        plain(server, client, b"admin", b"secret")
        assert loop.run_until_complete(asyncio.wait_for(async_handshake(server, client), 10)) == (
            SUCCEEDED
        )
        server.close(linger=0)
        client.close(linger=0)
    finally:
        auth.stop()
        loop.run_until_complete(asyncio.sleep(0))  # (the cancelled task finishes)
        loop.close()
        asyncio.set_event_loop(None)
        actx.term()


async def test_ioloop_authenticator_warns_of_its_io_loop_argument(ctx):
    from tornado.ioloop import IOLoop

    loop = IOLoop(make_current=False)
    try:
        with pytest.warns(DeprecationWarning):
            assert IOLoopAuthenticator(ctx, io_loop=loop).context is ctx
    finally:
        loop.close()


# -- certificates --------------------------------------------------------------------------------


def test_certificates_round_trip(tmp_path):
    public_file, secret_file = create_certificates(tmp_path, "peer", metadata={"name": "peer"})
    assert (public_file, secret_file) == (
        str(tmp_path / "peer.key"),
        str(tmp_path / "peer.key_secret"),
    )
    public, secret = load_certificate(secret_file)
    assert zmq.curve_public(secret) == public
    assert load_certificate(public_file) == (public, None)
    assert "secret" not in Path(public_file).read_text()
    assert load_certificates(tmp_path) == {public: True}


@pytest.mark.beyond_pyzmq  # pyzmq leaves the secret certificate to the umask
def test_the_secret_certificate_is_its_owners_alone(tmp_path):
    _, secret_file = create_certificates(tmp_path, "peer")
    assert stat.S_IMODE(os.stat(secret_file).st_mode) == 0o600


def test_certificates_written_by_one_load_in_the_other(tmp_path):
    pyzmq_auth = libzmq.auth
    theirs = pyzmq_auth.create_certificates(tmp_path, "theirs")[1]
    ours = create_certificates(tmp_path, "ours")[1]
    assert load_certificate(theirs) == pyzmq_auth.load_certificate(theirs)
    assert pyzmq_auth.load_certificate(ours) == load_certificate(ours)
    assert load_certificates(tmp_path) == pyzmq_auth.load_certificates(tmp_path)


def test_bad_certificates_are_refused(tmp_path):
    with pytest.raises(OSError, match="Invalid certificate file"):
        load_certificate(tmp_path / "missing.key")
    with pytest.raises(OSError, match="Invalid certificate directory"):
        load_certificates(tmp_path / "missing")
    keyless = tmp_path / "keyless.key"
    keyless.write_text("metadata\ncurve\n")
    with pytest.raises(ValueError, match="No public key"):
        load_certificate(keyless)


@pytest.mark.beyond_pyzmq  # pyzmq returns whatever stands after public-key
def test_a_certificate_whose_key_is_not_z85_is_refused(tmp_path):
    bad = tmp_path / "bad.key"
    bad.write_text('curve\n    public-key = "too short"\n')
    with pytest.raises(ValueError, match="not a CURVE key"):
        load_certificate(bad)


def test_configure_curve_with_a_missing_directory_logs_and_refuses(ctx, tmp_path, caplog):
    auth = Authenticator(ctx)
    with caplog.at_level("ERROR", logger="zmq.auth"):
        auth.configure_curve(location=tmp_path / "missing")
    assert "Failed to load CURVE certs" in caplog.text
    assert decide(auth, request(b"CURVE", bytes(32))) == [[b"400", b"Unknown domain"]]


# -- curve_keygen --------------------------------------------------------------------------------


def keygen(*args: str) -> subprocess.CompletedProcess[str]:
    module = f"{zmq.__name__}.curve_keygen"
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=60
    )


def test_curve_keygen_derives_the_public_key_of_a_secret():
    public, secret = zmq.curve_keypair()
    result = keygen(f"--secret={secret.decode()}", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"public": public.decode(), "secret": secret.decode()}


@pytest.mark.beyond_pyzmq  # pyzmq's argparse takes a key that starts with "-" for an option
def test_curve_keygen_takes_a_secret_that_starts_with_a_dash():
    secret = "-" + "a" * 39  # "-" is a Z85 digit: one secret key in 85 starts with it
    result = keygen("--secret", secret, "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "public": zmq.curve_public(secret.encode()).decode(),
        "secret": secret,
    }


@pytest.mark.beyond_pyzmq  # pyzmq fails with a ValueError traceback
def test_curve_keygen_refuses_a_bad_secret_with_a_usage_error():
    result = keygen("--secret", "not a key")
    assert result.returncode == 2
    assert "--secret must be a secret key of 40 Z85 characters" in result.stderr


# -- pyzmq's policy hooks ------------------------------------------------------------------------


@pytest.mark.parametrize("module", ["brokerless", "pyzmq"])
def test_a_subclass_that_overrides_a_policy_hook_decides(ctx, lctx, module):
    """pyzmq's authenticators decide through ``_authenticate_plain`` and ``_authenticate_curve``,
    which subclasses override (a password store, a revocation list).  brokerless's called
    methods of its own, so an override was ignored: a revoked key got in, and a password the
    override accepts was refused."""
    mod, context = (zmq, ctx) if module == "brokerless" else (libzmq, lctx)
    base = ThreadAuthenticator if module == "brokerless" else libzmq_auth_thread.ThreadAuthenticator

    class Policy(base):
        async def _authenticate_curve(self, domain, client_key):
            return False, b"revoked"

        def _authenticate_plain(self, domain, username, password):
            return password == "hashed-elsewhere", b"no"

    auth = Policy(context)
    auth.start()
    try:
        auth.configure_curve(domain="*", location=mod.auth.CURVE_ALLOW_ANY)
        server, client = sockets(mod, context)
        curve(server, client, mod.curve_keypair(), mod.curve_keypair())
        assert handshake(server, client) == REFUSED  # let in before
        server, client = sockets(mod, context)
        plain(server, client, b"admin", b"hashed-elsewhere")
        assert handshake(server, client) == SUCCEEDED  # refused before: no passwords configured
        assert user_id(server, client) == "admin"
    finally:
        auth.stop()


@pytest.mark.parametrize(
    "layout",
    [
        'curve\n    public-key = "{public}"\n    secret-key = "{secret}"\n',  # czmq's
        'curve\npublic-key = "{public}"\nsecret-key = "{secret}"\n',  # not indented
        'public-key = "{public}"\nsecret-key = "{secret}"\n',  # no section
        '\ufeff#   a comment\ncurve\n    public-key = "{public}"\n',  # a BOM, public only
        "  curve\n  public-key = '{public}'\n",  # an indented section name, single quotes
    ],
    ids=["czmq", "unindented", "no-section", "bom", "indented-section"],
)
def test_a_certificate_pyzmq_reads_is_read_the_same(tmp_path, layout):
    """pyzmq reads a key line wherever it stands; brokerless read it only in an indented
    ``curve`` section, so a hand-written certificate that works with pyzmq (and, loaded from
    a directory, every other key of the domain with it) was refused."""
    public, secret = zmq.curve_keypair()
    path = tmp_path / "hand.key_secret"
    path.write_text(layout.format(public=public.decode(), secret=secret.decode()), "utf-8")
    assert load_certificate(path) == libzmq_auth_certs.load_certificate(str(path))
    assert load_certificate(path)[0] == public


@pytest.mark.timeout(30)
def test_the_auth_thread_ends_quietly_when_its_context_is_destroyed_under_it(monkeypatch):
    """pyzmq's thread leaves its loop on a ZMQError; ours raised it out of the thread, which
    printed a traceback ("Exception in thread brokerless-zap") -- seen when a stream run's
    start failed and its context was destroyed with the authenticator still running."""
    raised: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))
    ctx = zmq.Context()
    auth = ThreadAuthenticator(ctx)
    auth.start()
    thread = auth.thread
    assert thread is not None
    ctx.destroy(linger=0)
    thread.join(10)
    assert not thread.is_alive() and raised == []
