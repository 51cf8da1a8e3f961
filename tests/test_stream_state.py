"""Stateful bolts and checkpoints (``checkpoint.py``, ``stateful.py``, ``state.py``,
``storage.py``): the pieces, then whole local runs that roll back and end with exact state."""

from __future__ import annotations

import collections
import errno
import json
import os
import signal
import subprocess
import sys
import threading
from functools import partial

import msgpack
import pytest

from brokerless.spark.wal import LogReader, WALCorruptError, WriteAheadLog
from brokerless.stream import (
    Config,
    KeyValueState,
    ReplayableSpout,
    SequenceSpout,
    Topology,
    TopologyError,
    WorkerProcessError,
    complete_topology,
    fields,
    run_local,
    run_multiprocess,
    shuffle,
)
from brokerless.stream.assignment import assign
from brokerless.stream.bolt_executor import BoltExecutor
from brokerless.stream.checkpoint import (
    CheckpointCoordinator,
    TaskAck,
    checkpoint_name,
    snapshot_path,
)
from brokerless.stream.examples import final_counts
from brokerless.stream.messaging import LocalMessaging, LocalNetwork
from brokerless.stream.multiprocess import MultiprocessRun
from brokerless.stream.protocol import BARRIER, Barrier, task_frame
from brokerless.stream.spout_executor import SpoutExecutor
from brokerless.stream.state import SnapshotError, decode_snapshot, encode_snapshot
from brokerless.stream.stateful import CheckpointedBoltExecutor, CheckpointedSpoutExecutor
from brokerless.stream.storage import ArrowStorage, LocalStorage, open_storage
from brokerless.stream.tuple import Tuple
from brokerless.stream.worker import Worker

from .live_input import counted
from .stream_topologies import (
    RELEASE_HUNG,
    FailingCount,
    HangingCount,
    HookedCount,
    Recorder,
    Source,
    StatefulCount,
    WordSplit,
    hook_calls,
    wait_for,
)

pytestmark = pytest.mark.timeout(60)

SENTENCES = [f"s{i} the cow jumped over the moon {i % 7}" for i in range(6000)]
EXPECTED = collections.Counter(w for s in SENTENCES for w in s.split())


def word_count(count=StatefulCount, sentences=SENTENCES, **config) -> Topology:
    settings = {"num_workers": 2, "checkpoint_interval_secs": 0.05, **config}
    return (
        Topology("stateful-word-count", Config(**settings))
        .spout(
            "sentences",
            partial(SequenceSpout, [[s] for s in sentences], ["sentence"]),
            parallelism=2,
        )
        .bolt("split", WordSplit, parallelism=2, inputs={"sentences": shuffle()})
        .bolt("count", count, parallelism=2, tasks=4, inputs={"split": fields("word")})
    )


def pack(message) -> bytes:
    return msgpack.packb(message, use_bin_type=True)


# -- state and storage -------------------------------------------------------------------------


def test_a_snapshot_round_trips_and_refuses_damage_or_another_task():
    serializer = Config().serializer
    state = KeyValueState({"word": 3, ("pair", 1): [1, 2], 7: None})
    state.put("x", 1)
    state.delete("word")
    state.delete("absent")
    data = encode_snapshot(serializer, "count", 5, 9, state)
    assert decode_snapshot(serializer, data, "count", 5, 9, stateful=True) == {
        ("pair", 1): [1, 2],
        7: None,
        "x": 1,
    }
    position = encode_snapshot(serializer, "spout", 1, 9, {"offset": 12})
    assert decode_snapshot(serializer, position, "spout", 1, 9, stateful=False) == {"offset": 12}
    damaged = data[:-1] + bytes([data[-1] ^ 1])
    with pytest.raises(SnapshotError, match="checksum"):
        decode_snapshot(serializer, damaged, "count", 5, 9, stateful=True)
    with pytest.raises(SnapshotError, match="holds task 5"):
        decode_snapshot(serializer, data, "count", 6, 9, stateful=True)
    with pytest.raises(SnapshotError, match="not a snapshot"):
        decode_snapshot(serializer, b"junk", "count", 5, 9, stateful=True)


@pytest.mark.parametrize("kind", ["local", "arrow", "fsspec"])
def test_storage_writes_reads_lists_and_deletes(tmp_path, kind, monkeypatch):
    root = tmp_path / "checkpoints"
    location = {"local": str(root), "arrow": f"file://{root}", "fsspec": f"memory:/{root}"}
    storage = open_storage(location[kind])
    assert isinstance(storage, LocalStorage if kind == "local" else ArrowStorage)
    assert storage.list() == []
    storage.write("chk-1/task-3", b"three")
    storage.write("chk-1/task-3", b"THREE")  # replaced
    storage.write("chk-2/_COMPLETED", b"{}")
    assert storage.read("chk-1/task-3") == b"THREE"
    assert storage.list() == ["chk-1", "chk-2"]
    with pytest.raises(FileNotFoundError):
        storage.read("chk-1/task-4")
    storage.delete("chk-1")
    storage.delete("chk-9")  # absent: nothing
    assert storage.list() == ["chk-2"]
    if kind != "fsspec":  # (in this process's memory)
        assert sorted(p.name for p in root.rglob("*")) == ["_COMPLETED", "chk-2"]
    monkeypatch.setitem(sys.modules, "fsspec", None)  # not installed
    with pytest.raises(ValueError, match="pyarrow does not know its scheme; install fsspec"):
        open_storage("memory://x")


def test_a_log_reader_follows_the_writer_across_segments_and_partial_records(tmp_path):
    reader = LogReader(tmp_path)
    assert reader.read(10) == []  # no log yet
    with WriteAheadLog(tmp_path, fsync=False, segment_bytes=200) as wal:
        for i in range(30):
            wal.append([b"m%d" % i], i)
            wal.flush()
        assert len(list(tmp_path.glob("*.wal"))) > 3
        assert [r.seq for r in reader.read(7)] == list(range(1, 8))
        assert [r.frames for r in reader.read(100)] == [[b"m%d" % i] for i in range(7, 30)]
        assert reader.read(10) == []
        # a record half written is not there yet; whole, it is
        wal.append([b"last"], 99)
        wal.flush()
        segment = sorted(tmp_path.glob("*.wal"))[-1]
        whole = segment.read_bytes()
        segment.write_bytes(whole[:-5])  # as a reader may find it while it is written
        assert reader.read(10) == []
        segment.write_bytes(whole)
        assert [r.frames for r in reader.read(10)] == [[b"last"]]
        assert [r.seq for r in LogReader(tmp_path, after=28).read(10)] == [29, 30, 31]
        wal.trim(20)
    with pytest.raises(WALCorruptError, match="no longer in the log"):
        LogReader(tmp_path, after=3).read(1)
    reader.close()


# -- the plan ------------------------------------------------------------------------------------


def test_a_topology_with_stateful_bolts_is_checkpointed_and_the_others_are_not(tmp_path):
    plan = word_count().build()
    with pytest.raises(ValueError, match=r"need a checkpoint location .*checkpoint_dir"):
        Worker(plan, assign(plan, 1), 0)
    plan = word_count(checkpoint_dir=str(tmp_path)).build()
    assert plan.checkpointed and plan.components["count"].stateful
    assert not plan.components["split"].stateful
    worker = Worker(plan, assign(plan, 1), 0)
    assert {type(e) for e in worker.executors if e.kind != "acker"} == {
        CheckpointedSpoutExecutor,
        CheckpointedBoltExecutor,
    }
    plain = word_count(count=WordSplit).build()
    assert not plain.checkpointed
    worker = Worker(plain, assign(plain, 1), 0)
    assert worker.checkpoints is None
    assert {type(e) for e in worker.executors if e.kind != "acker"} == {SpoutExecutor, BoltExecutor}


def test_a_checkpointed_topology_needs_replayable_spouts_and_no_cycle():
    topo = (
        Topology("t")
        .spout("source", Source)
        .bolt("count", StatefulCount, inputs={"source": shuffle()})
    )
    with pytest.raises(TopologyError, match="'source' is not a ReplayableSpout"):
        topo.build()
    cyclic = (
        Topology("t")
        .spout("sentences", partial(SequenceSpout, [["a"]], ["word"]))
        .bolt("a", StatefulCount, inputs=["sentences", "b"])
        .bolt("b", Recorder, inputs=["a"])
    )
    with pytest.raises(TopologyError, match="in a cycle"):
        cyclic.build()
    with pytest.raises(TopologyError, match="checkpoint_interval_secs must be a number > 0"):
        word_count(checkpoint_interval_secs=0).build()
    assert issubclass(SequenceSpout, ReplayableSpout)


def test_a_worker_takes_barriers_only_where_they_belong(tmp_path):
    plan = word_count(checkpoint_dir=str(tmp_path)).build()
    worker = Worker(plan, assign(plan, 2), 1, LocalMessaging(LocalNetwork()))
    count_task = next(t for t in plan.components["count"].tasks if t in worker.tasks)
    split_task = plan.components["split"].tasks[0]
    accepted = worker.inbound.read([task_frame(count_task), pack([BARRIER, split_task, 4])])
    assert accepted.bad == []
    (item,) = next(iter(accepted.items.values()))
    assert item[0] == count_task and isinstance(item[1], Barrier)
    assert (item[1].task, item[1].checkpoint, item[2]) == (split_task, 4, 0)
    for message, reason in [
        ([BARRIER, count_task, 4], "not upstream"),
        ([BARRIER, split_task, 0], "integers >= 1"),
        ([BARRIER, split_task, "4"], "integers >= 1"),
        ([BARRIER, split_task], "takes only TUPLE"),
    ]:
        accepted = worker.inbound.read([task_frame(count_task), pack(message)])
        assert accepted.pairs == 0 and reason in accepted.bad[0], (message, accepted.bad)
    plain = word_count(count=WordSplit).build()
    worker = Worker(plain, assign(plain, 2), 1, LocalMessaging(LocalNetwork()))
    count_task = next(t for t in plain.components["count"].tasks if t in worker.tasks)
    accepted = worker.inbound.read([task_frame(count_task), pack([BARRIER, split_task, 4])])
    assert "a bolt takes only TUPLE [source, stream, anchors, values]" in accepted.bad[0]


# -- alignment, in one bolt executor -------------------------------------------------------------


def aligning_count(tmp_path, queue_size=4096):
    """The count executor of two spouts -> one stateful count task, opened, not running."""
    topo = (
        Topology("align", Config(checkpoint_dir=str(tmp_path), executor_queue_size=queue_size))
        .spout("a", partial(SequenceSpout, [], ["word"]))
        .spout("b", partial(SequenceSpout, [], ["word"]))
        .bolt("count", StatefulCount, inputs={"a": shuffle(), "b": shuffle()})
    )
    plan = topo.build()
    worker = Worker(plan, assign(plan, 1), 0)
    executor = next(e for e in worker.executors if e.component == "count")
    executor.open()
    worker.checkpoints.thread.start()
    (task,) = executor.task_ids
    a, b = plan.components["a"].tasks[0], plan.components["b"].tasks[0]
    field = plan.schema("a", "default")

    def feed(*items):
        for item in items:
            if isinstance(item, tuple):
                source, checkpoint = item
                item = Barrier(source, checkpoint)
            elif isinstance(item, str):
                item = Tuple(
                    (item,),
                    "a" if item.startswith("a") else "b",
                    "default",
                    a if item.startswith("a") else b,
                    field,
                )
            executor._execute(executor.states[task], item)

    def acks(n):
        found = []
        wait_for(
            lambda: found.extend(worker.checkpoints.take_acks()) or len(found) >= n,
            what=f"{n} acknowledgement(s)",
        )
        return found

    def snapshot(checkpoint):
        data = worker.checkpoints.storage.read(snapshot_path(checkpoint, task))
        return decode_snapshot(plan.config.serializer, data, "count", task, checkpoint, True)

    yield feed, acks, snapshot, executor.states[task].component, (a, b)
    worker.checkpoints.close()
    worker.checkpoints.thread.join(10)


@pytest.fixture
def aligning(tmp_path):
    yield from aligning_count(tmp_path)


def test_a_task_holds_back_what_follows_a_barrier_until_every_channel_brought_it(aligning):
    feed, acks, snapshot, bolt, (a, b) = aligning
    feed("a1", (a, 1), "a2", "a2", "b1")
    assert dict(bolt.counts) == {"a1": 1, "b1": 1}  # a2 waits behind a's barrier
    feed((b, 1))
    (ack,) = acks(1)
    assert (ack.checkpoint, ack.error) == (1, None) and ack.bytes > 0
    assert snapshot(1) == {"a1": 1, "b1": 1}  # exactly what came before the barriers
    assert dict(bolt.counts) == {"a1": 1, "b1": 1, "a2": 2}  # then what was held back
    feed((a, 1), "a3")  # a stale barrier: dropped, holds nothing back
    assert bolt.counts["a3"] == 1


def test_a_newer_barrier_gives_up_the_older_checkpoint(aligning):
    feed, acks, snapshot, bolt, (a, b) = aligning
    feed((a, 1), "a1", (a, 2), "b1")
    assert dict(bolt.counts) == {"a1": 1, "b1": 1}
    (declined,) = acks(1)
    assert declined.checkpoint == 1 and "barrier 2 came first" in declined.error
    feed((b, 1), "a2", (b, 2))  # 1 is over for this task; "a2" came after a's barrier 2
    (ack,) = acks(1)
    assert (ack.checkpoint, ack.error) == (2, None)
    assert snapshot(2) == {"a1": 1, "b1": 1}
    assert bolt.counts["a2"] == 1


def test_a_task_declines_rather_than_hold_back_without_bound(tmp_path):
    for feed, acks, _, bolt, (a, _) in aligning_count(tmp_path, queue_size=2):
        feed((a, 1), *["a"] * 9)  # more than 4 queues of 2
        (declined,) = acks(1)
        assert declined.checkpoint == 1 and "held back over 8 tuples" in declined.error
        assert "a larger executor_queue_size" in declined.error  # what to do about it
        assert bolt.counts["a"] == 9  # nothing lost


# -- the coordinator -----------------------------------------------------------------------------


def test_the_coordinator_commits_when_every_task_acknowledged(tmp_path):
    plan = word_count(checkpoint_interval_secs=1000).build()
    storage = LocalStorage(tmp_path)
    storage.write("chk-0000000007/task-1", b"a leftover of a run that never committed")
    coordinator = CheckpointCoordinator(plan, storage)
    assert coordinator.latest is None and storage.list() == []
    assert not coordinator.due(0)  # the interval has not passed
    tasks = [t for c in ("sentences", "split", "count") for t in plan.components[c].tasks]
    assert coordinator.request() == 8
    assert coordinator.due(0)
    checkpoint = coordinator.trigger(0)
    assert checkpoint == 8 and not coordinator.due(1e9)  # one at a time
    for task in tasks[:-1]:
        assert coordinator.acknowledge(TaskAck(checkpoint, task, 10)) is None
    assert coordinator.acknowledge(TaskAck(checkpoint - 1, tasks[-1])) is None  # stale
    assert coordinator.acknowledge(TaskAck(checkpoint, tasks[-1], 10)) == 8
    metadata = json.loads(storage.read("chk-0000000008/_COMPLETED"))
    assert metadata["layout"]["count"] == list(plan.components["count"].tasks)
    assert coordinator.stats.completed == 1 and coordinator.stats.history[0].bytes == 10 * len(
        tasks
    )
    second = coordinator.trigger(1e9)
    coordinator.acknowledge(TaskAck(second, tasks[0], error="storing failed"))
    assert coordinator.stats.aborted == 1 and coordinator.due(2e9)
    third = coordinator.trigger(2e9)
    coordinator.expire(2e9 + plan.config.checkpoint_timeout_secs + 1)
    assert coordinator.stats.aborted == 2 and third == 10
    assert coordinator.restart() == 8
    again = CheckpointCoordinator(plan, storage)  # a later run on the same location
    assert again.latest == 8 and again.trigger(0) == 9
    other = word_count(checkpoint_interval_secs=1000, num_workers=1).build()
    changed = (
        Topology("other", other.config)
        .spout("sentences", partial(SequenceSpout, [], ["sentence"]))
        .bolt("count", StatefulCount, inputs={"sentences": shuffle()})
        .build()
    )
    with pytest.raises(TopologyError, match="other components or tasks"):
        CheckpointCoordinator(changed, storage)


# -- whole runs, local mode -----------------------------------------------------------------------


def test_a_stateful_word_count_checkpoints_and_its_state_is_exact():
    with run_local(word_count()) as run:
        run.wait_until_done(30)
        latest = run.checkpoint()
        stats = run.checkpoint_statistics()
        assert stats.latest == latest and stats.completed >= 1 and run.restarts == []
        assert counted(run.checkpoint_dir) == EXPECTED
        assert run.errors() == []
    record = stats.history[-1]
    assert record.bytes > 0 and record.duration_s > 0 and record.pause_ms_max > 0


def test_a_killed_worker_rolls_the_run_back_to_its_last_checkpoint():
    with run_local(word_count()) as run:
        wait_for(lambda: run.checkpoint_statistics().completed >= 2, what="two checkpoints")
        run.kill_worker(1)
        run.wait_until_done(30)
        run.checkpoint()
        assert counted(run.checkpoint_dir) == EXPECTED
        assert run.restarts == ["attempt 1: worker 1: killed (kill_worker)"]
        assert run.attempt == 2 and run.checkpoint_statistics().restored_from >= 2


def test_a_frozen_worker_rolls_the_run_back_to_its_last_checkpoint():
    """A worker process that freezes (SIGSTOP: it neither dies nor answers) is lost after
    worker_timeout_secs: killed, and every worker starts again from the last checkpoint.
    Before, the run waited for it for ever and no checkpoint completed again."""
    with run_multiprocess(word_count(worker_timeout_secs=4)) as run:
        wait_for(lambda: run.checkpoint_statistics().completed >= 2, what="two checkpoints")
        victim = run.processes[1]
        os.kill(victim.pid, signal.SIGSTOP)
        run.wait_until_done(60)
        run.checkpoint()
        assert counted(run.checkpoint_dir) == EXPECTED
        assert victim.poll() == -signal.SIGKILL
        assert run.restarts == [
            f"attempt 1: worker 1 of 'stateful-word-count' (pid {victim.pid}) said nothing "
            "for 4 s (worker_timeout_secs): frozen, or stopped (SIGSTOP)"
        ]


@pytest.fixture
def hung():
    """HangingCounts hang in this test, and are let go at its end (a local run's hung thread
    outlives the run)."""
    RELEASE_HUNG.clear()
    yield
    RELEASE_HUNG.set()


# a checkpoint of this word count takes milliseconds: 1 s is a hung task's
HANGING = {"checkpoint_timeout_secs": 1, "tolerable_failed_checkpoints": 2}


def said_where_it_hung(run) -> bool:
    """Whether a worker of ``run`` reported the HangingCount's hung call, and where."""
    return any(
        e.component == "count"
        and "process() of task" in e.error
        and "held it up: hung?" in e.error
        and "RELEASE_HUNG.wait()" in e.traceback
        for e in run.errors()
    )


@pytest.mark.parametrize("runner", [run_local, run_multiprocess])
def test_a_task_hung_in_process_rolls_the_run_back_after_tolerable_failed_checkpoints(
    tmp_path, runner, hung
):
    """A stateful task hangs in ``process`` (once in all).  Before, every checkpoint timed out
    and was abandoned, for ever: the run looked alive and its state never advanced.  Now the
    third failure in a row (one more than tolerable) makes the run treat its workers as lost
    and start them again from the last complete checkpoint; the count ends exact.  The
    worker reported the hung call, with its stack, in ``errors()``."""
    once = str(tmp_path / "hung")
    topology = word_count(count=partial(HangingCount, "cow", once=once), **HANGING)
    with runner(topology) as run:
        run.wait_until_done(60)
        run.checkpoint()
        assert counted(run.checkpoint_dir) == EXPECTED
        [cause] = run.restarts
        assert "3 checkpoints in a row failed (tolerable_failed_checkpoints=2)" in cause
        assert "not complete after 1 s (checkpoint_timeout_secs); never answered:" in cause
        assert "'count' task" in cause and "need a longer checkpoint_timeout_secs" in cause
        assert said_where_it_hung(run)
        if runner is run_local:  # the hung thread's stack, down to the component's line
            assert "in process\n    RELEASE_HUNG.wait()" in cause, cause


@pytest.mark.slow  # the rollback above, twice over: max_attempts ending a run is checked faster
def test_a_task_that_hangs_in_every_attempt_ends_the_run_naming_it_and_its_stack(hung):
    """With a thread per executor, the split tasks wait to emit to the hung count task (its
    queue full): held up, they are not reported; the count task is."""
    topology = word_count(
        count=partial(HangingCount, "cow"), executor_threads="per_executor", **HANGING
    )
    run = run_local(topology, max_attempts=2)
    with run, pytest.raises(WorkerProcessError, match="in each of its last 2 attempt") as error:
        run.wait_until_done(60)
    assert run.failure is error.value and len(run.restarts) == 2
    said = str(error.value)
    assert said.count("checkpoints in a row failed (tolerable_failed_checkpoints=2)") == 2
    assert "never answered: " in said and "'count' task" in said
    assert "in process\n    RELEASE_HUNG.wait()" in said
    assert run.hung_threads  # left behind: threads cannot be killed
    assert said_where_it_hung(run)
    assert {e.component for e in run.errors()} == {"count"}


def test_tolerable_failed_checkpoints_none_tolerates_any_number(hung):
    """None keeps a run whose checkpoints all fail (here: a hung task) running on: no
    restart, however many fail."""
    topology = word_count(
        count=partial(HangingCount, "cow"), **dict(HANGING, tolerable_failed_checkpoints=None)
    )
    with run_local(topology) as run:
        wait_for(lambda: run.checkpoint_statistics().failed_in_a_row >= 3, what="3 failures")
        assert run.restarts == [] and run.attempt == 1


def test_tolerable_failed_checkpoints_must_be_none_or_a_count():
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(TopologyError, match="tolerable_failed_checkpoints must be None or"):
            word_count(tolerable_failed_checkpoints=bad).build()


def next_attempts_worker(run: MultiprocessRun) -> int:
    """After two checkpoints, kill a worker of ``run`` (SIGKILL); the pid of the first worker
    of the attempt that follows, as soon as it is spawned."""
    wait_for(lambda: run.checkpoint_statistics().completed >= 2, what="two checkpoints")
    first = set(run.pids)
    os.kill(run.pids[0], signal.SIGKILL)
    new = wait_for(
        lambda: [p.pid for p in list(run.processes) if p.pid not in first],
        what="the next attempt's first worker",
    )
    return int(new[0])


def test_a_worker_that_dies_before_reading_its_job_is_a_lost_worker():
    """A new attempt's worker killed at once (the job, this topology's sentences, is more than
    a pipe holds: the driver is still writing it).  Before, the write's BrokenPipeError ended
    the run's supervisor, and the run hung for ever waiting for that attempt to start."""
    with run_multiprocess(word_count(), max_attempts=3) as run:
        new = next_attempts_worker(run)
        os.kill(new, signal.SIGKILL)
        run.wait_until_done(40)
        run.checkpoint()
        assert counted(run.checkpoint_dir) == EXPECTED
        assert len(run.restarts) == 2 and f"(pid {new}) exited with code -9" in run.restarts[1]


@pytest.mark.timeout(90)  # two checkpoints, 15 s of a frozen attempt, then the whole run
def test_a_worker_that_freezes_while_its_attempt_starts_is_a_lost_worker():
    """A new attempt's worker frozen before it read its job (SIGSTOP; a host that froze).
    Before, the driver's write of the job blocked for ever on the full pipe: the run hung.
    Now the attempt is lost after start_timeout and the next one starts.  start_timeout
    bounds the next attempt's healthy start too (two fresh processes importing brokerless: 0.6 s
    here when idle, over 4 s when two test files run side by side), so it is 15 s."""
    with MultiprocessRun(word_count(), start_timeout=15) as run:
        os.kill(next_attempts_worker(run), signal.SIGSTOP)
        run.wait_until_done(45)
        run.checkpoint()
        assert counted(run.checkpoint_dir) == EXPECTED
        assert len(run.restarts) == 2 and "not started after 15 s" in run.restarts[1]
        assert "worker 0: never heard from" in run.restarts[1]


def test_a_run_that_cannot_start_its_next_attempt_raises_instead_of_hanging(monkeypatch):
    """Whatever ends the run's supervisor (here starting a process fails: no memory, no pids
    left) is raised to whoever waits on the run.  Before, they waited for ever for an attempt
    that nothing would start."""
    with run_multiprocess(word_count()) as run:
        wait_for(lambda: run.checkpoint_statistics().completed >= 2, what="two checkpoints")

        def cannot_fork(*args, **kwargs):
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

        monkeypatch.setattr(subprocess, "Popen", cannot_fork)
        os.kill(run.pids[1], signal.SIGKILL)
        with pytest.raises(OSError, match="Resource temporarily unavailable"):
            run.wait_until_done(30)


def test_a_worker_lost_now_and_then_ends_no_run_that_completes_checkpoints_between():
    """``max_attempts`` counts the attempts in a row that completed no checkpoint, as Flink's
    failure-rate restarts do: before, it counted every attempt of a run's life, so a job that
    lost a machine once a day died on the third day."""
    with run_local(word_count(), max_attempts=2) as run:
        for kill in range(3):
            done = run.checkpoint_statistics().completed
            wait_for(lambda d=done: run.checkpoint_statistics().completed > d, what="progress")
            run.kill_worker(kill % 2)
        run.wait_until_done(30)
        run.checkpoint()
        assert counted(run.checkpoint_dir) == EXPECTED
        assert len(run.restarts) == 3 and run.attempt == 4


@pytest.mark.parametrize(
    ("mode", "error"),
    [("local", ValueError), ("local", KeyboardInterrupt), ("multiprocess", ValueError)],
)
def test_a_failed_task_or_a_crashed_executor_rolls_the_run_back(tmp_path, mode, error):
    # ValueError from process() fails the task; a BaseException ends its executor's thread
    word = f"s{len(SENTENCES) // 2}"
    count = partial(FailingCount, word, error, once=str(tmp_path / "failed"))
    topology = word_count(count=count)
    run = run_local(topology) if mode == "local" else run_multiprocess(topology)
    with run:
        run.wait_until_done(30)
        run.checkpoint()
        assert counted(run.checkpoint_dir) == EXPECTED
        assert len(run.restarts) == 1 and f"failing on {word!r}" in run.restarts[0]
        assert any(f"failing on {word!r}" in e.error for e in run.errors())


def test_a_bolt_that_fails_a_tuple_no_spout_tracks_rolls_the_run_back(tmp_path):
    """A replayable spout's tuples need no msg_id: in a checkpointed topology a rollback is
    how they are replayed, so a bolt's ``fail`` of one rolls back as an exception does (a sink
    whose write failed).  Before, it did nothing: the tuple was lost and the state short."""
    word = f"s{len(SENTENCES) // 2}"
    count = partial(FailingCount, word, None, once=str(tmp_path / "failed"))
    with run_local(word_count(count=count)) as run:
        run.wait_until_done(30)
        run.checkpoint()
        assert counted(run.checkpoint_dir) == EXPECTED
        assert len(run.restarts) == 1 and "fail() of a tuple no spout tracks" in run.restarts[0]


def test_a_task_that_always_fails_ends_the_run_after_its_attempts():
    count = partial(FailingCount, "s1")
    with run_local(word_count(count=count), max_attempts=2) as run:
        with pytest.raises(WorkerProcessError, match=r"each of its last 2 attempt\(s\), none of"):
            run.wait_until_done(30)
        assert len(run.restarts) == 2 and run.stopped
        with pytest.raises(WorkerProcessError):
            run.checkpoint()


def test_stateful_bolts_hear_of_each_checkpoint_before_and_after(tmp_path):
    """Storm's IStatefulBolt hooks: init_state, then for each checkpoint pre_prepare (before
    the snapshot) and, once it is committed, pre_commit then notify_checkpoint_complete; no
    pre_rollback on a run's first start.  A later run on the same location rolls back to the
    last checkpoint: pre_rollback, then init_state."""
    log = str(tmp_path / "hooks")
    topology = word_count(
        count=partial(HookedCount, log),
        sentences=SENTENCES[:100],
        checkpoint_dir=str(tmp_path / "checkpoints"),
    )
    with run_local(topology) as run:
        run.wait_until_done(30)
        latest = run.checkpoint()
        tasks = run.plan.components["count"].tasks
        wait_for(  # each executor hears of the commit in its own time
            lambda: (
                sorted(t for t, h in hook_calls(log).items() if f"complete {latest}" in h)
                == list(tasks)
            ),
            what="the commit's news in every task",
        )
    with pytest.raises(RuntimeError, match="is stopped"):
        run.checkpoint(timeout=5)
    calls = hook_calls(log)
    assert sorted(calls) == list(tasks)
    for hooks in calls.values():
        assert hooks[0] == "init_state" and "pre_rollback" not in hooks
        assert hooks.index(f"pre_prepare {latest}") < hooks.index(f"pre_commit {latest}")
        assert hooks.index(f"pre_commit {latest}") + 1 == hooks.index(f"complete {latest}")
    os.remove(log)
    with run_local(topology) as again:
        wait_for(  # (each task's first two hooks: wait for both)
            lambda: sorted(t for t, h in hook_calls(log).items() if len(h) >= 2) == list(tasks),
            what="every task's start",
        )
        assert again.checkpoint_statistics().restored_from == latest
    for hooks in hook_calls(log).values():
        assert hooks[:2] == ["pre_rollback", "init_state"]


@pytest.mark.parametrize("mode", ["local", "multiprocess"])
def test_a_rollback_calls_pre_rollback_then_init_state_in_every_stateful_task(tmp_path, mode):
    log = str(tmp_path / "hooks")
    topology = word_count(count=partial(HookedCount, log))
    runner = run_local if mode == "local" else run_multiprocess
    with runner(topology) as run:
        wait_for(lambda: run.checkpoint_statistics().completed >= 2, what="two checkpoints")
        if isinstance(run, MultiprocessRun):
            os.kill(run.pids[1], signal.SIGKILL)
        else:
            run.kill_worker(1)
        run.wait_until_done(60)
        run.checkpoint()
        assert counted(run.checkpoint_dir) == EXPECTED and len(run.restarts) == 1
    calls = hook_calls(log)
    assert sorted(calls) == list(run.plan.components["count"].tasks)
    for hooks in calls.values():  # each task's instance in each attempt
        assert hooks.count("init_state") == 2 and hooks.count("pre_rollback") == 1
        assert hooks[0] == "init_state"
        assert hooks[hooks.index("pre_rollback") + 1] == "init_state"


@pytest.fixture
def disk_full(monkeypatch) -> threading.Event:
    """While set, storing a task's snapshot fails as a full disk makes it fail."""
    full = threading.Event()
    write = LocalStorage.write

    def flaky(self, path, data):
        if full.is_set() and "/task-" in path:
            raise OSError(28, "No space left on device")
        write(self, path, data)

    monkeypatch.setattr(LocalStorage, "write", flaky)
    return full


def test_a_checkpoint_that_cannot_be_stored_is_abandoned_and_the_run_goes_on(disk_full):
    failing = disk_full
    with run_local(word_count(tolerable_failed_checkpoints=None)) as run:
        failing.set()
        wait_for(lambda: run.checkpoint_statistics().aborted >= 1, what="an abandoned checkpoint")
        stats = run.checkpoint_statistics()
        assert "declined it: storing its snapshot failed" in stats.last_failure
        assert "No space left on device" in stats.last_failure
        assert any("No space left" in e.error for e in run.errors())
        failing.clear()
        run.wait_until_done(30)
        run.checkpoint()
        assert counted(run.checkpoint_dir) == EXPECTED


def test_a_storage_outage_longer_than_the_tolerance_rolls_back(disk_full):
    """Every snapshot fails to store: after tolerable_failed_checkpoints (+1) declined
    checkpoints in a row the run starts its workers again from the last complete checkpoint,
    as Flink fails a job over; once storage is back, it ends exact."""
    outage = disk_full
    with run_local(word_count(tolerable_failed_checkpoints=2)) as run:
        wait_for(lambda: run.checkpoint_statistics().completed >= 1, what="a checkpoint")
        outage.set()
        wait_for(lambda: run.restarts, what="a rollback")
        outage.clear()
        run.wait_until_done(30)
        run.checkpoint()
        assert counted(run.checkpoint_dir) == EXPECTED
        assert "3 checkpoints in a row failed (tolerable_failed_checkpoints=2)" in run.restarts[0]
        assert "declined it: storing its snapshot failed" in run.restarts[0]


def test_a_run_on_a_location_with_a_checkpoint_resumes_from_it(tmp_path):
    location = str(tmp_path / "checkpoints")
    # queues of 512, not 64: a split task sends 8 words a sentence, so with small queues the
    # two split tasks could drift apart by more than the 4 queues' worth a count task holds
    # back to align a checkpoint -- every checkpoint declined, and the run out of attempts
    # (seen under load; what stays open of it is in the notes of alignment)
    topology = word_count(checkpoint_dir=location, executor_queue_size=512)
    with run_local(topology) as run:
        first = run.checkpoint()
    # the second run starts from the first one's checkpoint: what came before it is not
    # counted again, what came after it is counted once
    with run_local(topology) as run:
        assert run.checkpoint_statistics().restored_from >= first  # (or a later periodic one)
        run.wait_until_done(30)
        assert run.checkpoint() > first
    assert counted(location) == EXPECTED


@pytest.mark.parametrize("damage", [b"", b'{"checkpoint": 1, "lay', b"[]"])
def test_a_run_on_a_damaged_commit_marker_is_refused_and_keeps_the_checkpoint(tmp_path, damage):
    """Before, a ``_COMPLETED`` that did not parse was taken for a checkpoint never committed:
    the run started from the beginning -- its state empty -- and deleted it as a leftover."""
    location = str(tmp_path / "checkpoints")
    topology = word_count(sentences=SENTENCES[:100], checkpoint_dir=location)
    with run_local(topology) as run:
        run.wait_until_done(30)
        latest = run.checkpoint()
    marker = tmp_path / "checkpoints" / checkpoint_name(latest) / "_COMPLETED"
    marker.write_bytes(damage)
    with pytest.raises(ValueError, match=rf"checkpoint {latest} at .* is damaged: .*_COMPLETED"):
        run_local(topology)
    assert marker.read_bytes() == damage and (marker.parent / "task-5").exists()


def test_a_snapshot_missing_from_the_checkpoint_a_run_restores_is_named(tmp_path):
    """Before, the error said ``FileNotFoundError(2, 'No such file or directory')``: which
    file was left out (an OSError's repr drops it)."""
    location = str(tmp_path / "checkpoints")
    topology = word_count(checkpoint_dir=location)
    with run_local(topology) as run:
        latest = run.checkpoint()  # (with sentences still to count)
    missing = tmp_path / "checkpoints" / snapshot_path(latest, 5)
    missing.unlink()
    with run_local(topology, max_attempts=1) as run, pytest.raises(WorkerProcessError) as raised:
        run.wait_until_done(30)
    assert (
        f"task 5 cannot restore checkpoint {latest}: FileNotFoundError: [Errno 2] No such file "
        f"or directory: '{missing}'" in str(raised.value)
    )


def test_a_local_run_with_a_failed_task_is_not_done_even_with_nothing_left_to_emit(tmp_path):
    """The spouts restored at their end (the first run counted everything), a bolt task that
    cannot restore: before, local mode's wait_until_done found every spout done and nothing
    in flight before the supervisor looked, and returned -- the run ended without an error,
    its task never restored.  Multi-process mode already waited for the rollback."""
    location = str(tmp_path / "checkpoints")
    topology = word_count(sentences=SENTENCES[:100], checkpoint_dir=location)
    with run_local(topology) as run:
        run.wait_until_done(30)
        latest = run.checkpoint()
    (tmp_path / "checkpoints" / snapshot_path(latest, 5)).unlink()
    with run_local(topology, max_attempts=2) as run:
        with pytest.raises(WorkerProcessError, match=r"each of its last 2 attempt\(s\), none of"):
            run.wait_until_done(30)
        assert len(run.restarts) == 2 and "task 5 cannot restore" in run.restarts[0]


def test_a_spout_that_has_not_opened_yet_is_not_done():
    # a completion round taken while workers (re)start must not see a finished topology
    plan = word_count(count=WordSplit, num_workers=1).build()
    worker = Worker(plan, assign(plan, 1), 0)
    assert not worker.activity().spouts_done
    for executor in worker.executors:
        if executor.kind == "spout":
            executor.open()
            executor._next_tuples()
    assert not worker.activity().spouts_done  # opened, with its tuples still to emit


def test_complete_topology_mocks_the_spouts_of_a_stateful_topology():
    sentences = SENTENCES[:200]
    result = complete_topology(word_count(), {"sentences": [[s] for s in sentences]})
    assert result.errors == []
    assert final_counts(result.emitted("count")) == collections.Counter(
        w for s in sentences for w in s.split()
    )
