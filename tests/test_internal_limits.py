"""The limits of brokerless's own sockets that strangers can reach (issue: hostile peers cost
only themselves): a worker's connections to other workers' ports take nothing big, the Spark
sink's XPUB takes only subscriptions of a sane size, and a ReliableSender only
acknowledgements.  The virtual port, the control channel and the Spark source have their own
tests (test_stream_hostile, test_stream_control, test_spark_source)."""

from __future__ import annotations

import pytest
import zmq as pyzmq  # the stranger is real libzmq
from pyspark.sql.types import BinaryType, StructField, StructType
from zmq.utils.monitor import recv_monitor_message

import brokerless as zmq
from brokerless.spark.ingest import ACK_MAX_FRAME, ReliableSender
from brokerless.spark.sink import (
    SUBSCRIPTION_MAX_BYTES,
    SinkConfig,
    SinkError,
)
from brokerless.spark.sink import _open as open_sink
from brokerless.stream.messaging import PEER_MAXMSGSIZE, SocketMessaging

pytestmark = pytest.mark.timeout(60)


def _wait_for(monitor, event: int, ms: int = 10_000) -> bool:
    while monitor.poll(ms):
        if recv_monitor_message(monitor)["event"] == event:
            return True
    return False


def test_a_worker_drops_a_port_that_sends_it_something_big(tmp_path):
    """A worker's DEALER to another worker's port only sends.  A stranger that took that
    port's place and sends a frame above PEER_MAXMSGSIZE is disconnected at once."""
    lctx = pyzmq.Context()
    context = zmq.Context()
    messaging = SocketMessaging(context, "tcp", str(tmp_path))
    try:
        stranger = lctx.socket(pyzmq.DEALER)
        stranger.linger = 0
        port = stranger.bind_to_random_port("tcp://127.0.0.1")
        monitor = stranger.get_monitor_socket()
        messaging.bind(1 << 20)
        messaging.connect([f"tcp://127.0.0.1:{port}"])
        assert _wait_for(monitor, pyzmq.EVENT_HANDSHAKE_SUCCEEDED)
        stranger.send(b"x" * (PEER_MAXMSGSIZE + 1))
        assert _wait_for(monitor, pyzmq.EVENT_DISCONNECTED)
    finally:
        messaging.interrupt()
        messaging.close()
        context.destroy(linger=0)
        lctx.destroy(linger=0)


def _sink(endpoint: str) -> SinkConfig:
    schema = StructType([StructField("payload", BinaryType())])
    options = {"endpoints": endpoint, "socketType": "PUB", "bind": "true", "timeoutMs": "1500"}
    return SinkConfig.from_options(options, schema)


@pytest.mark.parametrize("size", [1, SUBSCRIPTION_MAX_BYTES + 1])
def test_the_sink_takes_only_subscriptions_of_a_sane_size(tmp_path, size):
    """The sink's XPUB (bind mode, every interface on a cluster) waits for a subscriber; a
    subscription larger than SUBSCRIPTION_MAX_BYTES disconnects its sender instead of being
    held, so the sink goes on waiting (and fails after timeoutMs, having found no one)."""
    endpoint = f"ipc://{tmp_path}/sink"
    lctx = pyzmq.Context()
    context = zmq.Context()
    try:
        sub = lctx.socket(pyzmq.SUB)
        sub.linger = 0
        sub.connect(endpoint)
        sub.subscribe(b"t" * size)
        xpub = context.socket(zmq.XPUB)
        if size == 1:
            open_sink(xpub, _sink(endpoint))
        else:
            with pytest.raises(SinkError, match="no subscriber"):
                open_sink(xpub, _sink(endpoint))
        xpub.close(linger=0)
    finally:
        context.destroy(linger=0)
        lctx.destroy(linger=0)


def test_a_reliable_sender_drops_a_peer_that_sends_it_something_big(tmp_path):
    """A sender bound with bind=True takes connections from anyone; what it reads is only the
    source's acknowledgements, so a frame above ACK_MAX_FRAME disconnects its sender at once
    instead of being buffered whole."""
    endpoint = f"ipc://{tmp_path}/sender"
    lctx = pyzmq.Context()
    sender = ReliableSender(endpoint, bind=True)
    try:
        stranger = lctx.socket(pyzmq.DEALER)
        stranger.linger = 0
        monitor = stranger.get_monitor_socket()
        stranger.connect(endpoint)
        assert _wait_for(monitor, pyzmq.EVENT_HANDSHAKE_SUCCEEDED)
        stranger.send(b"x" * (ACK_MAX_FRAME + 1))
        assert _wait_for(monitor, pyzmq.EVENT_DISCONNECTED)
    finally:
        sender.close()
        lctx.destroy(linger=0)
