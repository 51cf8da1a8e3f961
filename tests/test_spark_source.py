"""The Spark source's receiver without a Spark session: its socket's limits (maxMessageSize,
rcvhwm), push-back that loses nothing, offsets checked against the log as it reopened, and the
SIGTERM that ends a stopped query's source process."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import zmq as pyzmq  # the peer is real libzmq
from pyspark.sql.streaming.datasource import ReadAllAvailable
from pyspark.sql.types import BinaryType, StructField, StructType
from zmq.utils.monitor import recv_monitor_message

from brokerless.spark import receiver
from brokerless.spark.options import OptionError
from brokerless.spark.sink import SinkConfig
from brokerless.spark.source import BrokerlessStreamReader, SourceConfig, SourceError, WalRange
from brokerless.spark.wal import WriteAheadLog, read_range

from .stream_topologies import wait_for

WAIT = 30.0  # seconds to wait for something that should happen in a few
pytestmark = pytest.mark.timeout(120)


def _options(tmp_path, **options: str) -> dict[str, str]:
    return {
        "endpoints": f"ipc://{tmp_path}/source",
        "socketType": "PULL",
        "bind": "true",
        "walPath": str(tmp_path / "wal"),
        **options,
    }


class FlushGate:
    """Stands in for a running receiver's ``wal.flush``: holds flushes back while closed and
    lets the test wait for a record to become durable."""

    def __init__(self, reader: BrokerlessStreamReader) -> None:
        self.wal = reader._log()
        self._flush = self.wal.flush
        self.open = threading.Event()
        self.open.set()
        self.flushed = threading.Condition()
        self.wal.flush = self  # the receiver looks the method up at every drain

    def __call__(self) -> int:
        assert self.open.wait(WAIT), "the test never opened the gate"
        durable = self._flush()
        with self.flushed:
            self.flushed.notify_all()
        return durable

    def wait_durable(self, seq: int) -> None:
        with self.flushed:
            assert self.flushed.wait_for(lambda: self.wal.durable_seq >= seq, WAIT), (
                f"record {seq} never became durable (at {self.wal.durable_seq})"
            )


@pytest.fixture
def pyctx():
    context = pyzmq.Context()
    yield context
    context.destroy(linger=0)


@pytest.fixture
def readers():
    made: list[BrokerlessStreamReader] = []

    def make(options: dict[str, str]) -> BrokerlessStreamReader:
        reader = BrokerlessStreamReader(SourceConfig.from_options(options))
        made.append(reader)
        return reader

    yield make
    for reader in made:
        reader.stop()


def test_source_limit_options_have_finite_defaults_and_are_checked(tmp_path):
    config = SourceConfig.from_options(_options(tmp_path))
    assert (config.max_message_size, config.rcvhwm, config.max_backlog_bytes) == (
        1 << 20,
        1000,
        1 << 30,
    )
    config = SourceConfig.from_options(
        _options(tmp_path, maxMessageSize="4096", rcvhwm="7", maxBacklogBytes="9")
    )
    assert (config.max_message_size, config.rcvhwm, config.max_backlog_bytes) == (4096, 7, 9)
    for name in ("maxMessageSize", "rcvhwm", "maxBacklogBytes"):
        for bad in ("0", "-1", "lots"):
            with pytest.raises(OptionError, match=f'option "{name}" must be a positive integer'):
                SourceConfig.from_options(_options(tmp_path, **{name: bad}))


def test_source_drops_a_peer_whose_frame_exceeds_max_message_size(tmp_path, pyctx, readers):
    """The oversize frame is refused as its header arrives (the peer is disconnected, as
    libzmq does) and never logged; what came before it and after the peer reconnects is."""
    reader = readers(_options(tmp_path, maxMessageSize="1000"))
    gate = FlushGate(reader)
    push = pyctx.socket(pyzmq.PUSH)
    monitor = push.get_monitor_socket(pyzmq.EVENT_DISCONNECTED | pyzmq.EVENT_HANDSHAKE_SUCCEEDED)
    push.connect(f"ipc://{tmp_path}/source")
    push.send_multipart([b"before", b"x" * 1000])
    push.send(b"y" * 1001)
    gate.wait_durable(1)
    events = []
    while len(events) < 3:  # connected, dropped for the oversize frame, connected again
        assert monitor.poll(int(WAIT * 1000)), f"no reconnection after {events}"
        events.append(recv_monitor_message(monitor)["event"])
    assert events == [
        pyzmq.EVENT_HANDSHAKE_SUCCEEDED,
        pyzmq.EVENT_DISCONNECTED,
        pyzmq.EVENT_HANDSHAKE_SUCCEEDED,
    ]
    push.send(b"after")
    gate.wait_durable(2)
    assert [r.frames for r in read_range(tmp_path / "wal", 0, 2)] == [
        [b"before", b"x" * 1000],
        [b"after"],
    ]
    push.close(linger=0)
    monitor.close(linger=0)


_LIMIT = 4000  # messages of 8 KiB: far more than the socket, its pipe and the kernel hold


def _fill_while_the_log_stalls(
    reader: BrokerlessStreamReader, pyctx: pyzmq.Context, tmp_path
) -> tuple[FlushGate, pyzmq.Socket, int]:
    """Hold the reader's log flushes back and push numbered messages until the source stops
    taking them (a full second without room); returns the gate, the PUSH and how many went."""
    gate = FlushGate(reader)
    gate.open.clear()
    return (gate, *_fill(pyctx, tmp_path))


def _fill(pyctx: pyzmq.Context, tmp_path) -> tuple[pyzmq.Socket, int]:
    """Push numbered messages of 8 KiB until the source stops taking them (a full second
    without room); returns the PUSH and how many went."""
    push = pyctx.socket(pyzmq.PUSH)
    push.sndhwm = 10
    push.connect(f"ipc://{tmp_path}/source")
    sent = 0
    while sent < _LIMIT:
        try:
            push.send(b"%08d" % sent + bytes(8192), pyzmq.NOBLOCK)
            sent += 1
        except pyzmq.Again:
            if not push.poll(1000, pyzmq.POLLOUT):
                break
    return push, sent


def test_a_pull_source_whose_log_stalls_pushes_back_and_loses_nothing(tmp_path, pyctx, readers):
    """While the log cannot flush, the socket holds at most rcvhwm messages and then stops
    reading, so the PUSH peer waits (here: it gets EAGAIN) instead of the receiver buffering
    without bound; once the log moves, every message the peer sent is logged, in order."""
    reader = readers(_options(tmp_path, rcvhwm="50"))
    gate, push, sent = _fill_while_the_log_stalls(reader, pyctx, tmp_path)
    assert sent < _LIMIT, "the source took everything: no push-back"
    gate.open.set()
    gate.wait_durable(sent)
    got = [r.frames[0][:8] for r in read_range(tmp_path / "wal", 0, sent)]
    assert got == [b"%08d" % i for i in range(sent)]
    push.close(linger=0)


def test_a_source_whose_backlog_is_full_reads_nothing_until_spark_takes_more(
    tmp_path, pyctx, readers
):
    """A peer faster than the query: once the log holds maxBacklogBytes that Spark has not
    taken into a batch, the source reads nothing more and the PUSH peer waits; each batch
    Spark takes lets more in, and every message arrives, in order.  Before, the source read
    whatever came: a PUSH at full speed grew the log by 100 MB/s while the query took 100 rows
    a batch, until the disk was full."""
    backlog = 100 * 8200  # a hundred of _fill's messages
    reader = readers(_options(tmp_path, rcvhwm="10", maxBacklogBytes=str(backlog)))
    wal = reader._log()  # the query starts: the receiver runs
    push, sent = _fill(pyctx, tmp_path)
    assert sent < _LIMIT, "the source took everything: no push-back"
    logged = wal.durable_seq
    assert logged * 8200 >= backlog and logged < sent

    def next_batch() -> int:  # Spark plans a batch of everything logged, and takes it
        return reader.latestOffset({"seq": 0}, ReadAllAvailable())["seq"]

    assert next_batch() >= logged
    wait_for(lambda: next_batch() == sent, WAIT, "every message, batch after batch")
    got = [r.frames[0][:8] for r in read_range(tmp_path / "wal", 0, sent)]
    assert got == [b"%08d" % i for i in range(sent)]
    push.close(linger=0)


def test_stopping_logs_everything_the_socket_holds_even_past_one_drain(
    tmp_path, pyctx, readers, monkeypatch
):
    """At stop, the messages the socket has taken (up to rcvhwm, here more than one drain
    takes) go to the log for the next run; only what is still on its way is ZeroMQ's to lose."""
    monkeypatch.setattr(receiver, "_MAX_DRAIN", 10)
    reader = readers(_options(tmp_path, rcvhwm="200"))
    gate, push, sent = _fill_while_the_log_stalls(reader, pyctx, tmp_path)  # it holds 200
    stopper = threading.Thread(target=reader.stop)
    stopper.start()
    gate.open.set()
    stopper.join(WAIT)
    assert not stopper.is_alive()
    with WriteAheadLog(tmp_path / "wal", fsync=False) as wal:
        logged = wal.durable_seq
    assert 200 < logged <= sent  # the first drain's messages, then the 200 the socket held
    got = [r.frames[0][:8] for r in read_range(tmp_path / "wal", 0, logged)]
    assert got == [b"%08d" % i for i in range(logged)]
    push.close(linger=0)


def test_an_offset_past_what_the_log_held_when_it_reopened_is_refused(tmp_path, pyctx, readers):
    """The log lost records 6..10 that an earlier run had processed (fsync=false and a machine
    crash).  New messages are numbered from 6 again, so once 6..11 are logged, Spark's
    checkpoint (up to 10) must be refused -- not taken to mean the new 6..10 were processed --
    and so must a replay of a batch it planned up to 10."""
    with WriteAheadLog(tmp_path / "wal") as wal:
        for i in range(5):
            wal.append([b"old-%d" % i], i)
        wal.flush()
    reader = readers(_options(tmp_path))
    gate = FlushGate(reader)
    push = pyctx.socket(pyzmq.PUSH)
    push.connect(f"ipc://{tmp_path}/source")
    for i in range(6):
        push.send(b"new-%d" % i)
    gate.wait_durable(11)
    with pytest.raises(SourceError, match=r"processed up to record 10, .* ended at 5 when it"):
        reader.latestOffset({"seq": 10}, ReadAllAvailable())
    with pytest.raises(SourceError, match=r"processed up to record 10, .* ended at 5 when it"):
        reader.partitions({"seq": 5}, {"seq": 10})
    assert reader.latestOffset({"seq": 5}, ReadAllAvailable()) == {"seq": 11}
    assert reader.latestOffset({"seq": 11}, ReadAllAvailable()) == {"seq": 11}
    assert len(reader.partitions({"seq": 5}, {"seq": 11})) == 1
    push.close(linger=0)


_SIGTERMED = textwrap.dedent("""
    import os, signal, sys
    import zmq
    from brokerless.spark.source import BrokerlessStreamReader, SourceConfig
    options = {"endpoints": f"ipc://{sys.argv[1]}/source", "socketType": "PULL", "bind": "true",
               "walPath": f"{sys.argv[1]}/wal"}
    reader = BrokerlessStreamReader(SourceConfig.from_options(options))
    wal = reader._log()  # the receiver starts in this, the main thread, as in Spark's runner
    context = zmq.Context()
    push = context.socket(zmq.PUSH)
    push.connect(options["endpoints"])
    for i in range(1000):
        push.send(b"%d" % i)
    push.close(linger=-1)  # all of them written
    with wal._lock:  # as a commit holds it while it trims the log
        os.kill(os.getpid(), signal.SIGTERM)  # what Spark sends: handled here, lock held
        print("handled", flush=True)
    reader.stop()  # as the runner's finally does; SIGTERM ends the process
    print("still alive", flush=True)
""")


def test_sigterm_stops_the_receiver_even_when_it_interrupts_a_commit(tmp_path):
    """Spark ends a stopped query's source process with SIGTERM, which interrupts whatever the
    runner's main thread is doing -- here, holding the log's lock as a commit does.  The process
    still logs every message its socket received, and then ends by SIGTERM."""
    ended = subprocess.run(
        [sys.executable, "-c", _SIGTERMED, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert ended.returncode == -signal.SIGTERM, ended.stderr
    assert ended.stdout.split() == ["handled"]
    with WriteAheadLog(tmp_path / "wal", fsync=False) as wal:
        assert wal.durable_seq == 1000
    assert [r.frames for r in read_range(tmp_path / "wal", 0, 1000)] == [
        [b"%d" % i] for i in range(1000)
    ]


def test_a_read_task_that_cannot_see_the_log_says_walpath_must_be_shared(tmp_path, readers):
    """A read task on an executor whose machine does not have ``walPath`` (a cluster, the log
    on the driver's local disk): the error says where it ran and that every executor must
    read the log.  It was a bare FileNotFoundError, four times over, deep in an executor's
    log."""
    reader = readers(_options(tmp_path))
    elsewhere = WalRange(str(tmp_path / "on-the-driver-only"), 0, 3, "PULL")
    with pytest.raises(SourceError, match="every executor can read") as error:
        list(reader.read(elsewhere))
    assert "on-the-driver-only" in str(error.value)


@pytest.mark.parametrize("endpoint", ["tcp://127.0.0.1:*", "tcp://*:0"])
def test_an_endpoint_to_bind_must_name_its_port(tmp_path, endpoint):
    """A source or sink that binds a port the system picks is refused as the options are read
    (at load() for a source): no peer could learn the port, and every run (every sink task)
    would get another.  It was accepted, and the source listened where nobody would come."""
    port_please = 'give the port to bind, e.g. "tcp://0.0.0.0:5555"'
    with pytest.raises(OptionError, match=re.escape(port_please)):
        SourceConfig.from_options(_options(tmp_path, endpoints=endpoint))
    schema = StructType([StructField("payload", BinaryType())])
    with pytest.raises(OptionError, match=re.escape(port_please)):
        SinkConfig.from_options({"endpoints": endpoint, "bind": "true"}, schema)
