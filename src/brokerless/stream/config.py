"""Topology configuration (Storm's ``topology.*`` settings that apply here)."""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .affinity import WorkerCpus, setting_problem
from .security import SECURITY_MODES
from .serializer import MsgpackSerializer, Serializer

#: The bounds of ``Config.worker_switch_interval``, in seconds: what ``sys.setswitchinterval``
#: keeps as given (it counts in microseconds).
SWITCH_INTERVALS = (1e-6, 1e6)
#: The largest ``Config.worker_gc_threshold``: what ``gc.set_threshold`` takes.
MAX_GC_THRESHOLD = 2**31 - 1

#: The values of ``Config.executor_threads``.
EXECUTOR_THREADS = ("shared", "per_executor")


@dataclass(frozen=True)
class Config:
    """Settings of a topology run.  ``settings`` carries the user's own keys, which every
    spout and bolt sees in ``open``/``prepare`` as ``conf.settings``."""

    #: Worker processes (or in-process workers in local mode).
    num_workers: int = 1
    #: Acker tasks; None: one per worker; 0: no tracking (spout tuples are acked at once).
    num_ackers: int | None = None
    #: Spout tuples in flight per spout task before ``next_tuple`` stops being called;
    #: None: no limit (the bounded queues still hold the spout back).
    max_spout_pending: int | None = 1000
    #: A spout tuple whose tree is not complete after this long fails.
    message_timeout_secs: float = 30.0
    #: Bound of each executor's receive queue, in tuples (spread over the workers that send
    #: to it; see ``worker.py``).
    executor_queue_size: int = 4096
    #: Tuples an executor takes from its queue at once.
    executor_batch_size: int = 64
    #: How a worker runs its executors: ``"shared"``, all in one thread, taking turns (under
    #: CPython's GIL the fastest: no hand-over between threads, see BENCHMARKS.md), or
    #: ``"per_executor"``, a thread each as in Storm, so that a component that blocks (on
    #: I/O, a sleep) holds up only its own executor.
    executor_threads: str = "shared"
    #: The largest serialized tuple (its values' bytes) that may go to another worker: a
    #: bigger emit fails with SerializationError, and a worker's virtual port drops a peer
    #: that sends a bigger frame (its MAXMSGSIZE, with room for the tuple's header).
    max_tuple_bytes: int = 64 << 20
    #: Serialize tuples even when they stay in their worker (catches unserializable values
    #: in local mode; costs time).
    always_try_serialize: bool = False
    serializer: Serializer = field(default_factory=MsgpackSerializer)
    #: Storm's ``topology.tick.tuple.freq.secs``: every bolt task gets a *tick tuple* this
    #: often (component ``"__system"``, stream ``"__tick"``), in ``Bolt.process_tick``; a
    #: bolt's own ``Topology.bolt(..., tick_tuple_freq_secs=)`` wins.  None: no ticks.
    tick_tuple_freq_secs: float | None = None
    #: Seconds from one checkpoint to the next, in a topology with stateful bolts.
    checkpoint_interval_secs: float = 1.0
    #: A checkpoint not complete after this long is abandoned (the next one goes on).
    checkpoint_timeout_secs: float = 60.0
    #: Flink's ``execution.checkpointing.tolerable-failed-checkpoints``: checkpoints in a row
    #: that may be abandoned (timed out, or declined by a task) before the run treats its
    #: current workers as lost -- it stops them all and starts them again from the last
    #: complete checkpoint, as when a worker dies (``max_attempts`` bounds how often in a
    #: row, without a checkpoint completing between).  A task hung in ``process`` makes every
    #: checkpoint fail: without this the run would look alive for ever while its state never
    #: advanced.  Not 0 (Flink's default), so that a checkpoint abandoned now and then, a
    #: brief storage outage, does not cost a restart; a checkpoint slow by nature needs a
    #: longer ``checkpoint_timeout_secs``, not restarts.  None: tolerate any number.
    tolerable_failed_checkpoints: int | None = 3
    #: Where checkpoints are kept: a local directory or a URL (``hdfs://``, ``s3://``, ...:
    #: see ``storage.py``), reachable from the driver and every worker; a run started on one
    #: that holds a complete checkpoint resumes from it.  None: a temporary directory that
    #: lives as long as the run (local and multi-process mode only).
    checkpoint_dir: str | None = None
    #: Storm's ``supervisor.worker.timeout.secs``: a worker process (multi-process mode) that
    #: the driver has heard nothing from for this long -- frozen (SIGSTOP, swapped out), or on
    #: a host that stopped answering -- is lost: it is killed, and the run goes on as when a
    #: worker dies (a checkpointed run starts again from its last checkpoint, another fails
    #: with WorkerProcessError).  Started workers report every second, so at least 2.
    worker_timeout_secs: float = 30.0
    #: How workers in other processes talk (multi-process and Spark mode): ``"curve"``
    #: encrypts every worker-to-worker and control connection with keys made per run and
    #: admits only the run's own processes (``security.py``); ``"none"`` leaves them open
    #: and in clear, for a trusted network (faster: see BENCHMARKS.md).  Local mode opens
    #: no connections either way.
    security: str = "curve"
    #: The cyclic garbage collector's generation-0 threshold in each worker's process while
    #: it runs (worker processes and Spark tasks): CPython's default, 700 allocations, makes
    #: a busy worker collect every few hundred tuples (``interpreter.py``); None leaves the
    #: process's collector as it is.  Local mode never changes the calling process's.
    worker_gc_threshold: int | None = 50_000
    #: The GIL's switch interval in seconds (``sys.setswitchinterval``) in each worker's
    #: process while it runs (worker processes and Spark tasks): a worker's threads hand work
    #: to each other, and one handed work waits for the GIL up to this long: at CPython's
    #: 5 ms that waiting set a two-worker topology's pace (``interpreter.py``).  From 1e-6 to
    #: 1e6; None leaves the process's as it is.  Local mode never changes the calling
    #: process's.
    worker_switch_interval: float | None = 0.002
    #: The CPUs each worker process keeps to, it and its threads (multi-process runs; local
    #: mode and Spark tasks leave their processes alone): None, the scheduler's choice;
    #: ``"spread"``, worker i on the i-th CPU this process may use (modulo their number); or
    #: a list of CPU sets, worker i keeping to the (i modulo its length)-th.  A worker's
    #: threads hand the GIL to each other constantly, and kept to one CPU they go faster
    #: (``affinity.py``; two workers on two CPUs 1.26x the tuples per second in
    #: BENCHMARKS.md) -- for a machine the run has to itself: two runs spread alike share
    #: the same CPUs.
    worker_cpus: WorkerCpus = None
    #: Executors of a component in place of the parallelism it was declared with, at most
    #: its tasks (which never change): what ``TopologyRun.rebalance`` and ``brokerless
    #: stream rebalance -e COMPONENT=N`` set, as Storm's rebalance does.
    parallelism: Mapping[str, int] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)

    def replace(self, **changes: Any) -> Config:
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_storm(cls, conf: Mapping[str, Any], **fields: Any) -> Config:
        """A Config from a Storm topology's conf (``conf.setNumWorkers(2)``,
        ``conf.put("my.key", ...)``): the settings of :data:`STORM_SETTINGS` under Storm's
        names and in its units, and keys of the user's own (any not under ``topology.``) as
        ``settings``; ``fields`` set the others by their names here.  ValueError names a
        ``topology.*`` key that brokerless does not have."""
        return cls(**storm_fields(conf), **fields)

    def __getitem__(self, key: str) -> Any:
        """Storm's ``conf.get(name)`` in ``open``/``prepare``: a setting of
        :data:`STORM_SETTINGS` by Storm's name, in Storm's units, or a key of the user's own
        (``settings``)."""
        if key in STORM_SETTINGS:
            return _storm_value(self, key)
        try:
            return self.settings[key]
        except KeyError:
            raise KeyError(
                f"{key!r} is neither a Storm setting brokerless has ({sorted(STORM_SETTINGS)}) "
                f"nor a key of the topology's own settings ({sorted(self.settings)})"
            ) from None

    def get(self, key: str, default: Any = None) -> Any:
        """``self[key]``, or ``default`` when there is no such setting (Storm's ``conf.get``)."""
        try:
            return self[key]
        except KeyError:
            return default

    @property
    def ackers(self) -> int:
        return self.num_workers if self.num_ackers is None else self.num_ackers

    def problems(self) -> list[str]:
        """What is wrong with these settings (empty when they are usable)."""
        found = []
        for name in (
            "num_workers",
            "executor_queue_size",
            "executor_batch_size",
            "max_tuple_bytes",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                found.append(f"{name} must be an integer >= 1, not {value!r}")
        if self.num_ackers is not None and (
            not isinstance(self.num_ackers, int) or self.num_ackers < 0
        ):
            found.append(f"num_ackers must be None or an integer >= 0, not {self.num_ackers!r}")
        pending = pending_problem(self.max_spout_pending)
        if pending is not None:
            found.append(f"max_spout_pending {pending}")
        threshold = self.worker_gc_threshold
        if threshold is not None and (
            not isinstance(threshold, int) or not 1 <= threshold <= MAX_GC_THRESHOLD
        ):
            found.append(
                f"worker_gc_threshold must be None or an integer from 1 to {MAX_GC_THRESHOLD}, "
                f"not {threshold!r}"
            )
        interval = self.worker_switch_interval
        low, high = SWITCH_INTERVALS
        if interval is not None and (
            isinstance(interval, bool)
            or not isinstance(interval, numbers.Real)
            or not low <= interval <= high
        ):
            found.append(
                f"worker_switch_interval must be None or a number of seconds from {low:g} to "
                f"{high:g}, not {interval!r}"
            )
        tick = tick_problem(self.tick_tuple_freq_secs)
        if tick is not None:
            found.append(f"tick_tuple_freq_secs {tick}")
        if not self.message_timeout_secs > 0:
            found.append(f"message_timeout_secs must be > 0, not {self.message_timeout_secs!r}")
        for name in ("checkpoint_interval_secs", "checkpoint_timeout_secs"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not value > 0:
                found.append(f"{name} must be a number > 0, not {value!r}")
        tolerable = self.tolerable_failed_checkpoints
        if tolerable is not None and (
            isinstance(tolerable, bool) or not isinstance(tolerable, int) or tolerable < 0
        ):
            found.append(
                f"tolerable_failed_checkpoints must be None or an integer >= 0, not {tolerable!r}"
            )
        timeout = self.worker_timeout_secs
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 2:
            found.append(f"worker_timeout_secs must be a number >= 2, not {timeout!r}")
        if self.checkpoint_dir is not None and (
            not isinstance(self.checkpoint_dir, str) or not self.checkpoint_dir
        ):
            found.append(
                f"checkpoint_dir must be None, a directory or a URL, not {self.checkpoint_dir!r}"
            )
        if self.executor_threads not in EXECUTOR_THREADS:
            choices = " or ".join(repr(m) for m in EXECUTOR_THREADS)
            found.append(f"executor_threads must be {choices}, not {self.executor_threads!r}")
        if self.security not in SECURITY_MODES:
            choices = " or ".join(repr(m) for m in SECURITY_MODES)
            found.append(f"security must be {choices}, not {self.security!r}")
        cpus_problem = setting_problem(self.worker_cpus)
        if cpus_problem is not None:
            found.append(cpus_problem)
        if not isinstance(self.serializer, Serializer):
            found.append(f"serializer {self.serializer!r} has no dumps()/loads()")
        return found


def tick_problem(value: Any) -> str | None:
    """What is wrong with a tick tuple frequency (None: nothing)."""
    if value is None or (
        not isinstance(value, bool) and isinstance(value, int | float) and value > 0
    ):
        return None
    return f"must be None or a number of seconds > 0, not {value!r}"


def pending_problem(value: Any) -> str | None:
    """What is wrong with a max_spout_pending (None: nothing)."""
    if value is None or (not isinstance(value, bool) and isinstance(value, int) and value >= 1):
        return None
    return f"must be None or an integer >= 1, not {value!r}"


#: The Storm settings that are Config fields: Storm's name -> (Config field, Storm's unit in
#: the field's: a value in Storm's units times this is the field's).
STORM_SETTINGS: dict[str, tuple[str, float]] = {
    "topology.workers": ("num_workers", 1),
    "topology.acker.executors": ("num_ackers", 1),
    "topology.max.spout.pending": ("max_spout_pending", 1),
    "topology.message.timeout.secs": ("message_timeout_secs", 1),
    "topology.tick.tuple.freq.secs": ("tick_tuple_freq_secs", 1),
    "topology.executor.receive.buffer.size": ("executor_queue_size", 1),
    "topology.state.checkpoint.interval.ms": ("checkpoint_interval_secs", 0.001),
}


def _storm_value(conf: Config, name: str) -> Any:
    """The setting Storm calls ``name``, in Storm's units."""
    field_name, factor = STORM_SETTINGS[name]
    value = getattr(conf, field_name)
    return value if value is None or factor == 1 else value / factor


def storm_conf(conf: Config, topology: str) -> dict[str, Any]:
    """``conf`` as Storm hands it to a component: the settings of :data:`STORM_SETTINGS`
    under Storm's names and in its units, ``topology.name``, and the user's own keys
    (``Config.settings``)."""
    found: dict[str, Any] = {"topology.name": topology}
    for name in STORM_SETTINGS:
        found[name] = _storm_value(conf, name)
    found.update(conf.settings)
    return found


def storm_fields(conf: Mapping[str, Any]) -> dict[str, Any]:
    """Config's fields from a Storm topology's conf: Storm's settings, and the user's own keys
    (any not under ``topology.``) in ``settings``, as Storm hands them to every component.
    ValueError names a ``topology.*`` key that brokerless does not have."""
    found: dict[str, Any] = {}
    own = {}
    for key, value in conf.items():
        setting = STORM_SETTINGS.get(key)
        if setting is not None:
            field_name, factor = setting
            found[field_name] = value if factor == 1 else value * factor
        elif isinstance(key, str) and not key.startswith("topology."):
            own[key] = value
        else:
            raise ValueError(
                f"config {key!r} is not a Storm setting brokerless has; it takes "
                f"{sorted(STORM_SETTINGS)} and keys of your own (not under 'topology.')"
            )
    if own:
        found["settings"] = own
    return found
