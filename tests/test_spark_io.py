"""The Spark SQL source and sink (``format("brokerless")``); the log under the source is in
test_spark_wal.py."""

from __future__ import annotations

import datetime
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import zmq as pyzmq  # the peer is real libzmq
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery, StreamingQueryException
from zmq.utils.monitor import recv_monitor_message

import brokerless
import brokerless.spark
from brokerless.spark import HEADER, MessageHeader, parse_header
from brokerless.spark.wal import WALCorruptError, read_range

from . import tcp_accounting
from .helpers import drop_replays
from .ports import free_port
from .processes import descendants, gone
from .stream_topologies import wait_for

# -- Spark: one local session for the module -----------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
SPARK_TIMEOUT = 180  # a test that starts streaming queries (the first one also starts the JVM)
WAIT = 60.0  # seconds to wait for something that should happen in a few


@pytest.fixture(scope="module")
def spark():
    # Spark's Python workers are other processes: they must import this very brokerless, whether
    # it comes from a source tree on PYTHONPATH or from an (editable) install.  The JVM passes
    # its environment on to the workers it starts.
    package_root = str(Path(brokerless.__file__).resolve().parent.parent)
    with pytest.MonkeyPatch.context() as env:
        paths = [package_root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        env.setenv("PYTHONPATH", os.pathsep.join(paths))
        env.setenv("PYSPARK_PYTHON", sys.executable)
        env.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
        env.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        session = (
            SparkSession.builder.master("local[2]")
            .appName("brokerless-spark-io")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.host", "127.0.0.1")
            .getOrCreate()
        )
    session.sparkContext.setLogLevel("ERROR")
    brokerless.spark.register(session)
    yield session
    session.stop()


class Batches:
    """A ``foreachBatch`` target: the rows of every batch id (a replayed batch replaces its own)."""

    def __init__(self) -> None:
        self.rows: dict[int, list] = {}
        self.changed = threading.Condition()

    def __call__(self, frame, batch_id: int) -> None:
        rows = frame.collect()
        with self.changed:
            self.rows[batch_id] = rows
            self.changed.notify_all()

    def all_rows(self) -> list:
        with self.changed:
            return [row for batch_id in sorted(self.rows) for row in self.rows[batch_id]]

    def wait(self, query: StreamingQuery, predicate, what: str) -> None:
        """Wait until ``predicate()`` holds; fail early if the query dies."""
        deadline = time.monotonic() + WAIT
        with self.changed:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    pytest.fail(f"timed out waiting for {what}; have {len(self.all_rows())} rows")
                if not query.isActive:
                    pytest.fail(f"the query ended while waiting for {what}: {query.exception()}")
                self.changed.wait(min(left, 0.5))


def _read(spark, **options):
    reader = spark.readStream.format("brokerless")
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _recv(sock, timeout: float = WAIT) -> list[bytes]:
    assert sock.poll(int(timeout * 1000)), "nothing arrived"
    return sock.recv_multipart()


def _wait_event(monitor, event: int) -> None:
    deadline = time.monotonic() + WAIT
    while (left := deadline - time.monotonic()) > 0:
        if monitor.poll(int(left * 1000)) and recv_monitor_message(monitor)["event"] == event:
            return
    pytest.fail(f"no monitor event {event}")


@pytest.fixture
def zctx():
    context = pyzmq.Context()
    yield context
    context.destroy(linger=0)


# -- the source ---------------------------------------------------------------------------------


@pytest.mark.timeout(SPARK_TIMEOUT)
def test_source_delivers_subscribed_messages_with_their_columns(spark, zctx, tmp_path):
    pub = zctx.socket(pyzmq.XPUB)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    frame = _read(
        spark,
        endpoints=f"tcp://127.0.0.1:{port}",
        socketType="SUB",
        topics="a,b",
        walPath=str(tmp_path / "wal"),
    )
    batches = Batches()
    began = datetime.datetime.now()
    query = (
        frame.writeStream.foreachBatch(batches)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        subscriptions = {_recv(pub)[0], _recv(pub)[0]}  # no message before both arrived
        assert subscriptions == {b"\x01a", b"\x01b"}
        sent = []
        for i in range(30):
            message = [b"abc"[i % 3 : i % 3 + 1], b"%d" % i]
            pub.send_multipart(message)
            if message[0] != b"c":
                sent.append(message)
        pub.send_multipart([b"b", b"middle", b"last"])
        sent.append([b"b", b"middle", b"last"])
        batches.wait(query, lambda: len(batches.all_rows()) >= len(sent), "every message")
    finally:
        query.stop()
    ended = datetime.datetime.now()
    rows = batches.all_rows()
    assert [row.frames for row in rows] == sent
    assert [row.topic for row in rows] == [m[0] for m in sent]
    assert [row.payload for row in rows] == [m[-1] for m in sent]
    assert [row.seq for row in rows] == list(range(1, len(sent) + 1))
    second = datetime.timedelta(seconds=1)
    assert all(began - second <= row.received_at <= ended + second for row in rows)
    assert frame.schema.simpleString() == (
        "struct<topic:binary,payload:binary,frames:array<binary>,received_at:timestamp,seq:bigint>"
    )


@pytest.mark.timeout(SPARK_TIMEOUT)
def test_source_admission_control_caps_each_batch(spark, zctx, tmp_path):
    port = free_port()
    push = zctx.socket(pyzmq.PUSH)
    push.connect(f"tcp://127.0.0.1:{port}")  # queues until the source binds
    for i in range(23):
        push.send(b"%d" % i)
    frame = _read(
        spark,
        endpoints=f"tcp://127.0.0.1:{port}",
        socketType="PULL",
        bind="true",
        walPath=str(tmp_path / "wal"),
        maxRowsPerBatch="5",
        numPartitions="2",
    )
    batches = Batches()
    query = (
        frame.writeStream.foreachBatch(batches)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        batches.wait(query, lambda: len(batches.all_rows()) == 23, "23 rows")
    finally:
        query.stop()
    sizes = [len(rows) for _, rows in sorted(batches.rows.items())]
    assert max(sizes) <= 5
    assert [row.payload for row in batches.all_rows()] == [b"%d" % i for i in range(23)]
    assert all(row.topic is None and row.frames == [row.payload] for row in batches.all_rows())


@pytest.mark.parametrize("trigger", ["availableNow", "once"])
def test_a_trigger_that_ends_takes_what_the_peers_had_queued(spark, zctx, tmp_path, trigger):
    """Trigger.AvailableNow (and once) processes what was available when the query started --
    for a message stream, what its peers had queued for it -- then ends; AvailableNow keeps
    ``maxRowsPerBatch``.  The target was the log's end a moment after the socket opened,
    before the peers had connected: the first run ended with nothing and the next one took
    what the first should have, in a single batch."""
    port = free_port()
    push = zctx.socket(pyzmq.PUSH)
    push.connect(f"tcp://127.0.0.1:{port}")  # queues until the source binds
    for i in range(23):
        push.send(b"%d" % i)
    options = {
        "endpoints": f"tcp://127.0.0.1:{port}",
        "socketType": "PULL",
        "bind": "true",
        "walPath": str(tmp_path / "wal"),
        "maxRowsPerBatch": "5",
    }
    batches = Batches()
    query = (
        _read(spark, **options)
        .writeStream.foreachBatch(batches)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(**{trigger: True})
        .start()
    )
    try:
        assert query.awaitTermination(WAIT), "the query did not end by itself"
    finally:
        query.stop()
    assert query.exception() is None
    assert [row.payload for row in batches.all_rows()] == [b"%d" % i for i in range(23)]
    if trigger == "availableNow":
        assert max(len(rows) for rows in batches.rows.values()) <= 5


def _logged(wal_path: Path, after: int, upto: int) -> bool:
    """Whether the source's log holds records ``after < seq <= upto`` (read as Spark would)."""
    try:
        return sum(1 for _ in read_range(wal_path, after, upto)) == upto - after
    except WALCorruptError:  # not all there yet (or the last one is being written)
        return False


class CrashAfterFirstRows(Batches):
    """Fails the first batch that follows one with rows, once every message sent so far is in
    the log: a crash mid-stream, with rows committed, rows planned but not processed, and rows
    logged but not planned yet."""

    def __init__(self, wal_path: Path, logged: int) -> None:
        super().__init__()
        self.wal_path, self.logged = wal_path, logged
        self.crashed_in: int | None = None
        self.doomed: list = []

    def __call__(self, frame, batch_id: int) -> None:
        if not any(self.rows.values()):
            return super().__call__(frame, batch_id)
        self.crashed_in, self.doomed = batch_id, frame.collect()
        after = min(row.seq for row in self.doomed) - 1
        deadline = time.monotonic() + WAIT
        pause = threading.Event()  # the log is another process's file: polled, no event to wait on
        while not _logged(self.wal_path, after, self.logged):
            assert time.monotonic() < deadline, "the source never logged every message"
            pause.wait(0.05)
        raise RuntimeError("simulated crash")


@pytest.mark.timeout(SPARK_TIMEOUT)
def test_source_resumes_from_its_checkpoint_without_loss_or_duplicates(spark, zctx, tmp_path):
    port = free_port()
    checkpoint = tmp_path / "checkpoint"
    wal_path = checkpoint / "brokerless-wal"
    push = zctx.socket(pyzmq.PUSH)
    monitor = push.get_monitor_socket(pyzmq.EVENT_DISCONNECTED)
    push.connect(f"tcp://127.0.0.1:{port}")  # queues while the source is down
    frame = _read(
        spark,
        endpoints=f"tcp://127.0.0.1:{port}",
        socketType="PULL",
        bind="true",
        walPath=str(wal_path),
        maxRowsPerBatch="10",
    )

    def start(target: Batches) -> StreamingQuery:
        return (
            frame.writeStream.foreachBatch(target)
            .option("checkpointLocation", str(checkpoint))
            .start()
        )

    def send(numbers: range) -> None:
        for i in numbers:
            push.send(b"%d" % i)

    # Run 1 fails in the batch after the first with rows, with all 30 messages logged.
    send(range(30))
    crashing = CrashAfterFirstRows(wal_path, 30)
    first = start(crashing)
    with pytest.raises(StreamingQueryException, match="simulated crash"):
        first.awaitTermination(WAIT)
    crashed_in = crashing.crashed_in
    assert crashed_in is not None
    assert sorted(crashing.rows) == list(range(crashed_in))
    assert 0 < len(crashing.all_rows()) < 30
    _wait_event(monitor, pyzmq.EVENT_DISCONNECTED)  # sent from now on waits for the next run
    send(range(30, 50))

    # Run 2 runs the failed batch again (same range), then goes on; stopped cleanly at 50.
    batches = Batches()
    batches.rows.update(crashing.rows)
    second = start(batches)
    try:
        batches.wait(second, lambda: len(batches.all_rows()) >= 50, "50 rows")
    finally:
        second.stop()
    assert batches.rows[crashed_in] == crashing.doomed
    _wait_event(monitor, pyzmq.EVENT_DISCONNECTED)
    send(range(50, 70))

    # Run 3 picks up what was sent while no query ran.
    third = start(batches)
    try:
        batches.wait(third, lambda: len(batches.all_rows()) >= 70, "70 rows")
    finally:
        third.stop()
    rows = batches.all_rows()
    assert [row.payload for row in rows] == [b"%d" % i for i in range(70)]
    assert [row.seq for row in rows] == list(range(1, 71))
    assert sorted(batches.rows) == list(range(len(batches.rows)))  # no batch id skipped


class NumberedSender(threading.Thread):
    """Sends ``b"%08d" % n`` for n = 0, 1, 2, ... on a pyzmq PUSH while let go: first a burst
    of ``burst`` messages back to back, then one every ``interval`` seconds, until ``pause``
    (which returns the next number).  A number is used once the PUSH has taken its message;
    one it refused (no peer, or SNDHWM: EAGAIN after 50 ms) is tried again."""

    def __init__(self, push, interval: float = 0.002) -> None:
        super().__init__(name="numbered-sender", daemon=True)
        self.push = push
        push.sndtimeo = 50
        self.interval = interval
        self.next = 0
        self._burst_end = 0
        self._running = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._ended = False

    def run(self) -> None:
        pace = threading.Event()  # never set: waits out the interval between slow sends
        while not self._ended:
            if not self._running.is_set():
                self._idle.set()
                self._running.wait(0.1)
                continue
            self._idle.clear()
            if self.next >= self._burst_end:
                pace.wait(self.interval)
            try:
                self.push.send(b"%08d" % self.next)
                self.next += 1
            except pyzmq.Again:
                pass

    def go(self, burst: int) -> int:
        """Start sending; returns the first number."""
        self._burst_end = self.next + burst
        self._idle.clear()
        self._running.set()
        return self.next

    def pause(self) -> int:
        self._running.clear()
        assert self._idle.wait(WAIT)
        return self.next

    def end(self) -> None:
        self._ended = True
        self._running.set()
        self.join(WAIT)


class Payloads:
    """A ``foreachBatch`` target keeping each batch's payloads as numbers (through Arrow: a
    batch of 100,000 rows costs no Python object per column value)."""

    def __init__(self) -> None:
        self.batches: dict[int, list[int]] = {}
        self.changed = threading.Condition()

    def __call__(self, frame, batch_id: int) -> None:
        numbers = [int(p) for p in frame.select("payload").toArrow().column(0).to_pylist()]
        with self.changed:
            self.batches[batch_id] = numbers  # a replayed batch replaces its own
            self.changed.notify_all()

    def numbers(self) -> list[int]:
        with self.changed:
            return [n for batch_id in sorted(self.batches) for n in self.batches[batch_id]]


def _source_processes() -> set[int]:
    """This test process's streaming source runners (children of its Spark JVM)."""
    found = set()
    for pid in descendants(os.getpid()):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"python_streaming_source_runner" in command and not gone(pid):
            found.add(pid)
    return found


@pytest.mark.timeout(SPARK_TIMEOUT)
def test_a_stopped_query_logged_every_message_its_source_took_off_the_network(
    spark, zctx, tmp_path
):
    """The issue's case: the source (PULL) connects to a pyzmq PUSH that keeps sending while
    the query stops and starts again on the same checkpoint and log.

    Exactly which messages the source's process took off the network is asked of the kernel
    (``tcp_accounting``): the bytes the source's end of the connection has read, past the
    handshake, over the 10 bytes of one frame.  Each of those must reach the sink once.  What
    else was sent is ZeroMQ's to lose at a stop (in the kernels' buffers, or queued by the
    bound PUSH for the connection that closed), so it may be missing -- but never twice, never
    out of order.

    Spark stops a query's source process with SIGTERM.  The first run is stopped that way by
    the test itself, at the moment the source has read a burst of 100,000 messages, most of
    them not logged yet (it reads faster than it logs, and rcvhwm lets it hold them all); the
    second by ``query.stop()`` while the PUSH goes on sending."""
    push = zctx.socket(pyzmq.PUSH)
    port = push.bind_to_random_port("tcp://127.0.0.1")
    monitor = push.get_monitor_socket(pyzmq.EVENT_HANDSHAKE_SUCCEEDED | pyzmq.EVENT_DISCONNECTED)
    checkpoint = tmp_path / "checkpoint"
    frame = _read(
        spark,
        endpoints=f"tcp://127.0.0.1:{port}",
        socketType="PULL",
        walPath=str(checkpoint / "brokerless-wal"),
        rcvhwm="200000",
        maxRowsPerBatch="100000",
    )
    sink = Payloads()

    def start() -> StreamingQuery:
        return (
            frame.writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(checkpoint))
            .start()
        )

    def source_end() -> tcp_accounting.Connection | None:
        push_end = tcp_accounting.connection(port)
        return push_end and tcp_accounting.connection(push_end.peer_port, port)

    def run_and_stop(stop, burst: int) -> range:
        """Run the query while the PUSH sends; ``stop`` it once its source has read the
        burst; return the numbers its source took."""
        query = start()
        try:
            return stopped_after_burst(query, stop, burst)
        finally:
            query.stop()  # stopped already, unless the test failed

    def stopped_after_burst(query: StreamingQuery, stop, burst: int) -> range:
        _wait_event(monitor, pyzmq.EVENT_HANDSHAKE_SUCCEEDED)

        def read_all_it_was_sent() -> int | None:  # nothing is sent yet: the handshake
            end, push_end = source_end(), tcp_accounting.connection(port)
            if end and push_end and end.recv_q == 0 and push_end.send_q == 0:
                return end.consumed
            return None

        handshake = wait_for(read_all_it_was_sent, WAIT, "the source to read the handshake")

        def messages_read() -> int:
            end = source_end()
            return 0 if end is None else (end.consumed - handshake) // 10

        first = sender.go(burst)
        read = wait_for(
            lambda: (n := messages_read()) >= burst and n, WAIT, "the source to read the burst"
        )
        stop(query)
        while source_end() is not None:  # until the source has closed the connection
            read = max(read, messages_read())
        _wait_event(monitor, pyzmq.EVENT_DISCONNECTED)
        sender.pause()
        return range(first, first + read)

    def sigterm(query: StreamingQuery) -> None:  # what query.stop() has Spark do, now
        (source,) = wait_for(
            lambda: len(found := _source_processes()) == 1 and found, WAIT, "the source"
        )
        os.kill(source, signal.SIGTERM)
        with pytest.raises(StreamingQueryException):  # its source is gone: the query fails
            query.awaitTermination(WAIT)

    sender = NumberedSender(push)
    sender.start()
    try:
        took = set(run_and_stop(sigterm, 100_000)) | set(run_and_stop(StreamingQuery.stop, 1000))
        query = start()  # the messages logged and not processed yet (nothing more comes)
        try:
            query.processAllAvailable()
        finally:
            query.stop()
    finally:
        sender.end()
    wait_for(lambda: not _source_processes(), WAIT, "the source processes to end")
    got = sink.numbers()
    assert got == sorted(set(got)), "a message twice, or out of order"
    assert set(got) <= set(range(sender.next))
    missing = sorted(took - set(got))
    assert not missing, f"{len(missing)} of the {len(took)} messages the source took: {missing[:5]}"


@pytest.mark.timeout(2 * SPARK_TIMEOUT)
def test_acknowledged_ingestion_lands_every_message_once_whoever_is_killed(spark, tmp_path):
    """``ack=true``: a sender process (``tests/ingest_sender.py``: a ReliableSender with a
    journal, 500 messages a second) and the query's source process are SIGKILLed -- the
    sender alone, the source alone, both at once and one of these again, in a random order,
    each after a random number of messages more -- and started again; in the end the sink has
    every message the sender was asked to send, each once."""
    seed = random.randrange(1 << 32)
    rng = random.Random(seed)
    kinds = [("sender",), ("source",), ("sender", "source")]
    rounds = [*kinds, rng.choice(kinds)]  # every kind of kill, whatever the seed
    rng.shuffle(rounds)
    total = 4000
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    checkpoint = tmp_path / "checkpoint"
    frame = _read(
        spark,
        endpoints=endpoint,
        bind="true",
        ack="true",
        walPath=str(checkpoint / "brokerless-wal"),
    )
    sink = Payloads()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))

    def start_query() -> StreamingQuery:
        return (
            frame.writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(checkpoint))
            .start()
        )

    def start_sender() -> subprocess.Popen:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.ingest_sender",
                endpoint,
                str(tmp_path / "journal"),
                str(total),
                "500",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        sent.follow(process)
        return process

    class Sent:
        """Follows the senders' ``sent N`` lines: the highest N any of them reported."""

        def __init__(self) -> None:
            self.upto, self.changed = 0, threading.Condition()

        def follow(self, process: subprocess.Popen) -> None:
            threading.Thread(target=self._read, args=(process,), daemon=True).start()

        def _read(self, process: subprocess.Popen) -> None:
            for line in process.stdout:
                if line.startswith("sent "):
                    with self.changed:
                        self.upto = max(self.upto, int(line.split()[1]))
                        self.changed.notify_all()

        def wait_past(self, number: int) -> None:
            """Wait until a sender has sent ``number`` (or sent everything)."""
            with self.changed:
                assert self.changed.wait_for(lambda: self.upto >= min(number, total), WAIT), (
                    f"seed {seed}: the sender is stuck at {self.upto}"
                )

    sent = Sent()
    query, sender = start_query(), start_sender()
    killed = []
    try:
        for victims in rounds:
            sent.wait_past(sent.upto + rng.randrange(50, 600))  # a random moment
            killed.append(victims)
            if "sender" in victims:
                sender.kill()
                sender.wait()
            if "source" in victims:
                (source,) = wait_for(
                    lambda: len(found := _source_processes()) == 1 and found, WAIT, "the source"
                )
                os.kill(source, signal.SIGKILL)
                with pytest.raises(StreamingQueryException):
                    query.awaitTermination(WAIT)
                query = start_query()
            if "sender" in victims:
                sender = start_sender()
        assert sender.wait(2 * WAIT) == 0, f"seed {seed}"  # it sends the rest, acknowledged
        query.processAllAvailable()
    finally:
        query.stop()
        if sender.poll() is None:
            sender.kill()
            sender.wait()
    wait_for(lambda: not _source_processes(), WAIT, "the source processes to end")
    numbers = sink.numbers()
    assert len(numbers) == total and set(numbers) == set(range(1, total + 1)), (
        f"seed {seed}, killed {killed}: {len(numbers)} numbers, "
        f"{total - len(set(numbers))} missing, {len(numbers) - len(set(numbers))} twice"
    )


# -- the sink -----------------------------------------------------------------------------------


def test_parse_header():
    frame = HEADER.pack(7, 1, 42)
    assert len(frame) == 20
    assert parse_header(frame) == MessageHeader(batch_id=7, partition_id=1, seq=42)
    with pytest.raises(ValueError, match="20 bytes"):
        parse_header(frame + b"x")


@pytest.mark.timeout(SPARK_TIMEOUT)
def test_a_batch_write_sends_the_same_messages_with_the_streams_batch_id_in_foreachbatch(
    spark, zctx, tmp_path
):
    """``df.write.format("brokerless")``, the usual last step of a ``foreachBatch``: the same
    messages as the streaming sink's, their header carrying the stream's batch id there (0 in
    a batch job of its own).  It failed: the source had no batch writer."""
    consumer = zctx.socket(pyzmq.PULL)
    port = consumer.bind_to_random_port("tcp://127.0.0.1")

    def write(frame) -> None:
        frame.write.format("brokerless").mode("append").option(
            "endpoints", f"tcp://127.0.0.1:{port}"
        ).save()

    rows = spark.createDataFrame([(b"alone-%d" % i,) for i in range(3)], "payload binary")
    with pytest.raises(PySparkException, match=r'mode\("overwrite"\) cannot be'):
        rows.write.format("brokerless").mode("overwrite").option(  # (it appended, silently)
            "endpoints", f"tcp://127.0.0.1:{port}"
        ).save()
    write(rows)
    alone = [_recv(consumer) for _ in range(3)]
    assert sorted(payload for _, payload in alone) == [b"alone-0", b"alone-1", b"alone-2"]
    assert {parse_header(header).batch_id for header, _ in alone} == {0}

    batch_ids: list[int] = []

    def each_batch(frame, batch_id: int) -> None:
        if batch_id == 1 and not frame.isEmpty():  # (batch 0 of rate-micro-batch may be empty)
            batch_ids.append(batch_id)
            write(frame.selectExpr("cast(cast(value as string) as binary) as payload"))

    query = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", 4)
        .load()
        .writeStream.foreachBatch(each_batch)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        inside = [_recv(consumer) for _ in range(4)]
    finally:
        query.stop()
    assert batch_ids == [1]
    assert {parse_header(header).batch_id for header, _ in inside} == {1}


@pytest.mark.timeout(SPARK_TIMEOUT)
def test_sink_push_delivers_the_rows_and_a_replayed_batch_is_recognisable(spark, zctx, tmp_path):
    producer = zctx.socket(pyzmq.PUSH)
    producer.setsockopt(pyzmq.SNDTIMEO, int(WAIT * 1000))  # waits for the source to connect
    in_port = producer.bind_to_random_port("tcp://127.0.0.1")
    consumer = zctx.socket(pyzmq.PULL)
    out_port = consumer.bind_to_random_port("tcp://127.0.0.1")
    checkpoint = tmp_path / "checkpoint"
    frame = _read(
        spark,
        endpoints=f"tcp://127.0.0.1:{in_port}",
        socketType="PULL",
        walPath=str(checkpoint / "brokerless-wal"),
        maxRowsPerBatch="8",
        numPartitions="2",
    ).select("payload")

    def start() -> StreamingQuery:
        return (
            frame.writeStream.format("brokerless")
            .option("endpoints", f"tcp://127.0.0.1:{out_port}")
            .option("checkpointLocation", str(checkpoint))
            .start()
        )

    query = start()
    sent = [b"row-%d" % i for i in range(20)]
    try:
        for payload in sent:
            producer.send(payload)
        first = [_recv(consumer) for _ in sent]
    finally:
        query.stop()
    assert sorted(payload for _, payload in first) == sorted(sent)
    headers = [parse_header(header) for header, _ in first]
    per_task: dict[tuple[int, int], list[int]] = {}
    for h in headers:
        per_task.setdefault((h.batch_id, h.partition_id), []).append(h.seq)
    assert all(seqs == list(range(len(seqs))) for seqs in per_task.values())
    for progress in query.recentProgress:  # the batches that completed (stop may cut the last)
        sent_in_batch = sum(h.batch_id == progress["batchId"] for h in headers)
        assert sent_in_batch == progress["numInputRows"]

    # As if the driver died after the sink wrote the last batch and before Spark recorded it:
    # the restarted query runs that batch again.
    last = max(h.batch_id for h in headers)
    for name in (str(last), f".{last}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    replayed_count = sum(h.batch_id == last for h in headers)
    query = start()
    try:
        replayed = [_recv(consumer) for _ in range(replayed_count)]
    finally:
        query.stop()
    assert sorted(replayed) == sorted(m for m in first if parse_header(m[0]).batch_id == last)
    assert sorted(drop_replays(first + replayed)) == sorted(sent)


@pytest.mark.timeout(SPARK_TIMEOUT)
def test_a_consumer_behind_the_query_gets_every_row_once_through_the_replay_filter(
    spark, zctx, tmp_path
):
    """A consumer that reads only after the query has written three batches: each task wrote
    over a connection of its own, so the consumer's fair queue hands out the batches
    interleaved -- an earlier batch's rows after a later one's.  The sink's documented rule
    for dropping replays must keep them all.  It lost them: the rule said to drop every
    message of a batch id older than the newest seen."""
    producer = zctx.socket(pyzmq.PUSH)
    producer.setsockopt(pyzmq.SNDTIMEO, int(WAIT * 1000))  # waits for the source to connect
    in_port = producer.bind_to_random_port("tcp://127.0.0.1")
    consumer = zctx.socket(pyzmq.PULL)
    out_port = consumer.bind_to_random_port("tcp://127.0.0.1")
    checkpoint = tmp_path / "checkpoint"
    sent = [b"row-%d" % i for i in range(60)]
    query = (
        _read(
            spark,
            endpoints=f"tcp://127.0.0.1:{in_port}",
            socketType="PULL",
            walPath=str(checkpoint / "brokerless-wal"),
            maxRowsPerBatch="20",
        )
        .select("payload")
        .writeStream.format("brokerless")
        .option("endpoints", f"tcp://127.0.0.1:{out_port}")
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    try:
        for payload in sent:
            producer.send(payload)
        wait_for(
            lambda: sum(p["numInputRows"] for p in query.recentProgress) == len(sent),
            WAIT,
            "the query to write every row",
        )
    finally:
        query.stop()
    received = [_recv(consumer) for _ in sent]
    batch_ids = [parse_header(header).batch_id for header, _ in received]
    assert len(set(batch_ids)) == 3
    assert sorted(drop_replays(received)) == sorted(sent), f"batch ids received: {batch_ids}"


@pytest.mark.timeout(SPARK_TIMEOUT)
def test_sink_pub_sends_topic_header_payload_to_a_subscriber(spark, zctx, tmp_path):
    sub = zctx.socket(pyzmq.SUB)
    sub.subscribe(b"")
    port = sub.bind_to_random_port("tcp://127.0.0.1")
    frame = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", 10)
        .option("numPartitions", 2)
        .load()
        .selectExpr(
            "value",
            "CAST(value AS STRING) AS body",
            "IF(value % 3 = 0, 'fizz', 'other') AS topic",
        )
    )
    query = (
        frame.writeStream.format("brokerless")
        .option("endpoints", f"tcp://127.0.0.1:{port}")
        .option("socketType", "PUB")
        .option("topicColumn", "topic")
        .option("payloadColumn", "body")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    got: dict[int, list] = {0: [], 1: []}
    try:
        while len(got[0]) + len(got[1]) < 20:
            topic, header, body = _recv(sub)
            batch_id, partition_id, seq = parse_header(header)
            if batch_id in got:
                got[batch_id].append((partition_id, seq, topic, body))
    finally:
        query.stop()
    for batch_id, messages in got.items():
        values = range(10 * batch_id, 10 * batch_id + 10)
        assert sorted(int(body) for *_, body in messages) == list(values)
        assert all(
            topic == (b"fizz" if int(body) % 3 == 0 else b"other") for *_, topic, body in messages
        )
        for partition_id in {m[0] for m in messages}:
            seqs = [seq for p, seq, *_ in messages if p == partition_id]
            assert seqs == list(range(len(seqs)))


# -- options ------------------------------------------------------------------------------------


def test_the_errors_the_readme_names_are_in_brokerless_spark():
    """A Spark user catches what run_on_spark, the source and its log raise as
    brokerless.spark.X (the README names them without a module)."""
    import brokerless.stream
    from brokerless.spark.source_config import SourceError

    assert brokerless.spark.TopologyError is brokerless.stream.TopologyError
    assert brokerless.spark.WorkerProcessError is brokerless.stream.WorkerProcessError
    assert brokerless.spark.SourceError is SourceError
    assert brokerless.spark.WALCorruptError is WALCorruptError
    names = ("TopologyError", "WorkerProcessError", "SourceError", "WALCorruptError")
    assert set(names) <= set(brokerless.spark.__all__)


@pytest.mark.timeout(SPARK_TIMEOUT)
def test_register_is_idempotent_and_defaults_to_the_active_session(spark):
    brokerless.spark.register(spark)
    brokerless.spark.register()
    with pytest.raises(PySparkException, match='option "walPath" is required'):
        _read(spark, endpoints="tcp://127.0.0.1:1")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"endpoints": "tcp://127.0.0.1:1"}, 'option "walPath" is required'),
        ({"walPath": "/tmp/x"}, 'option "endpoints" is required'),
        ({"endpoints": "inproc://x", "walPath": "/tmp/x"}, "inproc:// cannot work"),
        (
            {"endpoints": "tcp://127.0.0.1:1", "walPath": "/tmp/x", "maxRowPerBatch": "5"},
            "unknown option 'maxrowperbatch'",
        ),
        (
            {"endpoints": "tcp://127.0.0.1:1", "walPath": "/tmp/x", "socketType": "REQ"},
            'option "socketType" must be one of SUB, PULL',
        ),
        (
            {"endpoints": "tcp://127.0.0.1:1", "walPath": "/tmp/x", "numPartitions": "0"},
            'option "numPartitions" must be a positive integer',
        ),
        (  # a space after the comma: " trades." matched nothing, silently
            {"endpoints": "tcp://127.0.0.1:1", "walPath": "/tmp/x", "topics": "prices., trades."},
            "option \"topics\" has ' trades.', with spaces around it",
        ),
    ],
)
@pytest.mark.timeout(SPARK_TIMEOUT)
def test_source_options_are_checked_at_load(spark, options, message):
    with pytest.raises(PySparkException, match=message):
        _read(spark, **options)


@pytest.mark.timeout(SPARK_TIMEOUT)
def test_sink_rejects_a_payload_column_it_cannot_send(spark, tmp_path):
    query = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", 1)
        .load()
        .writeStream.format("brokerless")
        .option("endpoints", "tcp://127.0.0.1:1")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    with pytest.raises(StreamingQueryException, match=r"column 'value' is bigint.*CAST it"):
        query.awaitTermination(WAIT)


@pytest.mark.parametrize(
    ("socket_type", "message"),
    [("PUSH", "still queued after timeoutMs=300"), ("PUB", "no subscriber within timeoutMs=300")],
)
@pytest.mark.timeout(SPARK_TIMEOUT)
def test_sink_fails_the_task_when_no_peer_takes_the_rows(spark, tmp_path, socket_type, message):
    query = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", 3)
        .load()
        .selectExpr("CAST(value AS STRING) AS payload")
        .writeStream.format("brokerless")
        .option("endpoints", f"tcp://127.0.0.1:{free_port()}")
        .option("socketType", socket_type)
        .option("timeoutMs", "300")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    with pytest.raises(StreamingQueryException, match=message):
        query.awaitTermination(WAIT)
