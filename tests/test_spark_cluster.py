"""Topologies on a real Spark standalone cluster: a Master and two Workers (one core each) from
pyspark's own ``spark-class``, on 127.0.0.1 (``spark_cluster.py``).  The word count and the
demo give exact results with one worker in each Worker's executor; a Worker JVM killed mid-run
(its executor with it) makes the run wait for a slot -- saying so -- and recover with exact
counts once the Worker is back, both for a finite input replayed from the start and for a
checkpointed word count over live input (``live_input.py``), which rolls back to its last
checkpoint; a session with dynamic allocation is refused at once; a Structured Streaming
query (acknowledged ingestion in, the sink out) that loses a Worker delivers every message once
through the sink's replay rule; everything the cluster started is gone at the end.

Marked ``cluster`` and left out of the default suite (the JVMs take minutes to start on a
small machine): ``make test-cluster``, or ``pytest -m cluster tests/test_spark_cluster.py``.
The session is configured as README's "Running a topology on a real Spark cluster" says, and
a test checks that the README still says it.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
import zmq as pyzmq  # the sink's consumer is real libzmq

import brokerless
from brokerless.spark import Phase, register, run_on_spark, session_builder
from brokerless.spark.demo import run_demo, sherlock_topology, top_words, word_counts
from brokerless.stream.examples import final_counts
from brokerless.stream.testing import run_to_completion

from .helpers import drop_replays
from .live_input import LiveInput
from .ports import free_port
from .processes import descendants
from .spark_cluster import Daemon, StandaloneCluster
from .stream_topologies import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parent.parent
WORKERS = 2
#: What README's cluster section tells a driver to set (the first two are session_builder's).
SETTINGS = {
    "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures": "1",
    "spark.scheduler.barrier.maxConcurrentTasksCheck.interval": "1s",
    "spark.network.timeout": "30s",
    "spark.network.timeoutInterval": "10s",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    package_root = str(Path(brokerless.__file__).resolve().parent.parent)
    with StandaloneCluster(
        tmp_path_factory.mktemp("spark-cluster"),
        python=sys.executable,
        python_path=[package_root, str(ROOT)],
    ) as cluster:
        cluster.start_master()
        for _ in range(WORKERS):
            cluster.start_worker(cores=1)
        yield cluster
    # leaving the block stopped every process the cluster started, or raised naming those left


@pytest.fixture(scope="module")
def spark(cluster):
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PYSPARK_PYTHON", sys.executable)  # what the executors run Python workers with
        env.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (
            session_builder(cluster.url, "brokerless-cluster-test")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.executor.memory", "512m")
        )
        for key, value in SETTINGS.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


#: A driver of its own (one SparkContext per process) on the cluster, with dynamic allocation.
DYNAMIC_ALLOCATION = """
import sys, time
from brokerless.spark import run_on_spark, session_builder
from brokerless.stream import TopologyError
from brokerless.stream.examples import word_count_topology

builder = session_builder(sys.argv[1], "brokerless-dynamic-allocation")
for key, value in [
    ("spark.ui.enabled", "false"),
    ("spark.driver.host", "127.0.0.1"),
    ("spark.dynamicAllocation.enabled", "true"),
    ("spark.dynamicAllocation.shuffleTracking.enabled", "true"),
]:
    builder = builder.config(key, value)
spark = builder.getOrCreate()
began = time.monotonic()
try:
    run_on_spark(word_count_topology(), spark=spark, workers=2).stop()
except TopologyError as error:
    print(f"after {time.monotonic() - began:.1f} s: {error}")
finally:
    spark.stop()
"""


def hosting(cluster: StandaloneCluster, pid: int) -> Daemon:
    """The Worker whose executor runs process ``pid``."""
    owners = [worker for worker in cluster.workers if pid in descendants(worker.pid)]
    assert len(owners) == 1, f"process {pid} is not in one Worker's executor"
    return owners[0]


def test_the_readme_says_what_this_module_does():
    readme = (ROOT / "README.md").read_text()
    section = readme.partition("### Running a topology on a real Spark cluster")[2]
    section = section.partition("\n### ")[0]
    confs = dict(re.findall(r"--conf (\S+)=(\S+)", section))
    assert confs == SETTINGS
    assert "spark.network.timeoutInterval" in section and "60 s" in section
    assert "PYSPARK_PYTHON" in section
    assert "make test-cluster" in section


def test_word_count_runs_one_worker_in_each_executor_with_exact_counts(cluster, spark):
    lines = 2000
    with run_on_spark(
        sherlock_topology(lines=lines), spark=spark, workers=WORKERS, capture=True
    ) as run:
        owners = {hosting(cluster, pid).name for pid in run.worker_pids}
        result = run_to_completion(run, timeout=300)
    assert owners == {"worker0", "worker1"}
    assert result.errors == []
    assert final_counts(result.emitted("count")) == word_counts(lines)
    assert run.attempt == 1 and run.restarts == []


def test_the_demo_runs_on_the_cluster(spark):
    out = io.StringIO()
    lines, top = 1200, 8
    ranking = run_demo(spark=spark, workers=WORKERS, lines=lines, top=top, out=out)
    assert ranking == top_words(word_counts(lines), top)
    assert "Equal to a plain collections.Counter over the same text." in out.getvalue()
    assert f"{WORKERS} workers on Spark {spark.sparkContext.master}" in out.getvalue()


def test_a_killed_worker_jvm_restarted_recovers_with_exact_counts(cluster, spark, caplog):
    lines = 1500
    topology = sherlock_topology(lines=lines, rate=300)  # ~5 s per attempt: killed mid-run
    run = run_on_spark(topology, spark=spark, workers=WORKERS, capture=True, max_attempts=2)
    with run:

        def acked() -> int:
            return run.statistics()["lines"].acked

        wait_for(lambda: acked() >= 200, timeout=120, what="200 lines acked")
        victim = hosting(cluster, run.worker_pids[1])
        assert acked() < lines  # killed mid-run
        killed = cluster.kill_worker(victim)  # the Worker JVM, its executor and Python workers
        assert run.worker_pids[1] in killed
        # The run waits for a slot, and says so, instead of spending its last attempt on
        # Spark's refusal (if it counted before Spark had dropped the executor, Spark refuses).
        waiting = (
            f"needs {WORKERS} Spark task slots at once (one barrier task per worker) but "
            f"Spark master '{cluster.url}' has 1: "
        )
        refused = "Spark refused the barrier stage for task slots (needed, there: (2, 1))"
        wait_for(
            lambda: waiting in caplog.text or refused in caplog.text,
            timeout=120,
            what="the run to say it waits for a slot",
        )
        assert run.attempt == 2 and run.phase is Phase.WAITING_FOR_SLOTS
        assert "local[" not in caplog.text  # the hint fits a standalone master
        restarted = cluster.start_worker(cores=1)
        wait_for(lambda: run.phase is Phase.RUNNING, timeout=180, what="the second attempt")
        owners = {hosting(cluster, pid).name for pid in run.worker_pids}
        result = run_to_completion(run, timeout=300)
    survivor = next(w for w in cluster.workers if w not in (victim, restarted))
    assert owners == {survivor.name, restarted.name}  # one worker in each executor again
    assert run.attempt == 2 and len(run.restarts) == 1
    assert "ExecutorLostFailure" in run.restarts[0]
    assert result.errors == []
    assert final_counts(result.emitted("count")) == word_counts(lines)
    assert result.statistics["lines"].acked == lines


def test_dynamic_allocation_is_refused_at_once_with_sparks_reason(cluster):
    # README: Spark runs no barrier stage under dynamic allocation, so it cannot replace a
    # lost executor for a topology; the run says so at once.  (Such an application starts
    # with no executors and asks for some only for work it was given: a run that waited for
    # slots waited start_timeout, then blamed the cluster's cores.)
    driver = subprocess.run(
        [sys.executable, "-c", DYNAMIC_ALLOCATION, cluster.url],
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    found = re.search(r"^after ([\d.]+) s: (.*)", driver.stdout, re.M)
    assert found, driver.stdout + driver.stderr[-3000:]
    assert found[2].startswith(
        "topology 'word-count' cannot run in a Spark session with dynamic allocation "
        "(spark.dynamicAllocation.enabled=true): Spark runs no barrier stage then "
        "(BarrierJobRunWithDynamicAllocationException)"
    ), found[2]
    assert "spark.cores.max" in found[2]
    assert float(found[1]) < 30  # not after start_timeout (120 s) of waiting for slots


def test_a_live_word_count_that_loses_an_executor_counts_exactly_what_was_sent(
    cluster, spark, tmp_path
):
    # The word count reads a log that a pyzmq PUSH feeds while it runs (for a minute under
    # make test-cluster), so replay from the start is no answer: the second attempt restores
    # the last complete checkpoint (its state, the spout's position in the log) and goes on.
    # The log and the checkpoints are on this machine's disk, which every executor here reaches.
    with LiveInput(str(tmp_path)) as live:
        run = run_on_spark(live.topology(), spark=spark, workers=WORKERS, max_attempts=2)
        with run:
            live.send_until_half_way(run, timeout=60)
            victim = hosting(cluster, run.worker_pids[1])
            cluster.kill_worker(victim)  # the Worker JVM, its executor and Python workers
            wait_for(
                lambda: run.attempt == 2 and run.phase is Phase.WAITING_FOR_SLOTS,
                timeout=120,
                what="the second attempt to wait for a slot",
            )
            cluster.start_worker(cores=1)
            live.finish(run, timeout=300)
            assert run.attempt == 2 and len(run.restarts) == 1
            assert "ExecutorLostFailure" in run.restarts[0]
            assert run.checkpoint_statistics().restored_from >= 2  # not from the start
    live.check()


def test_a_streaming_query_that_loses_an_executor_delivers_every_message_once(
    cluster, spark, tmp_path
):
    # Structured Streaming on the cluster: a sender process (tests/ingest_sender.py, a
    # ReliableSender) into format("brokerless") with ack=true, out through the sink's PUSH to
    # a libzmq PULL, while a Worker JVM is killed mid-run (its executor with it) and another
    # started.  Spark reruns what the executor was doing; through the sink's replay rule the
    # consumer has every message once.  (Last in the module: it changes the cluster's Workers.)
    register(spark)
    total = 3000
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    context = pyzmq.Context()
    consumer = context.socket(pyzmq.PULL)
    out = consumer.bind_to_random_port("tcp://127.0.0.1")
    checkpoint = tmp_path / "checkpoint"
    reader = spark.readStream.format("brokerless")
    for name, value in {
        "endpoints": endpoint,
        "bind": "true",
        "ack": "true",
        "walPath": str(checkpoint / "brokerless-wal"),
        "numPartitions": str(WORKERS),
        "maxRowsPerBatch": "200",
    }.items():
        reader = reader.option(name, value)
    query = (
        reader.load()
        .select("payload")
        .writeStream.format("brokerless")
        .option("endpoints", f"tcp://127.0.0.1:{out}")
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    journal = str(tmp_path / "journal")
    sender = subprocess.Popen(
        [sys.executable, "-m", "tests.ingest_sender", endpoint, journal, str(total), "300"],
        cwd=ROOT,
        env=cluster.env,
        stdout=subprocess.DEVNULL,
    )
    received: list[list[bytes]] = []

    def receive_until(count: int) -> None:
        while len(received) < count:
            assert consumer.poll(120_000), f"nothing for 2 min after {len(received)} messages"
            received.append(consumer.recv_multipart())

    try:
        receive_until(total // 3)
        cluster.kill_worker(cluster.workers[-1])  # both Workers' executors run the query
        cluster.start_worker(cores=1)
        assert sender.wait(300) == 0, "the sender did not get every message acknowledged"
        while len({header for header, _ in received}) < total:  # (drop_replays' keys)
            receive_until(len(received) + 1)
    finally:
        query.stop()
        if sender.poll() is None:
            sender.kill()
            sender.wait()
        context.destroy(linger=0)
    numbers = sorted(int(payload) for payload in drop_replays(received))
    assert numbers == list(range(1, total + 1)), (
        f"{len(received)} received, {len(numbers)} kept, {len(set(numbers))} distinct"
    )
