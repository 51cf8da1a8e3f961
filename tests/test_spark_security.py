"""Security on Spark: a topology's workers and control channel are CURVE by default (as in
multi-process mode, tests/test_stream_security.py), and the Structured Streaming source and
sink take CURVE/PLAIN options towards outside peers (``brokerless.spark.security``)."""

from __future__ import annotations

import pytest
import zmq as pyzmq  # the outside peers are real libzmq
from pyspark.sql.streaming import StreamingQueryException

import brokerless as zmq
from brokerless.spark import run_on_spark
from brokerless.spark.options import OptionError
from brokerless.spark.security import PeerSecurity
from brokerless.spark.sink import SinkConfig
from brokerless.spark.source import SourceConfig

from . import test_spark_io
from .ports import free_port
from .security_helpers import handshake_events, next_event
from .test_spark_io import SPARK_TIMEOUT, WAIT, Batches, _read, _recv
from .test_stream_security import VALUES, assert_refused, relay_topology, relayed, strangers

spark = test_spark_io.spark  # the same kind of local session, one for the module


@pytest.fixture
def zctx():
    context = pyzmq.Context()
    yield context
    context.destroy(linger=0)


def keypair() -> tuple[str, str]:
    public, secret = pyzmq.curve_keypair()
    return public.decode(), secret.decode()


def curve_client(sock, server_public: str) -> None:
    sock.curve_serverkey = server_public.encode()
    sock.curve_publickey, sock.curve_secretkey = pyzmq.curve_keypair()


# -- a topology on Spark ---------------------------------------------------------------------


@pytest.mark.timeout(SPARK_TIMEOUT)
def test_a_topology_on_spark_refuses_strangers_on_every_port(spark):
    """The worker ports (on every interface in Spark mode) and the driver's control port refuse
    NULL strangers and CURVE strangers with keys of their own; the result is exact."""
    with run_on_spark(relay_topology("curve"), spark=spark, workers=2, capture=True) as run:
        ports = [w["endpoint"] for w in run.worker_info] + [run.control_endpoint]
        found = [strangers(endpoint, run._keys.public) for endpoint in ports]
        try:
            for group in found:
                for _, stranger in group:
                    stranger.try_send([b"\0\0\0\1", b"injected"])
                assert_refused(group)
            run.wait_until_done(timeout=WAIT)
            assert relayed(run) == list(range(VALUES))
            assert run.errors() == []
            assert [w.bad_messages for w in run.statistics().workers] == [0, 0]
        finally:
            for group in found:
                for _, stranger in group:
                    stranger.close()


# -- the source and the sink towards outside peers --------------------------------------------


@pytest.mark.timeout(SPARK_TIMEOUT)
def test_a_source_bound_as_curve_server_takes_only_clients_with_its_key(spark, zctx, tmp_path):
    """A pyzmq PUSH that knows the source's public key gets its messages in; one with a wrong
    server key and one without CURVE get nothing through."""
    public, secret = keypair()
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    frame = _read(
        spark,
        endpoints=endpoint,
        socketType="PULL",
        bind="true",
        curveServer="true",
        curveSecretKey=secret,
        walPath=str(tmp_path / "wal"),
    )
    pushes = {}
    for name in ("good", "wrong key", "null"):
        push = pushes[name] = zctx.socket(pyzmq.PUSH)
        push.linger = 0
        if name == "good":
            curve_client(push, public)
        elif name == "wrong key":
            curve_client(push, keypair()[0])
    monitors = {name: push.get_monitor_socket() for name, push in pushes.items()}
    batches = Batches()
    query = (
        frame.writeStream.foreachBatch(batches)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        for push in pushes.values():
            push.connect(endpoint)  # retries until the source has bound
        for name, push in pushes.items():
            for i in range(5):
                push.send(b"%s %d" % (name.encode(), i))  # queued until a handshake succeeds
        wanted = handshake_events(pyzmq)
        assert next_event(monitors["good"], 1000 * WAIT, wanted)[0] == (
            pyzmq.EVENT_HANDSHAKE_SUCCEEDED
        )
        assert next_event(monitors["wrong key"], 1000 * WAIT, wanted)[0] != (
            pyzmq.EVENT_HANDSHAKE_SUCCEEDED
        )
        assert next_event(monitors["null"], 1000 * WAIT, wanted) == (
            pyzmq.EVENT_HANDSHAKE_FAILED_PROTOCOL,
            pyzmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH,
        )
        batches.wait(query, lambda: len(batches.all_rows()) >= 5, "the good client's rows")
    finally:
        query.stop()
    assert sorted(row.payload for row in batches.all_rows()) == [b"good %d" % i for i in range(5)]


@pytest.mark.parametrize("right_key", [True, False], ids=["right key", "wrong key"])
@pytest.mark.timeout(SPARK_TIMEOUT)
def test_a_sink_connects_as_curve_client_to_a_pyzmq_server(spark, zctx, tmp_path, right_key):
    """With the server's key the rows arrive; with another the server gets nothing and the
    task fails, saying nobody took the rows."""
    public, secret = keypair()
    pull = zctx.socket(pyzmq.PULL)
    pull.curve_server = 1
    pull.curve_secretkey = secret.encode()
    monitor = pull.get_monitor_socket()
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    client_public, client_secret = keypair()
    query = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", 4)
        .load()
        .selectExpr("CAST(value AS STRING) AS payload")
        .writeStream.format("brokerless")
        .option("endpoints", f"tcp://127.0.0.1:{port}")
        .option("curveServerKey", public if right_key else keypair()[0])
        .option("curvePublicKey", client_public)
        .option("curveSecretKey", client_secret)
        .option("timeoutMs", "3000")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        event = next_event(monitor, 1000 * WAIT, handshake_events(pyzmq))
        if right_key:
            assert event[0] == pyzmq.EVENT_HANDSHAKE_SUCCEEDED
            got = sorted(int(_recv(pull)[1]) for _ in range(4))
            assert got == [0, 1, 2, 3]
        else:
            assert event[0] != pyzmq.EVENT_HANDSHAKE_SUCCEEDED
            with pytest.raises(StreamingQueryException, match="still queued after timeoutMs"):
                query.awaitTermination(WAIT)
            assert not pull.poll(0)
    finally:
        query.stop()


# -- the options -------------------------------------------------------------------------------


def test_the_security_options_are_checked_with_errors_that_say_what_to_give():
    public, secret = keypair()
    other_public, _ = keypair()
    cases = [
        ({"curveServer": "true"}, 'CURVE needs "curveSecretKey"'),
        ({"curveSecretKey": secret}, 'CURVE needs "curveServerKey"'),
        (
            {"curveServer": "true", "curveServerKey": public, "curveSecretKey": secret},
            "contradict each other",
        ),
        ({"curveServerKey": public[:39], "curveSecretKey": secret}, "this one has 39"),
        ({"curveServerKey": "#" * 40, "curveSecretKey": secret}, "this one is not Z85"),
        (
            {"curveServer": "true", "curveSecretKey": secret, "curvePublicKey": other_public},
            '"curvePublicKey" is not the public key of "curveSecretKey"',
        ),
        ({"curveServer": "yes", "curveSecretKey": secret}, "must be true or false"),
        ({"plainUsername": "u"}, 'PLAIN needs "plainUsername" and "plainPassword"'),
        ({"plainUsername": "u", "plainPassword": "x" * 256}, "1 to 255 bytes"),
        ({"plainUsername": "u", "plainPassword": "p", "curveSecretKey": secret}, "do not mix"),
        ({"zapDomain": "d"}, '"zapDomain" applies to a server'),
    ]
    for options, message in cases:
        with pytest.raises(OptionError, match=message):
            PeerSecurity.from_options(options, "source")
    # names are case-insensitive, as every option of format("brokerless")
    found = PeerSecurity.from_options({"CURVESERVERKEY": public, "curvesecretkey": secret}, "sink")
    assert (found.mechanism, found.server, found.server_key) == (
        "CURVE",
        False,
        zmq.utils.z85.decode(public.encode()),
    )
    assert secret not in repr(found) and "secret_key" not in repr(found)
    plain = PeerSecurity.from_options(
        {"plainServer": "true", "plainUsername": "u", "plainPassword": "pw"}, "source"
    )
    assert (plain.mechanism, plain.server, plain.zap_domain) == ("PLAIN", True, "global")
    assert "pw" not in repr(plain)


def test_the_source_and_the_sink_take_the_security_options_and_check_them():
    from pyspark.sql.types import BinaryType, StructField, StructType

    _, secret = keypair()
    source = SourceConfig.from_options(
        {
            "endpoints": "tcp://127.0.0.1:1",
            "walPath": "/tmp/x",
            "ack": "true",  # the acknowledging ROUTER takes them as every socket type does
            "curveServer": "true",
            "curveSecretKey": secret,
            "zapDomain": "ingest",
        }
    )
    assert (source.security.mechanism, source.security.zap_domain) == ("CURVE", "ingest")
    schema = StructType([StructField("payload", BinaryType())])
    sink = SinkConfig.from_options(
        {"endpoints": "tcp://127.0.0.1:1", "plainUsername": "u", "plainPassword": "p"}, schema
    )
    assert (sink.security.mechanism, sink.security.username) == ("PLAIN", "u")
    with pytest.raises(OptionError, match=r"curveServerKey.*this one has 3"):
        SinkConfig.from_options(
            {"endpoints": "tcp://127.0.0.1:1", "curveServerKey": "abc", "curveSecretKey": secret},
            schema,
        )


@pytest.mark.timeout(60)
def test_a_plain_server_source_socket_admits_exactly_its_user():
    """What ``plainServer`` sets up, without Spark: a ZAP handler in the socket's context that
    admits the one username/password (a libzmq client with a wrong password is refused)."""
    security = PeerSecurity.from_options(
        {"plainServer": "true", "plainUsername": "user", "plainPassword": "right"}, "source"
    )
    context = zmq.Context()
    pull = context.socket(zmq.PULL)
    authenticator = security.apply(pull, context)
    refusals = pull.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_AUTH)
    client_context = pyzmq.Context()
    try:
        port = pull.bind_to_random_port("tcp://127.0.0.1")
        pushes = {}
        for password in (b"right", b"wrong"):
            push = pushes[password] = client_context.socket(pyzmq.PUSH)
            push.plain_username, push.plain_password = b"user", password
            monitor = push.get_monitor_socket()
            push.connect(f"tcp://127.0.0.1:{port}")
            event = next_event(monitor, 20_000, handshake_events(pyzmq))
            assert (event[0] == pyzmq.EVENT_HANDSHAKE_SUCCEEDED) == (password == b"right")
        # (libzmq's client reports the refusal as a protocol error: tests/test_security_interop)
        assert next_event(refusals, 20_000, zmq.EVENT_HANDSHAKE_FAILED_AUTH) == (
            zmq.EVENT_HANDSHAKE_FAILED_AUTH,
            400,
        )
        pushes[b"right"].send(b"in")
        assert pull.poll(20_000) and pull.recv() == b"in"
    finally:
        client_context.destroy(linger=0)
        pull.disable_monitor()
        refusals.close(linger=0)
        pull.close(linger=0)
        authenticator.stop()
        context.term()
