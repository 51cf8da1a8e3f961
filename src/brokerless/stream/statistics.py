"""What ``statistics()`` shows of a run: the snapshots of its workers' executors
(``metrics.py``) merged into one :class:`Statistics` -- a row per component (histograms merge
exactly, so percentiles cover every executor of a component) and a row per executor (its tasks
are ``plan.executors[executor].tasks``) and per worker, as Storm UI shows them, each with its
figures over Storm UI's time windows (:data:`~brokerless.stream.metrics.WINDOWS`).

A bolt's *capacity* is Storm's: executed * mean execute latency / the span -- the fraction of
the time the executor spent in ``process``; near 1 it is the bottleneck -- plus the time its
tick tuples took (``process_tick``, timed every time: they are few), where a batching bolt
processes its batches and a windowed bolt its time windows (Storm UI leaves its system
stream ``__tick`` out, and so says such a bolt is idle).  A component's is the highest of its
executors', as Storm UI shows the busiest.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from .component import ComponentKind
from .metrics import WINDOWED, WINDOWS


@dataclass
class WindowStats:
    """A component's or an executor's figures over one of :data:`WINDOWS` (``metrics.py``)."""

    #: The time they cover: the window's last 95 to 100 %, or less if the executors are younger
    span_s: float
    emitted: int
    transferred: int
    acked: int
    failed: int
    processed: int
    errors: int
    #: bolts: mean execute latency; spouts: mean complete latency
    latency_ms_mean: float
    #: bolts: mean process latency (``process`` called to acked); None for spouts and ackers
    process_latency_ms_mean: float | None
    #: bolts: the fraction of ``span_s`` spent in ``process`` (a component's: its busiest
    #: executor's); None for spouts and ackers
    capacity: float | None


@dataclass
class ComponentStats:
    component: str
    kind: ComponentKind
    executors: int = 0
    tasks: int = 0
    emitted: int = 0
    transferred: int = 0
    acked: int = 0
    failed: int = 0
    processed: int = 0
    errors: int = 0
    #: bolts: execute latency; spouts: complete latency (emit to fully acked)
    latency_ms_mean: float = 0.0
    latency_ms_p99: float = 0.0
    #: bolts: process latency (``process`` called to acked); None for spouts and ackers
    process_latency_ms_mean: float | None = None
    process_latency_ms_p99: float | None = None
    queue_depth: int = 0  # now, summed over executors
    queue_depth_max: int = 0  # the most any one executor's queue held
    queue_capacity: int | None = None  # the bound of each executor's queue (None: unbounded)
    pending: int = 0  # spouts: tuples in flight now
    pending_max: int = 0  # spouts: the most in flight at once in one task
    #: the component's own counters (``TopologyContext.register_counter``), summed
    metrics: dict[str, int] = field(default_factory=dict)
    #: bolts: Storm's "capacity (last 10 m)", its busiest executor's (``windows["10m"]``)
    capacity: float | None = None
    #: the figures over each of :data:`WINDOWS` (the fields above are all-time)
    windows: dict[str, WindowStats] = field(default_factory=dict)


@dataclass
class ExecutorStats:
    """One executor's counters (see :class:`ComponentStats` for what each means)."""

    executor: int
    component: str
    kind: ComponentKind
    worker: int
    emitted: int
    transferred: int
    acked: int
    failed: int
    processed: int
    errors: int
    latency_ms_mean: float
    latency_ms_p99: float
    process_latency_ms_mean: float | None
    process_latency_ms_p99: float | None
    queue_depth: int
    queue_depth_max: int
    pending: int
    metrics: dict[str, int]
    capacity: float | None = None
    windows: dict[str, WindowStats] = field(default_factory=dict)


@dataclass
class WorkerStats:
    worker: int
    transfer_depth: int
    transfer_depth_max: int
    sent: int
    received: int
    bad_messages: int  # received from the network and dropped (see ``inbound.py``)


@dataclass
class Statistics:
    """A snapshot of a topology's metrics."""

    components: dict[str, ComponentStats] = field(default_factory=dict)
    workers: list[WorkerStats] = field(default_factory=list)
    executors: list[ExecutorStats] = field(default_factory=list)  # by executor id

    def __getitem__(self, component: str) -> ComponentStats:
        return self.components[component]

    def as_dict(self) -> dict[str, Any]:
        return {
            "components": {k: asdict(v) for k, v in self.components.items()},
            "workers": [asdict(w) for w in self.workers],
            "executors": [asdict(e) for e in self.executors],
        }

    @classmethod
    def merge(cls, snapshots: Iterable[dict[str, Any]]) -> Statistics:
        """Combine worker snapshots (see ``Worker.snapshot``)."""
        stats = cls()
        latencies: dict[str, list[dict[str, Any]]] = {}
        process_latencies: dict[str, list[dict[str, Any]]] = {}
        windows: dict[str, list[dict[str, dict[str, float]]]] = {}
        for snap in snapshots:
            stats.workers.append(WorkerStats(**snap["worker"]))
            for ex in snap["executors"]:
                name = ex["component"]
                c = stats.components.get(name)
                if c is None:
                    c = stats.components[name] = ComponentStats(
                        name, ComponentKind(ex["kind"]), queue_capacity=ex["queue_capacity"]
                    )
                c.executors += 1
                c.tasks += ex["tasks"]
                for key in (
                    "emitted",
                    "transferred",
                    "acked",
                    "failed",
                    "processed",
                    "errors",
                    "queue_depth",
                    "pending",
                ):
                    setattr(c, key, getattr(c, key) + ex[key])
                c.queue_depth_max = max(c.queue_depth_max, ex["queue_depth_max"])
                for metric, count in ex["metrics"].items():
                    c.metrics[metric] = c.metrics.get(metric, 0) + count
                c.pending_max = max(c.pending_max, ex["pending_max"])
                latencies.setdefault(name, []).append(ex["latency"])
                process_latencies.setdefault(name, []).append(ex["process_latency"])
                windows.setdefault(name, []).append(ex["windows"])
                stats.executors.append(_executor_stats(ex, snap["worker"]["worker"]))
        for name, snaps in latencies.items():
            c = stats.components[name]
            c.latency_ms_mean, c.latency_ms_p99 = _mean_p99(snaps)
            bolt = c.kind is ComponentKind.BOLT
            if bolt:
                c.process_latency_ms_mean, c.process_latency_ms_p99 = _mean_p99(
                    process_latencies[name]
                )
            c.windows = {
                window: _window_stats([w[window] for w in windows[name]], bolt)
                for window in WINDOWS
            }
            c.capacity = c.windows["10m"].capacity
        stats.workers.sort(key=lambda w: w.worker)
        stats.executors.sort(key=lambda e: e.executor)
        return stats


def _mean_p99(snapshots: Iterable[dict[str, Any]]) -> tuple[float, float]:
    """The mean and the 99th percentile (ms) of the latencies of histogram ``snapshots``."""
    n, total, counts = _merge(snapshots)
    return (total / n / 1e6 if n else 0.0), _quantile_ms(n, counts, 0.99)


def _capacity(window: dict[str, float]) -> float:
    """Storm's: executed * mean execute latency / the time (with the ticks': the module doc)."""
    if window["span_s"] <= 0:
        return 0.0
    busy_ns = window["tick_ns"]
    if window["timed"]:
        busy_ns += window["processed"] * window["timed_ns"] / window["timed"]
    return busy_ns / 1e9 / window["span_s"]


def _window_stats(executors: list[dict[str, float]], bolt: bool) -> WindowStats:
    """One window's figures of one or more executors (of one component)."""
    counts = {key: int(sum(w[key] for w in executors)) for key in WINDOWED}
    return WindowStats(
        span_s=round(max(w["span_s"] for w in executors), 3),
        **counts,
        latency_ms_mean=_mean_ms(executors, "timed", "timed_ns"),
        process_latency_ms_mean=_mean_ms(executors, "process_timed", "process_ns")
        if bolt
        else None,
        capacity=round(max(_capacity(w) for w in executors), 3) if bolt else None,
    )


def _mean_ms(executors: list[dict[str, float]], timed: str, total_ns: str) -> float:
    """The mean latency (ms) of the windows of ``executors``: ``timed`` tuples of
    ``total_ns``."""
    n = sum(w[timed] for w in executors)
    return sum(w[total_ns] for w in executors) / n / 1e6 if n else 0.0


def _executor_stats(ex: dict[str, Any], worker: int) -> ExecutorStats:
    kind = ComponentKind(ex["kind"])
    bolt = kind is ComponentKind.BOLT
    windows = {name: _window_stats([window], bolt) for name, window in ex["windows"].items()}
    latency_mean, latency_p99 = _mean_p99([ex["latency"]])
    process_mean, process_p99 = _mean_p99([ex["process_latency"]]) if bolt else (None, None)
    return ExecutorStats(
        executor=ex["executor"],
        component=ex["component"],
        kind=kind,
        worker=worker,
        emitted=ex["emitted"],
        transferred=ex["transferred"],
        acked=ex["acked"],
        failed=ex["failed"],
        processed=ex["processed"],
        errors=ex["errors"],
        latency_ms_mean=latency_mean,
        latency_ms_p99=latency_p99,
        process_latency_ms_mean=process_mean,
        process_latency_ms_p99=process_p99,
        queue_depth=ex["queue_depth"],
        queue_depth_max=ex["queue_depth_max"],
        pending=ex["pending"],
        metrics=dict(ex["metrics"]),
        capacity=windows["10m"].capacity,
        windows=windows,
    )


def _bucket_top(index: int) -> int:
    if index < 8:
        return index
    bits, sub = divmod(index - 8, 4)
    bits += 4
    return (5 + sub) << (bits - 3)


def _merge(snapshots: Iterable[dict[str, Any]]) -> tuple[int, int, dict[int, int]]:
    n = total = 0
    counts: dict[int, int] = {}
    for snap in snapshots:
        n += snap["n"]
        total += snap["total"]
        for index, count in snap["counts"].items():
            counts[int(index)] = counts.get(int(index), 0) + count
    return n, total, counts


def _quantile_ms(n: int, counts: dict[int, int], q: float) -> float:
    if not n:
        return 0.0
    rank = q * n
    seen = 0
    for index in sorted(counts):
        seen += counts[index]
        if seen >= rank:
            return _bucket_top(index) / 1e6
    return 0.0
