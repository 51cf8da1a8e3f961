"""Acknowledged ingestion without a Spark session (``brokerless.spark.ingest`` and the source's
receiver with ``ack=true``): a ReliableSender needs no pyspark; whatever a sender sends again --
after its own restart, the source's, or the log's trim -- the source logs each message once;
messages out of order and strangers' frames are dropped.  The Spark query with both ends
killed at random is in test_spark_io.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable

import brokerless as zmq
from brokerless.spark import ingest
from brokerless.spark.ingest import ReliableSender
from brokerless.spark.options import OptionError
from brokerless.spark.source import BrokerlessStreamReader, SourceConfig
from brokerless.spark.wal import read_range

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parent.parent
WAIT = 30.0


def _options(tmp_path, **options: str) -> dict[str, str]:
    return {
        "endpoints": f"ipc://{tmp_path}/source",
        "bind": "true",
        "walPath": str(tmp_path / "wal"),
        "ack": "true",
        **options,
    }


def logged(reader: BrokerlessStreamReader) -> list[list[bytes]]:
    """The payloads the source's log holds, in order (asked as Spark asks)."""
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    records = read_range(reader.config.wal_path, start["seq"], end["seq"])
    return [list(ingest.payload_of(r.frames)) for r in records]


def open_reader(tmp_path) -> BrokerlessStreamReader:
    reader = BrokerlessStreamReader(SourceConfig.from_options(_options(tmp_path)))
    reader._log()  # starts the receiver, as Spark's first call does
    return reader


_WITHOUT_PYSPARK = textwrap.dedent("""
    import sys
    sys.modules["pyspark"] = None  # any import of pyspark fails
    import brokerless as zmq
    from brokerless.spark import ReliableSender
    from brokerless.spark.ingest import decode_message, encode_ack

    context = zmq.Context()
    source = context.socket(zmq.ROUTER)
    port = source.bind_to_random_port("tcp://127.0.0.1")
    with ReliableSender(f"tcp://127.0.0.1:{port}", journal=sys.argv[1], context=context) as s:
        s.send_many([b"a", [b"b", b"c"]])
        while s.unacknowledged:
            route, *frames = source.recv_multipart()
            sender, seq, base, payload = decode_message(frames)
            source.send_multipart([route, *encode_ack(sender, seq)])
            s.pump(0.1)
    source.close()
    context.term()
    print("acknowledged", s.next_seq - 1)
""")


def test_a_reliable_sender_needs_no_pyspark(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_PYSPARK, str(tmp_path / "journal")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "acknowledged 2"


def test_ack_mode_options(tmp_path):
    config = SourceConfig.from_options(_options(tmp_path))
    assert config.ack and config.socket_type == "ROUTER"
    with pytest.raises(OptionError, match='"socketType" does not apply with ack=true'):
        SourceConfig.from_options(_options(tmp_path, socketType="PULL"))
    with pytest.raises(OptionError, match='"topics" applies to socketType SUB only'):
        SourceConfig.from_options(_options(tmp_path, topics="a"))
    with pytest.raises(OptionError, match='"ack" must be true or false'):
        SourceConfig.from_options(_options(tmp_path, ack="yes"))


def test_whatever_a_sender_sends_again_is_logged_once(tmp_path):
    """A sender's journal is copied while none of its 300 messages is acknowledged: each copy
    is that sender after a crash that came before the acknowledgements, and sends them all
    again -- to the receiver that logged them, to a restarted receiver (its table rebuilt from
    the log), and after Spark committed everything (the table then comes from the file the
    commit wrote, the log being empty).  The log holds each message once."""
    endpoint = f"ipc://{tmp_path}/source"
    messages = [b"%d" % n for n in range(300)]
    with ReliableSender(endpoint, journal=tmp_path / "journal") as sender:  # no source yet
        sender.send_many(messages[:150])
        sender.send_many(messages[150:])
        assert sender.unacknowledged == 300
    copies = [tmp_path / f"crashed-{i}" for i in range(4)]
    for copy in copies:
        shutil.copytree(tmp_path / "journal", copy)

    def send_again(journal: Path) -> None:
        with ReliableSender(endpoint, journal=journal, timeout=0.5) as again:
            assert again.unacknowledged == 300 and again.next_seq == 301
            assert again.flush(WAIT)

    reader = open_reader(tmp_path)
    try:
        send_again(copies[0])  # the first time the source hears of them
        send_again(copies[1])
        assert logged(reader) == [[m] for m in messages]
        reader.stop()
        reader = open_reader(tmp_path)
        send_again(copies[2])
        assert logged(reader) == [[m] for m in messages]
        reader.commit({"seq": 300})
        assert logged(reader) == []
        send_again(copies[3])
        assert logged(reader) == []
        assert list(reader._receiver._acks.durable.values()) == [300]
    finally:
        reader.stop()


def test_messages_out_of_order_and_strangers_frames_are_dropped(tmp_path):
    reader = open_reader(tmp_path)
    context = zmq.Context()
    peer = context.socket(zmq.DEALER)
    peer.linger = 0
    peer.connect(f"ipc://{tmp_path}/source")
    sender = os.urandom(ingest.ID_BYTES)
    try:
        peer.send_multipart([b"not", b"the protocol"])
        peer.send_multipart(ingest.encode_message(sender, 2, 1, [b"second"]))  # 1 is missing
        peer.send_multipart(ingest.encode_message(sender, 1, 1, [b"first"]))
        peer.send_multipart(ingest.encode_message(sender, 1, 1, [b"first, again"]))
        peer.send_multipart(ingest.encode_message(sender, 2, 1, [b"second"]))
        acks = []
        while not acks or acks[-1] != (sender, 2):
            assert peer.poll(int(WAIT * 1000)), f"acknowledgements so far: {acks}"
            acks.append(ingest.decode_ack(peer.recv_multipart()))
        assert logged(reader) == [[b"first"], [b"second"]]
    finally:
        peer.close()
        context.term()
        reader.stop()
