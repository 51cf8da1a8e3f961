"""Spouts and bolts shared by the stream tests (an importable module, so worker processes of
multi-process runs can unpickle topologies built from them)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from brokerless.stream import (
    BatchingBolt,
    Bolt,
    SequenceSpout,
    SerializationError,
    Spout,
    StatefulBolt,
    Stream,
    TicklessBatchingBolt,
    WALSpout,
    WindowedBolt,
)


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll ``predicate`` (every 2 ms) until it returns a true value; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        pause.wait(0.002)


class Source(Spout):
    """Declares one field; the tests replace it with mocked tuples."""

    outputs = ["value"]


class KeySource(Spout):
    outputs = ["key", "n"]


class ValueSpout(Spout):
    """Emits ``values`` with their index as msg_id, replaying failures when ``replay``.  It
    reports its bookkeeping as tuples (captured by ``complete_topology`` in every mode):
    stream "acked" gets ``[msg_id, tuples in flight just before this ack]``, stream "failed"
    gets ``[msg_id]``."""

    outputs = [
        Stream(["value"]),
        Stream(["msg_id", "in_flight"], name="acked"),
        Stream(["msg_id"], name="failed"),
    ]

    def __init__(self, values: Sequence[Any], replay: bool = True) -> None:
        self.values = list(values)
        self.replay = replay

    def open(self, conf: Any, context: Any) -> None:
        n = len(context.get_component_tasks(context.component_id))
        self.todo = list(range(context.task_index, len(self.values), n))
        self.todo.reverse()
        self.in_flight: set[int] = set()

    def next_tuple(self) -> None:
        if self.todo:
            msg_id = self.todo.pop()
            self.in_flight.add(msg_id)
            self.emit([self.values[msg_id]], msg_id=msg_id)

    def ack(self, msg_id: Any) -> None:
        self.emit([msg_id, len(self.in_flight)], stream="acked")
        self.in_flight.remove(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.emit([msg_id], stream="failed")
        self.in_flight.remove(msg_id)
        if self.replay:
            self.todo.append(msg_id)

    def exhausted(self) -> bool:
        return not self.todo and not self.in_flight


class GatedValueSpout(ValueSpout):
    """A ValueSpout that emits its first ``first`` values, then the rest only once the file
    ``gate`` exists (a gate across processes)."""

    def __init__(self, values: Sequence[Any], first: int, gate: str) -> None:
        super().__init__(values, replay=False)
        self.first, self.gate = first, gate

    def next_tuple(self) -> None:
        emitted = len(self.values) - len(self.todo)
        if emitted < self.first or os.path.exists(self.gate):
            super().next_tuple()


class GatedSequenceSpout(SequenceSpout):
    """A SequenceSpout whose tasks each emit their first ``first`` tuples, then the rest only
    once the file ``gate`` exists (a gate across processes)."""

    def __init__(
        self, tuples: Sequence[Sequence[Any]], fields: Sequence[str], first: int, gate: str
    ) -> None:
        super().__init__(tuples, fields)
        self.first, self.gate = first, gate

    def next_tuple(self) -> None:
        if self.position() < self.first or os.path.exists(self.gate):
            super().next_tuple()


class DurableSpout(Spout):
    """Emits 0 .. ``n`` - 1 reliably (task i of k: i, i + k, ...), once ``gate`` exists all of
    them, before that the first ``first`` of each task; replays failures.  Like a Kafka spout
    that commits offsets, each task appends what was acked to ``<log_dir>/acked-<task>`` and,
    when opened again (a rebalance, a restart), emits only what was never acked: one line per
    ack in those files, whatever the run did."""

    outputs = ["value"]

    def __init__(self, n: int, log_dir: str, first: int, gate: str) -> None:
        self.n, self.log_dir, self.first, self.gate = n, log_dir, first, gate

    def open(self, conf: Any, context: Any) -> None:
        k = len(context.get_component_tasks(context.component_id))
        self.log = os.path.join(self.log_dir, f"acked-{context.task_id}")
        done = set(acked_values(self.log))
        self.todo = [v for v in range(context.task_index, self.n, k) if v not in done]
        self.todo.reverse()
        self.emitted = 0
        self.in_flight: set[int] = set()

    def next_tuple(self) -> None:
        if self.todo and (self.emitted < self.first or os.path.exists(self.gate)):
            value = self.todo.pop()
            self.emitted += 1
            self.in_flight.add(value)
            self.emit([value], msg_id=value)

    def ack(self, msg_id: Any) -> None:
        self.in_flight.discard(msg_id)
        with open(self.log, "a") as log:
            log.write(f"{msg_id}\n")

    def fail(self, msg_id: Any) -> None:
        self.in_flight.discard(msg_id)
        self.todo.append(msg_id)

    def exhausted(self) -> bool:
        return not self.todo and not self.in_flight


def acked_values(path: str) -> list[int]:
    """What a DurableSpout's ack log ``path`` holds, in order (one entry per ack)."""
    try:
        with open(path) as log:
            return [int(line) for line in log]
    except FileNotFoundError:
        return []


class Recorder(Bolt):
    """Emits ``[its task, the source task, the input's values]`` for every input."""

    outputs = ["task", "source", "values"]

    def prepare(self, conf: Any, context: Any) -> None:
        self.task = context.task_id

    def process(self, tup: Any) -> None:
        self.emit([self.task, tup.task, list(tup.values)])


class Fanout(Bolt):
    """Emits ``[value, i]`` for i in 0..2 (anchored): a tree of three children per input."""

    outputs = ["value", "child"]

    def process(self, tup: Any) -> None:
        for i in range(3):
            self.emit([tup[0], i])


class FailEveryThirdOnce(Bolt):
    """Fails the first delivery of every third distinct input it sees (by values); acks the
    rest.  Emits ``[values]`` for each tuple it acks."""

    outputs = ["values"]
    auto_ack = False

    def prepare(self, conf: Any, context: Any) -> None:
        self.seen: set[tuple[Any, ...]] = set()

    def process(self, tup: Any) -> None:
        key = tuple(tup.values)
        if key not in self.seen:
            self.seen.add(key)
            if len(self.seen) % 3 == 0:
                self.fail(tup)
                return
        self.emit([list(key)])
        self.ack(tup)


class FailAll(Bolt):
    """Fails every tuple it gets."""

    auto_ack = False

    def process(self, tup: Any) -> None:
        self.fail(tup)


class PairUp(Bolt):
    """Emits ``[[a, b]]`` for every two inputs in a row, anchored to both (one tuple in two
    spout tuples' trees), then acks them."""

    outputs = ["pair"]
    auto_ack = False

    def prepare(self, conf: Any, context: Any) -> None:
        self.held: Any = None

    def process(self, tup: Any) -> None:
        if self.held is None:
            self.held = tup
            return
        first, self.held = self.held, None
        self.emit([[first[0], tup[0]]], anchors=[first, tup])
        self.ack(first)
        self.ack(tup)


class FailPairWith(Bolt):
    """Fails the pair that holds ``value``; acks every other."""

    auto_ack = False

    def __init__(self, value: Any) -> None:
        self.value = value

    def process(self, tup: Any) -> None:
        if self.value in tup[0]:
            self.fail(tup)
        else:
            self.ack(tup)


class HoldValue(Bolt):
    """Acks every input except those whose value equals ``held``, which it never acks."""

    outputs = ["value"]
    auto_ack = False

    def __init__(self, held: Any) -> None:
        self.held = held

    def process(self, tup: Any) -> None:
        if tup[0] != self.held:
            self.emit([tup[0]])
            self.ack(tup)


class RaiseOn(Bolt):
    """Raises ValueError for the value ``bad``; passes everything else on."""

    outputs = ["value"]

    def __init__(self, bad: Any) -> None:
        self.bad = bad

    def process(self, tup: Any) -> None:
        if tup[0] == self.bad:
            raise ValueError(f"cannot handle {tup[0]!r}")
        self.emit([tup[0]])


class RaiseAlways(Bolt):
    """Raises ValueError naming its input, for every tuple."""

    def process(self, tup: Any) -> None:
        raise ValueError(f"cannot handle {tup[0]!r}")


class RaiseHuge(Bolt):
    """Raises a ValueError whose message is 5 MiB (an error carrying a whole payload)."""

    def process(self, tup: Any) -> None:
        raise ValueError(f"cannot handle {tup[0]!r}: " + "x" * (5 << 20))


class EmitUnserializable(Bolt):
    """Emits a set (msgpack cannot encode it) for the value ``bad``, everything else
    unchanged.  With ``catch`` it reports the SerializationError on stream "problems", else
    the error escapes ``process``."""

    outputs = [Stream(["value", "extra"]), Stream(["message"], name="problems")]

    def __init__(self, bad: Any, catch: bool) -> None:
        self.bad = bad
        self.catch = catch

    def process(self, tup: Any) -> None:
        extra = {1, 2} if tup[0] == self.bad else "ok"
        try:
            self.emit([tup[0], extra])
        except SerializationError as exc:
            if not self.catch:
                raise
            self.emit([str(exc)], stream="problems")


class Gate(Bolt):
    """Processes one tuple per permit of ``gate`` (a threading.Semaphore): a bolt exactly as
    slow as the test makes it."""

    outputs = ["value"]

    def __init__(self, gate: threading.Semaphore) -> None:
        self.gate = gate

    def process(self, tup: Any) -> None:
        if not self.gate.acquire(timeout=30):
            raise TimeoutError("the test never opened the gate")


class Counter(Spout):
    """Emits 0, 1, 2, ... unreliably (no msg ids), forever."""

    outputs = ["value"]

    def open(self, conf: Any, context: Any) -> None:
        self.n = 0

    def next_tuple(self) -> None:
        self.emit([self.n])
        self.n += 1


class ReliableCounter(Spout):
    """Emits 0, 1, 2, ... reliably (each value is its own msg id), forever."""

    outputs = ["value"]

    def open(self, conf: Any, context: Any) -> None:
        self.n = 0

    def next_tuple(self) -> None:
        self.emit([self.n], msg_id=self.n)
        self.n += 1


class Bounce(Bolt):
    """Part of a cycle: ``[value, ttl]`` goes round while ttl > 0 (each lap emits ttl - 1)
    and leaves on stream "out" when ttl reaches 0."""

    outputs = [Stream(["value", "ttl"]), Stream(["value"], name="out")]

    def process(self, tup: Any) -> None:
        value, ttl = tup.values
        if ttl > 0:
            self.emit([value, ttl - 1])
        else:
            self.emit([value], stream="out")


class StartBounce(Bolt):
    """Turns ``[value]`` into ``[value, laps]``."""

    outputs = ["value", "ttl"]

    def __init__(self, laps: int) -> None:
        self.laps = laps

    def process(self, tup: Any) -> None:
        self.emit([tup[0], self.laps])


class Relay(Bolt):
    """Re-emits its input's values."""

    outputs = ["value"]

    def process(self, tup: Any) -> None:
        self.emit([tup[0]])


class Sink(Bolt):
    """Consumes tuples."""


class AckInBatches(Bolt):
    """Holds its inputs and acks them ``size`` at a time: the spout must have ``size`` tuples
    in flight before any is acked."""

    outputs = ["value"]
    auto_ack = False

    def __init__(self, size: int) -> None:
        self.size = size
        self.held: list[Any] = []

    def process(self, tup: Any) -> None:
        self.held.append(tup)
        if len(self.held) == self.size:
            for held in self.held:
                self.ack(held)
            self.held.clear()


class Busy(Bolt):
    """Takes at least ``ms`` milliseconds of CPU per tuple (busy, not sleeping)."""

    outputs = ["value"]

    def __init__(self, ms: float) -> None:
        self.ms = ms

    def process(self, tup: Any) -> None:
        end = time.perf_counter() + self.ms / 1000
        while time.perf_counter() < end:
            pass
        self.emit([tup[0]])


class Waits(Bolt):
    """Spends ``ms`` milliseconds of each ``process`` blocked (on an Event nobody sets), not
    taking the CPU, and passes the value on."""

    outputs = ["value"]

    def __init__(self, ms: float) -> None:
        self.ms = ms

    def prepare(self, conf: Any, context: Any) -> None:
        self.never = threading.Event()

    def process(self, tup: Any) -> None:
        self.never.wait(self.ms / 1000)
        self.emit([tup[0]])


class FlushesEvery(Bolt):
    """Buffers its input and writes it out every ``every`` tuples, which takes ``ms``
    milliseconds (blocked, as on a database) -- a bolt whose work comes in periodic bursts."""

    def __init__(self, every: int, ms: float) -> None:
        self.every = every
        self.ms = ms

    def prepare(self, conf: Any, context: Any) -> None:
        self.buffered = 0
        self.never = threading.Event()

    def process(self, tup: Any) -> None:
        self.buffered += 1
        if self.buffered == self.every:
            self.never.wait(self.ms / 1000)
            self.buffered = 0


class BrokenPrepare(Bolt):
    """Cannot prepare, ever."""

    outputs = ["value"]

    def prepare(self, conf: Any, context: Any) -> None:
        raise RuntimeError("no database today")


class NotYet:
    """``check(key)`` raises ConnectionError the first ``times`` it is called with ``key`` (a
    service that is not up yet); ``calls`` counts every call.  Shared by every instance of a
    component in this process (each attempt to start a task makes a new one)."""

    def __init__(self, times: int) -> None:
        self.times = times
        self.calls: dict[Any, int] = {}

    def check(self, key: Any) -> None:
        self.calls[key] = self.calls.get(key, 0) + 1
        if self.calls[key] <= self.times:
            raise ConnectionError(f"not up yet (call {self.calls[key]})")


class PrepareNotYet(Recorder):
    """A Recorder whose ``prepare`` fails while ``service`` is not up."""

    def __init__(self, service: NotYet) -> None:
        self.service = service

    def prepare(self, conf: Any, context: Any) -> None:
        self.service.check(context.task_id)
        super().prepare(conf, context)


class OpenNotYet(ValueSpout):
    """A ValueSpout whose ``open`` fails while ``service`` is not up."""

    def __init__(self, service: NotYet, values: Sequence[Any]) -> None:
        super().__init__(values, replay=True)
        self.service = service

    def open(self, conf: Any, context: Any) -> None:
        self.service.check(context.task_id)
        super().open(conf, context)


class ReportSent(Bolt):
    """Re-emits its input and reports, on stream "sent", the tasks ``emit`` said it went to."""

    outputs = [Stream(["value"]), Stream(["value", "tasks"], name="sent")]

    def process(self, tup: Any) -> None:
        tasks = self.emit([tup[0]])
        self.emit([tup[0], tasks], stream="sent")


# -- checkpointed topologies (test_stream_state*.py) ---------------------------------------


class WordSplit(Bolt):
    """Splits a sentence (str, or the bytes of a WAL record's payload) into words."""

    outputs = ["word"]

    def process(self, tup: Any) -> None:
        sentence = tup[1] if len(tup) > 1 else tup[0]
        if isinstance(sentence, bytes):
            sentence = sentence.decode()
        for word in sentence.split():
            self.emit([word])


class StatefulCount(StatefulBolt):
    """Counts words in its checkpointed state; emits ``[word, count]``."""

    outputs = ["word", "count"]

    def init_state(self, state: Any) -> None:
        self.counts = state

    def process(self, tup: Any) -> None:
        word = tup[0]
        count = self.counts.get(word, 0) + 1
        self.counts[word] = count
        self.emit([word, count])


class FailingCount(StatefulCount):
    """A StatefulCount whose ``process`` raises ``error`` when it sees ``word`` (or, with
    ``error`` None, calls ``fail`` on the tuple and counts nothing): every time, or with
    ``once`` (a file path) only while that file does not exist, which it creates -- once in
    all, whichever process or attempt gets there first."""

    def __init__(
        self, word: str, error: type[BaseException] | None = ValueError, once: str | None = None
    ) -> None:
        self.word = word
        self.error = error
        self.once = once

    def process(self, tup: Any) -> None:
        if tup[0] == self.word and self._first_time():
            if self.error is None:
                self.fail(tup)
                return
            raise self.error(f"failing on {self.word!r}")
        super().process(tup)

    def _first_time(self) -> bool:
        if self.once is None:
            return True
        try:
            with open(self.once, "x"):
                return True
        except FileExistsError:
            return False


#: Set at the end of a test to let the HangingCounts of local runs go (worker processes
#: that hang are killed).
RELEASE_HUNG = threading.Event()


class HangingCount(FailingCount):
    """A StatefulCount whose ``process`` hangs (until ``RELEASE_HUNG``) when it sees ``word``:
    every time, or with ``once`` only the first time in all (as FailingCount)."""

    def __init__(self, word: str, once: str | None = None) -> None:
        super().__init__(word, once=once)

    def process(self, tup: Any) -> None:
        if tup[0] == self.word and self._first_time():
            RELEASE_HUNG.wait()
        StatefulCount.process(self, tup)


class HookedCount(StatefulCount):
    """A StatefulCount that appends a line ``task hook [checkpoint]`` to the file ``log`` for
    each of its state hooks (from any process; read them with :func:`hook_calls`)."""

    def __init__(self, log: str) -> None:
        self.log = log

    def prepare(self, conf: Any, context: Any) -> None:
        self.task = context.task_id

    def _called(self, *hook: object) -> None:
        with open(self.log, "a") as log:  # one short append: whole, whichever process
            log.write(" ".join(map(str, (self.task, *hook))) + "\n")

    def init_state(self, state: Any) -> None:
        self._called("init_state")
        super().init_state(state)

    def pre_prepare(self, checkpoint_id: int) -> None:
        self._called("pre_prepare", checkpoint_id)

    def pre_commit(self, checkpoint_id: int) -> None:
        self._called("pre_commit", checkpoint_id)

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        self._called("complete", checkpoint_id)

    def pre_rollback(self) -> None:
        self._called("pre_rollback")


def hook_calls(log: str) -> dict[int, list[str]]:
    """What each task of HookedCounts that wrote ``log`` called, in order (task -> hooks:
    ``"pre_commit 3"``, ``"init_state"``, ...)."""
    calls: dict[int, list[str]] = {}
    if not os.path.exists(log):  # no task has started
        return calls
    with open(log) as lines:
        for line in lines:
            task, hook = line.rstrip("\n").split(" ", 1)
            calls.setdefault(int(task), []).append(hook)
    return calls


class EndingWALSpout(WALSpout):
    """A WALSpout (run it with one task) that is exhausted once it has read the message
    ``END``, which it emits like any other."""

    def open(self, conf: Any, context: Any) -> None:
        super().open(conf, context)
        self.ended = False

    def values(self, record: Any) -> list[Any]:
        if record.frames[-1] == b"END":
            self.ended = True
        return super().values(record)

    def exhausted(self) -> bool:
        return self.ended


class ReportInterpreter(Bolt):
    """Emits ``[value, generation 0's collection threshold in this process, its GIL's switch
    interval, its pid]`` for each tuple."""

    outputs = ["value", "threshold", "interval", "pid"]

    def process(self, tup: Any) -> None:
        import gc
        import os
        import sys

        self.emit([tup[0], gc.get_threshold()[0], sys.getswitchinterval(), os.getpid()])


class ReportAffinity(Bolt):
    """Emits ``[value, this worker's index, the CPUs of each thread of its process]`` (the
    last a sorted list of the distinct CPU sets, each a sorted list) for each tuple."""

    outputs = ["value", "worker", "thread_cpus"]

    def prepare(self, conf: Any, context: Any) -> None:
        self.worker = context.worker_index

    def process(self, tup: Any) -> None:
        self.emit([tup[0], self.worker, sorted(map(list, threads_cpus()))])


def threads_cpus(pid: int | str = "self") -> set[tuple[int, ...]]:
    """The distinct CPU sets of process ``pid``'s threads (each sorted; Linux ``/proc``)."""
    import os

    seen = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            seen.add(tuple(sorted(os.sched_getaffinity(int(tid)))))
        except OSError:  # the thread ended meanwhile
            pass
    return seen


class PausableCounter(Spout):
    """Emits 0, 1, 2, ... unreliably, one every 5 ms at most, and on stream "life" its
    ``activate``/``deactivate`` calls as they come."""

    outputs = [Stream(["value"]), Stream(["event"], name="life")]

    def open(self, conf: Any, context: Any) -> None:
        self.n = 0
        self.last = 0.0

    def activate(self) -> None:
        self.emit(["activate"], stream="life")

    def deactivate(self) -> None:
        self.emit(["deactivate"], stream="life")

    def next_tuple(self) -> None:
        now = time.monotonic()
        if now - self.last >= 0.005:  # (a rate, not a wait: nothing sleeps)
            self.last = now
            self.emit([self.n])
            self.n += 1


class TickReporter(Bolt):
    """Emits ``[its task]`` for each tick tuple it gets."""

    outputs = ["task"]

    def prepare(self, conf: Any, context: Any) -> None:
        self.task = context.task_id

    def process_tick(self, tup: Any) -> None:
        self.emit([self.task])


class CountBatches(BatchingBolt):
    """One batch per word: emits ``[word, tuples in the batch]``."""

    outputs = ["word", "n"]

    def group_key(self, tup: Any) -> Any:
        return tup[0]

    def process_batch(self, key: Any, tups: list[Any]) -> None:
        self.emit([key, len(tups)])


class TicklessCount(TicklessBatchingBolt, CountBatches):
    secs_between_batches = 0.05


class WritesBatches(TicklessBatchingBolt):
    """Every 0.1 s writes out the batch it gathered, which takes 80 ms (blocked, as on a
    database), and counts the batches in its counter "batches"."""

    secs_between_batches = 0.1

    def prepare(self, conf: Any, context: Any) -> None:
        self.batches = context.register_counter("batches")
        self.never = threading.Event()

    def process_batch(self, key: Any, tups: list[Any]) -> None:
        self.never.wait(0.08)
        self.batches.incr()


class Windows(WindowedBolt):
    """Emits each window as ``[values, new values, expired values]``."""

    outputs = ["values", "new", "expired"]

    def process_window(self, window: Any) -> None:
        self.emit(
            [
                [t[0] for t in window.tuples],
                [t[0] for t in window.new],
                [t[0] for t in window.expired],
            ]
        )
