"""What each executor counts: emitted, acked, failed, latency and the components' own
counters, and the marks its time windows are figured from (``statistics.py`` merges them into
what ``statistics()`` shows).

Every executor counts for itself (one writer per counter, no locks on them); a worker's
:meth:`~brokerless.stream.worker.Worker.snapshot` copies them into plain dicts, which travel
between processes as they are.

The latency of a bolt is its *execute latency* (``process`` called to returned); of a spout,
its *complete latency*, Storm's: from the emit of a spout tuple to the moment its acker saw
the whole tuple tree acked (taken when the spout task hears of it, so it includes that hop).
A bolt also has Storm's *process latency*: from the moment ``process`` is called with a tuple
to the moment the bolt acks it -- about the execute latency for a bolt that acks as it goes
(``auto_ack``), much longer for one that holds its tuples and acks them later (a batching or
windowed bolt, one that acks in batches); a failed tuple has none, as in Storm.  It is taken
for the tuples whose execute latency is (below): the executor notes when such a tuple arrived
(``ExecutorMetrics.arrived``, the tuples not yet acked) and the ack takes the time, so an ack
costs one more look at a dict that is empty unless a sampled tuple is held (no clock).

Time windows
------------
The counters and the mean latency are also given over Storm UI's windows (:data:`WINDOWS`: the
last 10 minutes, 3 hours, 1 day, and all time; the p99 is all-time, queue depths and tuples in
flight are now) without any work per tuple: the counters only ever grow, so an
executor's worker copies them every 1/20 of each window (:data:`BUCKETS`, as Storm's rolling
buckets; :class:`MetricsRoller`, a thread per worker, every :data:`ROLL_SECS`) into a ring of 21
*marks* per window, and a window's figures are the counters now minus the oldest mark no older
than the window -- so they cover about the last 95 to 100 % of it (or the executor's whole
life, when it is younger), and ``span_s`` says how long; a stopped worker's windows end when
it stopped.  Latencies come from the same sampled timings as the all-time ones (the timed
tuples' total and count, differenced alike).
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .component import CountMetric

#: Latencies are sampled, as Storm samples its statistics: an executor times one tuple in each
#: ``LATENCY_SAMPLE + 1`` (the first one included) at a random place in them, as Storm's even
#: sampler -- at a fixed place it would see a bolt's work every 20th tuple never, or every
#: 16th always (:meth:`ExecutorMetrics.sampled`); counters count them all.
LATENCY_SAMPLE = 15
_SAMPLE_BITS = LATENCY_SAMPLE.bit_length()
#: Storm UI's time windows, in seconds (None: all time), by the name ``statistics()`` uses.
WINDOWS: dict[str, float | None] = {"10m": 600.0, "3h": 10800.0, "1d": 86400.0, "all-time": None}
_ROLLING = {name: window for name, window in WINDOWS.items() if window is not None}
#: A window's figures move on by 1/BUCKETS of it at a time, as Storm's rolling buckets.
BUCKETS = 20
#: How often a worker copies its executors' counters (the shortest window's bucket).
ROLL_SECS = 600.0 / BUCKETS
#: The counters a window differences, in the order of a mark.
WINDOWED = ("emitted", "transferred", "acked", "failed", "processed", "errors")
_random_bits = random.getrandbits  # (LATENCY_SAMPLE + 1 is a power of two)
#: The most sampled tuples an executor waits for the ack of (their process latency): beyond,
#: the one that arrived first is forgotten (a tuple never acked nor failed -- left to time
#: out -- would otherwise be kept for ever).
MAX_ARRIVED = 4096
_SLOTS = 8 + 61 * 4  # exact below 8 ns, then 4 buckets per power of two up to 2**64 ns


class Histogram:
    """Latencies in nanoseconds, in buckets 19% wide at most."""

    __slots__ = ("counts", "n", "total")

    def __init__(self) -> None:
        self.counts = [0] * _SLOTS
        self.n = 0
        self.total = 0

    def add(self, ns: int) -> None:
        bits = ns.bit_length()
        self.counts[ns if bits < 4 else 8 + ((bits - 4) << 2) + ((ns >> (bits - 3)) & 3)] += 1
        self.n += 1
        self.total += ns

    def snapshot(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "total": self.total,
            "counts": {i: c for i, c in enumerate(self.counts) if c},
        }


#: A mark: when (``clock()``), the counters of ``WINDOWED``, the timed tuples, their total ns,
#: the time in ticks, the tuples whose process latency was taken and its total ns.
_Mark = tuple[float, int, int, int, int, int, int, int, int, int, int, int]
_MARK_KEYS = ("span_s", *WINDOWED, "timed", "timed_ns", "tick_ns", "process_timed", "process_ns")


class ExecutorMetrics:
    """The counters of one executor, and the marks its windows are figured from (the module
    doc); ``clock`` (seconds, monotonic) is what the windows are measured by."""

    __slots__ = (
        "_lock",
        "_marks",
        "acked",
        "arrived",
        "clock",
        "counters",
        "emitted",
        "errors",
        "failed",
        "latency",
        "next_sample",
        "process_latency",
        "processed",
        "started",
        "stopped",
        "tick_ns",
        "transferred",
    )

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.emitted = 0  # emit calls that sent a tuple
        self.transferred = 0  # tuples delivered to tasks (an emit to 3 tasks counts 3)
        self.acked = 0  # bolts: input tuples acked; spouts: spout tuples fully processed
        self.failed = 0  # bolts: input tuples failed; spouts: spout tuples failed or timed out
        self.processed = 0  # bolts: tuples executed; ackers: messages handled
        self.errors = 0
        self.tick_ns = 0  # bolts: the time their tasks' process_tick took
        #: bolts: execute latency; spouts: complete latency (emit -> ack)
        self.latency = Histogram()
        #: bolts: process latency (``process`` called -> acked)
        self.process_latency = Histogram()
        #: bolts: the sampled tuples not yet acked, and when each arrived (perf_counter_ns)
        self.arrived: dict[object, int] = {}
        #: the count (bolts: processed; spouts: acked) whose tuple's latency is taken next
        self.next_sample = 0
        #: the component's own counters, by name (its tasks share one of each name)
        self.counters: dict[str, CountMetric] = {}
        self.clock = clock
        self._lock = threading.Lock()  # the roller's thread and a snapshot's
        self.start()

    def start(self) -> None:
        """The executor starts now: its windows begin here (its uptime, as Storm's)."""
        with self._lock:
            self.started = self.clock()
            self.stopped: float | None = None
            first = self._mark(self.started)
            self._marks = {name: deque([first], maxlen=BUCKETS + 1) for name in _ROLLING}

    def stop(self) -> None:
        """The executor stops now: its windows end here (later questions get the same
        figures, in every mode; no longer a capacity falling as time goes by)."""
        with self._lock:
            self.stopped = self.clock()

    def _now(self) -> float:
        return self.clock() if self.stopped is None else self.stopped

    def _mark(self, now: float) -> _Mark:
        latency = self.latency
        process = self.process_latency
        return (
            now,
            self.emitted,
            self.transferred,
            self.acked,
            self.failed,
            self.processed,
            self.errors,
            latency.n,
            latency.total,
            self.tick_ns,
            process.n,
            process.total,
        )

    def roll(self) -> None:
        """Mark the counters in each window whose last mark is 1/BUCKETS of it old (any
        thread: the counters' own thread writes them, this only reads)."""
        with self._lock:
            now = self._now()
            mark = None
            for name, marks in self._marks.items():
                if now - marks[-1][0] >= _ROLLING[name] / BUCKETS:
                    marks.append(mark or (mark := self._mark(now)))

    def windows(self) -> dict[str, dict[str, float]]:
        """Each window's figures (the module doc): ``span_s``, the counters of ``WINDOWED``,
        ``timed``/``timed_ns``, the tuples whose latency was taken and their total,
        ``tick_ns``, and ``process_timed``/``process_ns``, those of the process latency."""
        with self._lock:
            now = self._mark(self._now())
            out = {}
            for name, window in WINDOWS.items():
                if window is None:
                    base: _Mark = (self.started, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
                else:
                    marks = self._marks[name]
                    base = next((m for m in marks if now[0] - m[0] <= window), marks[-1])
                out[name] = {k: a - b for k, a, b in zip(_MARK_KEYS, now, base, strict=True)}
            return out

    def sampled(self, ns: int, count: int) -> None:
        """A latency of ``ns`` was taken at ``count``: the next one is at a random place in
        the next ``LATENCY_SAMPLE + 1`` (``count`` is in this one)."""
        self.latency.add(ns)
        self.next_sample = (count | LATENCY_SAMPLE) + 1 + _random_bits(_SAMPLE_BITS)

    def arrive(self, tup: object, ns: int) -> None:
        """Sampled tuple ``tup`` is handed to ``process`` at ``ns`` (``perf_counter_ns``): its
        ack takes its process latency (:meth:`settle`)."""
        arrived = self.arrived
        if len(arrived) >= MAX_ARRIVED:
            arrived.pop(next(iter(arrived)), None)
        arrived[tup] = ns

    def settle(self, tup: object, acked: bool) -> None:
        """``tup`` was acked (or failed): if it was sampled, its process latency is taken
        (only acked tuples have one, as in Storm).  Called only while ``arrived`` holds some."""
        started = self.arrived.pop(tup, None)
        if started is not None and acked:
            self.process_latency.add(time.perf_counter_ns() - started)

    def counter(self, name: str) -> CountMetric:
        """The component's counter ``name`` (made on first use)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a counter's name is a non-empty string, not {name!r}")
        counter = self.counters.get(name)
        if counter is None:
            counter = self.counters[name] = CountMetric()
        return counter


class MetricsRoller:
    """A worker's thread that rolls its executors' windows (:meth:`ExecutorMetrics.roll`)
    every :data:`ROLL_SECS` until :meth:`close`; making it starts their windows, closing it
    ends them."""

    def __init__(self, name: str, metrics: list[ExecutorMetrics]) -> None:
        self.metrics = metrics
        for m in metrics:
            m.start()
        self._closed = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"{name}:metrics", daemon=True)

    def _run(self) -> None:
        while not self._closed.wait(ROLL_SECS):
            for m in self.metrics:
                m.roll()

    def close(self) -> None:
        self._closed.set()
        for m in self.metrics:
            m.stop()
