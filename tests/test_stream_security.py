"""The stream layer's own traffic is CURVE by default (``stream/security.py``): a stranger who
reaches a worker's virtual port or the driver's control channel can neither read nor inject
anything, and the run goes on exact; ``Config(security="none")`` keeps the old, open ports."""

from __future__ import annotations

import errno
import selectors
import socket
import threading
from functools import partial
from typing import Any

import msgpack
import pytest
import zmq as pyzmq  # strangers speak real libzmq too

import brokerless as zmq
from brokerless.stream import Config, Topology, shuffle
from brokerless.stream.control import Signer, WorkerChannel, new_key, worker_identity
from brokerless.stream.messaging import PACKING_ROOM, SocketMessaging, pack, unpack
from brokerless.stream.multiprocess import run_multiprocess
from brokerless.stream.security import admit_only_run, run_keys, serve_to_run
from brokerless.utils import z85

from .processes import child_pids
from .security_helpers import handshake_events, next_event
from .stream_topologies import Relay, ValueSpout, wait_for

pytestmark = pytest.mark.timeout(120)

VALUES = 300
MARKER = b"stranger-can-read-this"


@pytest.fixture(autouse=True)
def no_processes_left_behind():
    before = child_pids()
    yield
    assert child_pids() - before == set()


def relay_topology(security: str) -> Topology:
    """A reliable spout -> relay over two workers (the relay's tuples cross processes)."""
    return (
        Topology("secure", Config(num_workers=2, security=security))
        .spout("spout", partial(ValueSpout, range(VALUES)))
        .bolt("relay", Relay, parallelism=2, inputs={"spout": shuffle()})
    )


class Stranger:
    """A DEALER of ``module`` (brokerless or pyzmq) that connects to ``endpoint`` with
    ``curve`` keys (None: NULL) and a monitor on its handshakes."""

    def __init__(self, module: Any, endpoint: str, curve: dict[str, bytes] | None) -> None:
        self.context = module.Context()
        sock = self.sock = self.context.socket(module.DEALER)
        sock.linger = 0
        if curve is not None:
            sock.curve_serverkey = curve["server"]
            sock.curve_publickey, sock.curve_secretkey = module.curve_keypair()
        self.monitor = sock.get_monitor_socket()
        sock.connect(endpoint)

    def try_send(self, frames: list[bytes]) -> None:
        """Send ``frames`` if the socket takes them (a DEALER with no connection does not)."""
        try:
            self.sock.send_multipart(frames, zmq.NOBLOCK)
        except (zmq.Again, pyzmq.Again):
            pass

    def handshake(self, module: Any) -> tuple[int, int]:
        """How the first handshake ended (event, value), or the connection's end before it."""
        return next_event(
            self.monitor, 20_000, handshake_events(module) | module.EVENT_DISCONNECTED
        )

    def close(self) -> None:
        self.sock.disable_monitor()
        self.monitor.close(linger=0)
        self.sock.close(linger=0)
        self.context.term()


def strangers(endpoint: str, public: bytes) -> list[tuple[Any, Stranger]]:
    """NULL strangers on brokerless and libzmq; a libzmq CURVE stranger who knows the run's
    public key (the key is not a secret) but has a key of its own; a brokerless CURVE stranger
    who guessed the server key wrong."""
    wrong = zmq.curve_keypair()[0]
    return [
        (zmq, Stranger(zmq, endpoint, None)),
        (pyzmq, Stranger(pyzmq, endpoint, None)),
        (pyzmq, Stranger(pyzmq, endpoint, {"server": z85.encode(public)})),
        (zmq, Stranger(zmq, endpoint, {"server": wrong})),
    ]


def assert_refused(found: list[tuple[Any, Stranger]]) -> None:
    events = [stranger.handshake(module) for module, stranger in found]
    mismatch = pyzmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
    assert events == [
        (zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL, mismatch),  # NULL meets CURVE
        (pyzmq.EVENT_HANDSHAKE_FAILED_PROTOCOL, mismatch),
        (pyzmq.EVENT_HANDSHAKE_FAILED_AUTH, 400),  # the ZAP handler refused its key
        (zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL, errno.EPIPE),  # the server could not open its HELLO
    ], events


def relayed(run: Any) -> list[int]:
    return sorted(values[0] for component, _, values in run.captured() if component == "relay")


@pytest.mark.parametrize("transport", ["ipc", "tcp"])
def test_strangers_on_a_workers_virtual_port_are_refused_and_the_result_is_exact(transport):
    with run_multiprocess(relay_topology("curve"), transport=transport, capture=True) as run:
        found = []
        for worker in run.worker_info:
            found += strangers(worker["endpoint"], run._keys.public)
        try:
            for _, stranger in found:
                stranger.try_send([b"\0\0\0\1", MARKER])  # a bad pair, if it landed
            for index in range(0, len(found), 4):
                assert_refused(found[index : index + 4])
            run.wait_until_done(timeout=60)
            assert relayed(run) == list(range(VALUES))
            assert run.errors() == []
            assert [w.bad_messages for w in run.statistics().workers] == [0, 0]
        finally:
            for _, stranger in found:
                stranger.close()


def test_strangers_on_the_control_channel_are_refused_even_with_the_signing_key():
    """The control channel is CURVE too: a stranger who has the run's signing key (but not its
    CURVE secret) gets no signed message to the driver."""
    with run_multiprocess(relay_topology("curve"), capture=True) as run:
        endpoint = run._control.getsockopt(zmq.LAST_ENDPOINT).decode()
        found = strangers(endpoint, run._keys.public)
        try:
            identity = worker_identity(run.attempt, 0)
            marker = ("stranger", "default", ("injected",))
            for _, stranger in found:
                stranger.try_send([identity, *run._signer.pack(("events", [marker], []), identity)])
            assert_refused(found)
            run.wait_until_done(timeout=60)
            assert marker not in run.captured()
            assert relayed(run) == list(range(VALUES))
            assert run.errors() == []
        finally:
            for _, stranger in found:
                stranger.close()


def test_with_security_none_a_stranger_still_gets_in():
    """``security="none"``: the old, open ports (a NULL stranger's handshake succeeds and its
    bad pair is counted), and the run is as exact."""
    with run_multiprocess(relay_topology("none"), transport="tcp", capture=True) as run:
        assert run._keys is None
        stranger = Stranger(zmq, run.worker_info[0]["endpoint"], None)
        try:
            assert stranger.handshake(zmq)[0] == zmq.EVENT_HANDSHAKE_SUCCEEDED
            stranger.sock.send_multipart([b"\0\0\0\1", MARKER])
            run.wait_until_done(timeout=60)
            assert relayed(run) == list(range(VALUES))
            wait_for(
                lambda: run.statistics().workers[0].bad_messages == 1,
                timeout=20,
                what="the stranger's bad pair to be counted",
            )
        finally:
            stranger.close()


def test_an_unknown_security_mode_is_refused_before_anything_starts():
    with pytest.raises(Exception, match="security must be 'curve' or 'none', not 'tls'"):
        run_multiprocess(relay_topology("tls"))


# -- what a listener on the wire sees --------------------------------------------------------


class WireTap:
    """A tcp relay to ``port`` on 127.0.0.1 that keeps every byte it passes (both ways)."""

    def __init__(self, port: int) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"tcp://127.0.0.1:{self.listener.getsockname()[1]}"
        self.port = port
        self.seen = bytearray()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="wiretap", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.listener.settimeout(10)
        inside, _ = self.listener.accept()
        outside = socket.create_connection(("127.0.0.1", self.port))
        other = {inside: outside, outside: inside}
        with selectors.DefaultSelector() as selector:
            for sock in other:
                selector.register(sock, selectors.EVENT_READ)
            while not self.stop.is_set():
                for key, _ in selector.select(0.05):
                    data = key.fileobj.recv(65536)
                    if not data:
                        return
                    self.seen += data
                    other[key.fileobj].sendall(data)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.listener.close()


@pytest.mark.parametrize("security", ["curve", "none"])
def test_a_listener_on_the_wire_reads_tuples_only_without_security(security):
    keys = run_keys(security)
    contexts = [zmq.Context(), zmq.Context()]  # a ZAP handler each, as two workers have
    receiver = SocketMessaging(contexts[0], "tcp", keys=keys)
    sender = SocketMessaging(contexts[1], "tcp", keys=keys)
    try:
        endpoint = receiver.bind(1 << 20)
        tap = WireTap(int(endpoint.rsplit(":", 1)[1]))
        sender.connect([sender.bind(1 << 20), tap.endpoint])
        sender.send(1, [b"\0\0\0\1", MARKER])
        got = receiver.recv(timeout=20)
        assert got is not None and got[1] == [b"\0\0\0\1", MARKER]
        tap.close()
        assert (MARKER in tap.seen) == (security == "none")
    finally:
        sender.close()
        receiver.close()
        for context in contexts:
            context.term()


@pytest.mark.parametrize("security", ["curve", "none"])
def test_a_listener_on_the_wire_reads_control_messages_only_without_security(security):
    keys = run_keys(security)
    context = zmq.Context()
    authenticator = admit_only_run(context, keys)
    driver = context.socket(zmq.ROUTER)
    driver.linger = 0
    serve_to_run(driver, keys)
    port = driver.bind_to_random_port("tcp://127.0.0.1")
    tap = WireTap(port)
    key = new_key()
    channel = WorkerChannel(context, tap.endpoint, key, 1, 0, keys=keys)
    try:
        channel.send(("events", [("c", "default", (MARKER,))], []))
        assert driver.poll(20_000)
        _, identity, *frames = driver.recv_multipart()
        assert Signer(key).unpack(frames, identity)[1][0][2] == (MARKER,)
        tap.close()
        assert (MARKER in tap.seen) == (security == "none")
    finally:
        channel.close(linger=0)
        driver.close(linger=0)
        if authenticator is not None:
            authenticator.stop()
        context.term()


def test_a_batch_over_curve_travels_packed_in_parts_the_port_takes():
    frames = [b"\0\0\0\1", b"x" * 10, b"\0\0\0\2", b"", b"y" * 100]
    parts = pack(frames, 30)
    assert [len(p) for p in parts] == [19, 9, 103]  # a frame too big to share goes alone
    assert [len(msgpack.unpackb(p)) for p in parts] == [2, 2, 1]
    assert unpack(parts) == frames
    assert unpack(pack(frames, 1 << 20)) == frames and len(pack(frames, 1 << 20)) == 1
    for limit in (30, 1 << 20):  # the largest frame the port takes fits in a part alone
        largest = [b"\0\0\0\1", b"z" * (limit - PACKING_ROOM)]
        assert [len(p) <= limit for p in pack(largest, limit)] == [True, True]
        assert unpack(pack(largest, limit)) == largest
    not_packings = (
        [b"\xc1 not msgpack"],
        [msgpack.packb([b"ab"]) + b"more"],  # a packing and more
        [msgpack.packb(b"ab")],  # not an array
        [msgpack.packb([b"ab", "text"])],  # not only binaries
        [msgpack.packb([b"ab"]), msgpack.packb([[b"cd"]])],  # one part good, one not
    )
    for bad in not_packings:  # handed on as it is, to be dropped by the receiver's checks
        assert unpack(bad) == bad
