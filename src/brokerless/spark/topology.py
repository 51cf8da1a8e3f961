"""Topologies on Spark: a topology's workers run as one barrier stage, one Spark task each.

    from brokerless.spark import run_on_spark

    with run_on_spark(topology, workers=3) as run:     # local[3] unless told otherwise
        run.wait_until_done()                          # (finite spouts) or stop() when you like
        print(run.statistics())

``spark=`` takes a SparkSession (a real cluster's), ``master=`` a master URL; with neither the
active session is used, else a local one (``local[workers]``) is started and stopped with the
run.  ``complete_on_spark`` is ``complete_topology`` on Spark.

Theory of operation
-------------------
*The driver* (:class:`SparkRun`, in the caller's process) binds the control channel
(``stream/control.py``) on tcp, announces it at ``spark.driver.host``, and runs the topology
as a series of *attempts*: an attempt is one Spark job of N partitions in one barrier stage,
submitted from a background thread under a job group of its own; each task is one worker
(``task.py``).  Tuples go worker to worker over brokerless tcp; Spark carries none of them.

*The supervisor.*  One loop owns the attempts: the run's supervisor thread
(:func:`_supervise_in_background`), which every ``_TICK`` seconds takes in what the workers sent
and takes one step of :meth:`SparkRun._supervise`, the only code that submits, abandons or gives
up on an attempt -- under the run's lock, never waiting, so each step moves the run at most one
step through its :class:`Phase`.  Nothing else moves it: a caller waiting for the workers
(to start, or to answer a question) looks at the control channel with the lock let go between
looks, and finds the new attempt, or the run's failure, when the supervisor has made it::

    WAITING_FOR_SLOTS --enough slots--> STARTING --all workers started--> RUNNING
          ^    ^                           |  |                              |
          |    +---Spark refused: slots----+  +------ job ended -------------+
          |                                        |
          +---- worker lost, attempts left --------+---- otherwise ----> FAILED
          |
          +---- the job ended (or was cancelled) ---- REBALANCING <--rebalance()-- RUNNING
    (any phase) --stop()--> STOPPED

*Rebalance* (``TopologyRun.rebalance``): once the spouts are deactivated and the tuples in
flight done, the supervisor tells the workers to stop (``REBALANCING``), cancels their job if it
has not ended ``_STOP_TIMEOUT`` seconds later, and waits for slots for the new plan's attempt,
whose tasks get the new config and restore the checkpoint taken for it; what the earlier
attempts reported is kept.  An in-process master never gains slots: a rebalance to more
workers than it has is refused before anything stops.

*Slots.*  A barrier stage runs all its tasks at once or not at all, so an attempt is submitted
only when Spark has a task slot for every worker (:func:`task_slots`, what Spark's own barrier
check counts).  Until then the run waits -- at the start and before every restart -- up to
``start_timeout``, and says what it waits for (a warning on the ``brokerless.spark`` logger,
and the error when time runs out: slots needed, slots there, what to change).  An in-process
master (``local[N]``) never gains slots, so a shortage there is reported at once.  Spark may
still refuse a stage (``BarrierJobSlotsNumberCheckFailed``: an executor went away between the
count and the submission); no task ran, so that costs no attempt: the run waits again.
:func:`session_builder` makes Spark refuse at once rather than retry its check every 15 s for
10 minutes: the runner's own wait is the one that knows what it waits for and when to stop.

*A lost worker.*  When a worker's process or executor dies, Spark fails the barrier stage (and
kills its other tasks), so the job ends with an error, which ``failures.py`` sorts by its type
(:class:`~brokerless.spark.failures.JobEnd`).  A lost worker starts a new attempt: the run
drops what the failed attempt reported (captured tuples, statistics; a checkpointed topology
keeps its tuples: below; every run keeps its errors, as Storm does), tells whatever is left of
it to stop, cancels its job group and waits for slots again -- up to ``max_attempts`` in a
row that complete no checkpoint (``TopologyRun._attempt_lost``), after which it stops and
raises one :class:`WorkerProcessError` naming each attempt's whole cause.  The
control channel ignores late messages from an older attempt, and questions (``statistics``,
``wait_until_done``) wait across a restart and are asked again of the new workers.  A
worker whose own code raises (its executor cannot import the topology's module, say), a stage
Spark will never run and a job cancelled by someone else are not retried: every attempt would
end the same way.  A session with dynamic allocation, where Spark runs no barrier stage (and
an application asks for no executors before it has work), is refused before anything waits
or is submitted (:func:`~brokerless.spark.session.barrier_refusal`).  A failure found by the
background thread is raised to the next caller.

*Recovering state.*  A topology without stateful bolts recovers by replay from the start:
every attempt begins from nothing -- spouts from their first tuple, bolts with empty state.
For a finite, replayable input (a file, a fixed list, a log read from offset 0) that gives
exact results with no snapshot of bolt state to coordinate across workers: a word count is
right because the attempt that finishes counted every word once, and no half-done attempt's
counts survive it.  A live, unbounded source cannot be replayed from its start; a
*checkpointed* topology (one with stateful bolts: ``stream/checkpoint.py``) recovers from its
last complete checkpoint instead, as in the other modes.  The driver holds the checkpoint
coordinator (``checkpoint_dir``, which the driver and every executor must reach) and the
supervisor drives it while the run is ``RUNNING``; every task of an attempt restores the
checkpoint :meth:`SparkRun._attempt_job` names; a task of such a topology that fails is
reported by its worker (``lost``) and ends the attempt as a lost worker does, as do more
than ``tolerable_failed_checkpoints`` checkpoints in a row that fail (a hung task); and what
the earlier attempts reported (captured tuples, errors) is kept, since their effects up to the
checkpoint are part of the run.

*Stopping.*  ``stop()`` asks the workers to stop, collects their final reports (their threads
end and every bolt's ``cleanup``/spout's ``close`` runs), waits for the job to end and cancels
its job group if it does not.  Ctrl-C in the driver raises KeyboardInterrupt in the waiting
caller, and leaving the ``with`` block stops the run.  A worker whose driver is gone -- no
control connection for ``driver_timeout`` seconds -- stops by itself and fails its task, so no
task serves a run nobody watches; a run dropped without ``stop()`` cancels its jobs.
"""

from __future__ import annotations

import enum
import logging
import socket
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, NoReturn

from pyspark import cloudpickle
from pyspark.sql import SparkSession

from brokerless.stream import Config, Topology, TopologyError
from brokerless.stream.control import ControlledRun, Kind, WorkerProcessError, close_control
from brokerless.stream.messaging import tcp_endpoint
from brokerless.stream.plan import TopologyPlan
from brokerless.stream.run import plan_for, with_ui
from brokerless.stream.testing import CompletedTopology, finite_topology, run_to_completion
from brokerless.stream.topology import load_topology

from .endpoints import bind_address
from .failures import JobEnd, JobFailure, job_failure
from .job import BarrierJob, abandon
from .session import (
    barrier_refusal,
    in_process,
    is_local,
    master_url,
    session_builder,
    session_for,
    slot_shortage,
    task_slots,
)
from .task import run_task

__all__ = [
    "Phase",
    "SparkRun",
    "complete_on_spark",
    "run_on_spark",
    "session_builder",
    "task_slots",
]

log = logging.getLogger("brokerless.spark")

_TICK = 0.1  # seconds between the background thread's looks at a run nobody is asking
_SLOT_POLL = 0.5  # seconds between counts of Spark's task slots while the run waits for them
_STOP_TIMEOUT = 10.0  # seconds a rebalance gives the workers to stop before it cancels them


class Phase(enum.Enum):
    """Where a run on Spark is (see the module doc)."""

    WAITING_FOR_SLOTS = "waiting for task slots"
    STARTING = "starting"
    RUNNING = "running"
    REBALANCING = "rebalancing"
    STOPPED = "stopped"
    FAILED = "failed"


class SparkRun(ControlledRun):
    """A topology running on Spark (see the module doc).  ``phase`` says where it is,
    ``attempt`` is the current attempt (1 at first), ``restarts`` says why each earlier one
    ended, ``worker_info`` what each worker of this attempt reported when it started (pid,
    host, endpoint), ``failure`` why the run gave up (None while it has not)."""

    phase: Phase
    mode = "spark"

    def __init__(
        self,
        topology: Topology | str,
        *,
        workers: int | None = None,
        spark: SparkSession | None = None,
        master: str | None = None,
        config: Config | None = None,
        capture: bool = False,
        max_attempts: int = 3,
        start_timeout: float = 120.0,
        driver_timeout: float = 15.0,
    ) -> None:
        if not isinstance(max_attempts, int) or max_attempts < 1:
            raise ValueError(f"max_attempts must be an integer >= 1, not {max_attempts!r}")
        definition = load_topology(topology) if isinstance(topology, str) else topology
        self.plan = plan = plan_for(definition, workers, config)  # mistakes show up here
        self._definition = definition
        #: A rebalance asked for (the plan, its cause), until its attempt is submitted.
        self._rebalance_to: tuple[TopologyPlan, str] | None = None
        if plan.checkpointed and plan.config.checkpoint_dir is None:
            raise TopologyError(
                f"topology {plan.name!r} has stateful bolts: on Spark it needs a checkpoint "
                "location that the driver and every executor reach: Config(checkpoint_dir=...), "
                "a directory they share or a Hadoop-compatible URL (hdfs://, s3://, ...)"
            )
        self._restore = self._open_checkpoints()  # the checkpoint the first attempt restores
        try:
            # pyspark's own copy of cloudpickle has no annotations
            shipped = cloudpickle.dumps((definition, plan.config))  # type: ignore[no-untyped-call]
        except Exception as exc:
            raise TopologyError(
                f"topology {plan.name!r} cannot be sent to Spark's executors ({exc})"
            ) from exc
        n = plan.config.num_workers
        self.max_attempts = max_attempts
        self.start_timeout = start_timeout
        self.restarts: list[str] = []
        self._job: BarrierJob | None = None
        self.spark, self._owns_session = session_for(spark, master, n)
        sc = self.spark.sparkContext
        try:
            refusal = barrier_refusal(sc, plan.name)
            if refusal is not None:
                raise TopologyError(refusal)
            if in_process(master_url(sc)) and task_slots(sc) < n:  # it will never have more
                raise TopologyError(slot_shortage(sc, plan.name, n, task_slots(sc)))
            driver_host = sc.getConf().get("spark.driver.host") or socket.gethostname()
            self.control_endpoint = self._open_control(
                tcp_endpoint(bind_address(driver_host), 0), advertise=driver_host
            )
        except BaseException:
            if self._owns_session:
                self.spark.stop()
            raise
        self._group = f"brokerless-{plan.name}-{uuid.uuid4().hex[:8]}"
        self._groups: list[str] = []  # every submission's job group
        self._job_template = {
            "topology": shipped,
            "control": self.control_endpoint,
            "key": self._signer.key,
            "keys": self._keys,  # CURVE (security.py): in the closure, never on a command line
            "capture": capture,
            "driver_timeout": driver_timeout,
            "start_timeout": start_timeout,
            "sys_path": list(sys.path) if is_local(master_url(sc)) else [],
        }
        self._new_attempt(n)
        self._await_slots(time.monotonic())
        self._ticking = threading.Event()  # set: the supervisor thread ends
        # a run dropped without stop(): its tasks would serve nobody until the session ends
        self._abandoned = weakref.finalize(
            self,
            abandon,
            sc,
            self._groups,
            partial(close_control, self._control, self._authenticator, self._context),
            self._ticking,
        )
        self._ticker = threading.Thread(
            target=_supervise_in_background,
            args=(weakref.ref(self), self._ticking),
            name=f"{self._group}:supervisor",
            daemon=True,
        )
        self._ticker.start()
        try:
            self._wait(lambda: self.phase is Phase.RUNNING, None, "the workers to start")
        except BaseException:
            self.stop()
            raise

    def __repr__(self) -> str:
        return (
            f"<SparkRun {self.plan.name!r} {self.phase.value}, {self.workers} worker(s) on "
            f"{self.spark.sparkContext.master}, attempt {self.attempt}>"
        )

    # -- the supervisor ----------------------------------------------------------------------

    def _check_alive(self) -> None:
        """After every look at the control channel: raise why the run gave up, if it did."""
        if self.failure is not None:
            raise self.failure

    def _supervise_step(self) -> None:
        """What the supervisor thread does every ``_TICK``: take in what the workers sent, move
        the attempts on by one step, and wake whoever waits for that."""
        with self._lock:
            if self._stopped:
                return
            self._pump(0)
            self._supervise()
            self._attempt_changed.notify_all()

    def _accepting_questions(self) -> bool:
        return self.phase is Phase.RUNNING

    def _supervise(self) -> None:
        """One step of the state machine in the module doc (lock held; never waits)."""
        now = time.monotonic()
        if self.phase is Phase.WAITING_FOR_SLOTS:
            if now >= self._next_count:
                self._count_slots(now)
            return
        if self._rebalance_to is not None and self.phase in (Phase.RUNNING, Phase.REBALANCING):
            self._rebalance_step(now)
            return
        lost = self.state.lost  # a checkpointed topology's task failed: roll back
        if lost:
            index, why = next(iter(lost.items()))
            self._worker_lost(f"worker {index} of {self.plan.name!r} failed: {why}", now)
            return
        stalled = self._checkpoints_failing()
        if stalled is not None:  # a task hung, say: as lost as a worker that died
            self._worker_lost(f"the workers of {self.plan.name!r} are running, but {stalled}", now)
            return
        failures = self.state.failures
        if failures:
            index, text = next(iter(failures.items()))
            self._give_up(
                WorkerProcessError(
                    f"worker {index} of {self.plan.name!r} on Spark failed (attempt "
                    f"{self.attempt}, not retried: it would fail again):\n{text}"
                )
            )
        job = self._job
        assert job is not None
        if job.finished.is_set():
            self._job_ended(job_failure(job.error), now)
        elif self.phase is Phase.RUNNING:
            if self._coordinator is not None:
                self._drive_checkpoints(())
        elif self.phase is Phase.STARTING:
            if len(self.state.started) == self.workers:
                self.phase = Phase.RUNNING
            elif now >= self._start_deadline:
                started = sorted(self.state.started)
                heard = [self.state.silent(i) for i in range(self.workers) if i not in started]
                tasks = job.tasks(self.spark.sparkContext)
                self._give_up(
                    TimeoutError(
                        f"{self.plan.name!r}: {len(started)} of {self.workers} Spark tasks "
                        f"started within {self.start_timeout:g} s (workers {started} did; "
                        f"{'; '.join(heard)}; {tasks}): Spark could not give the stage "
                        "all its slots at once (other jobs running?), or the executors cannot "
                        f"reach the driver at {self.control_endpoint}"
                    )
                )

    def _await_slots(self, now: float) -> None:
        """A new wait for slots, before a new attempt: up to ``start_timeout`` from now."""
        self.phase = Phase.WAITING_FOR_SLOTS
        self._slots_deadline = now + self.start_timeout
        self._next_count: float = now
        self._refused: tuple[int, int] | None = None  # Spark's numbers when it last refused
        self._told = False

    def _count_slots(self, now: float) -> None:
        """While waiting for slots: submit the attempt when Spark has enough; give up when the
        wait has lasted ``start_timeout``; say once what the run waits for."""
        sc = self.spark.sparkContext
        n = self.workers
        slots = task_slots(sc)
        if now >= self._slots_deadline:
            if self._refused is not None:  # what Spark itself counted when it refused
                slots = min(slots, self._refused[1])
            shortage = slot_shortage(sc, self.plan.name, n, slots)
            self._give_up(TopologyError(f"{shortage} (waited {self.start_timeout:g} s)"))
        if slots >= n:
            if self._told:
                log.warning("topology %r: %d Spark task slots now; starting", self.plan.name, n)
            self._submit(now)
            return
        if not self._told:
            self._told = True
            log.warning(
                "%s; waiting for them, up to %g s (start_timeout)",
                slot_shortage(sc, self.plan.name, n, slots),
                self.start_timeout,
            )
        self._next_count = now + _SLOT_POLL

    def _submit(self, now: float) -> None:
        """Submit the current attempt's job (a new job group for every submission)."""
        n = self.workers
        job = self._attempt_job()
        sc = self.spark.sparkContext
        rdd = sc.parallelize(range(n), n).barrier().mapPartitions(partial(run_task, job))
        group = f"{self._group}-{self.attempt}.{len(self._groups) + 1}"
        self._groups.append(group)
        self._job = BarrierJob(
            sc, group, f"brokerless topology {self.plan.name!r}, attempt {self.attempt}", rdd
        )
        self.phase = Phase.STARTING
        self._start_deadline: float = now + self.start_timeout

    def _attempt_job(self) -> dict[str, Any]:
        """What each task of the current attempt is given: the attempt's number and the
        checkpoint every task restores (None: from the start)."""
        return dict(self._job_template, attempt=self.attempt, restore=self._restore)

    def _job_ended(self, failure: JobFailure, now: float) -> None:
        """The current submission's job ended: wait and submit it again, start a new attempt,
        or give up (see the module doc)."""
        if failure.end is JobEnd.SLOTS_REFUSED:  # no task ran: the same attempt, later
            log.warning(
                "topology %r: Spark refused the barrier stage for task slots (needed, there: "
                "%s); waiting for slots",
                self.plan.name,
                failure.slots,
            )
            self.phase = Phase.WAITING_FOR_SLOTS  # the same wait goes on: same deadline
            self._next_count = now + _SLOT_POLL
            self._refused = failure.slots
            return
        if failure.retried:
            self._worker_lost(failure.cause, now)
            return
        if failure.end is JobEnd.REFUSED:
            self._give_up(
                TopologyError(
                    f"Spark runs no barrier stage like topology {self.plan.name!r} in this "
                    f"session:\n{failure.cause}"
                )
            )
        what = {
            JobEnd.TASK_RAISED: "a worker of {name} on Spark raised (attempt {attempt}, not "
            "retried: it would raise again)",
            JobEnd.CANCELLED: "the Spark job of {name} was cancelled (attempt {attempt}), "
            "not by the run",
        }.get(failure.end, "the Spark job of {name} failed (attempt {attempt}, not retried)")
        self._give_up(
            WorkerProcessError(
                what.format(name=repr(self.plan.name), attempt=self.attempt) + ":\n" + failure.cause
            )
        )

    def _worker_lost(self, cause: str, now: float) -> None:
        """The current attempt lost a worker: end what is left of it, then wait for slots for
        the next attempt -- or give up when it was the last attempt allowed."""
        failure = self._attempt_lost(cause.replace("\n", "\n    "))
        for index in range(self.workers):  # survivors stop now rather than when Spark kills them
            self._send(index, (Kind.STOP,))
        job = self._job
        if job is not None and not job.finished.is_set():
            self.spark.sparkContext.cancelJobGroup(job.group)
        if failure is not None:
            self._give_up(WorkerProcessError(failure))
        coordinator = self._coordinator
        if coordinator is not None:  # roll back: what the lost attempt reported stays
            self._restore = coordinator.restart()
        self._new_attempt(self.workers, keep_events=coordinator is not None)
        self._await_slots(now)

    def _check_rebalance(self, plan: TopologyPlan) -> None:
        """An in-process master never gains task slots: refuse more workers than it has."""
        sc = self.spark.sparkContext
        n, slots = plan.config.num_workers, task_slots(sc)
        if in_process(master_url(sc)) and slots < n:
            raise TopologyError(
                f"topology {plan.name!r} cannot be rebalanced to {n} workers: its Spark master "
                f"{master_url(sc)!r} has {slots} task slots (one barrier task per worker), and "
                f"a running topology keeps its master: rebalance to at most {slots} workers"
            )

    def _swap(self, plan: TopologyPlan, cause: str) -> None:
        """A rebalance: the supervisor, which owns the attempts, ends this one and submits
        ``plan``'s (:meth:`_rebalance_step`); wait until its workers run."""
        with self._lock:
            self._rebalance_to = (plan, cause)
        self._wait(
            lambda: self._rebalance_to is None and self.phase is Phase.RUNNING,
            None,
            "a rebalance",
        )

    def _rebalance_step(self, now: float) -> None:
        """One step of a rebalance: tell the workers to stop (REBALANCING), then -- once
        their job ended, or was cancelled ``_STOP_TIMEOUT`` seconds later -- wait for slots
        for the new plan's attempt, keeping what this one captured and reported."""
        assert self._rebalance_to is not None and self._job is not None
        job = self._job
        if self.phase is Phase.RUNNING:
            for index in range(self.workers):
                self._send(index, (Kind.STOP,))
            self.phase = Phase.REBALANCING
            self._stop_deadline = now + _STOP_TIMEOUT
            return
        if not job.finished.is_set():
            if now >= self._stop_deadline:
                self.spark.sparkContext.cancelJobGroup(job.group)
                self._stop_deadline = float("inf")  # (cancelled once: its end comes)
            return
        plan, cause = self._rebalance_to
        self._rebalance_to = None
        self._restore = self._rebalanced(plan, cause)
        # pyspark's own copy of cloudpickle has no annotations
        self._job_template["topology"] = cloudpickle.dumps(  # type: ignore[no-untyped-call]
            (self._definition, plan.config)
        )
        self._new_attempt(plan.config.num_workers, keep_events=True)
        self._await_slots(now)

    def _give_up(self, failure: BaseException) -> NoReturn:
        """Stop the run and raise why; every later call raises it too (why is set first:
        whoever sees the run stopped must see why too)."""
        self._failure = failure
        self.stop()
        self.phase = Phase.FAILED
        raise failure

    # -- stopping ----------------------------------------------------------------------------

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the workers, collect their final reports, end the Spark job (and the session
        when the run started it)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            self.phase = Phase.STOPPED
            self._ticking.set()
            try:
                job = self._job
                if job is not None and not job.finished.is_set():
                    deadline = time.monotonic() + timeout
                    running = sorted(self.state.started)
                    if len(running) == self.workers:  # else some never heard of the run
                        self._stop_workers(running, timeout, lambda: not job.finished.is_set())
                        job.finished.wait(max(0.0, deadline - time.monotonic()))
                    if not job.finished.is_set():
                        self.spark.sparkContext.cancelJobGroup(job.group)
                        job.finished.wait(timeout)
            finally:
                self._abandoned.detach()
                self._close_control()
                if self._owns_session:
                    self.spark.stop()

    @property
    def job_error(self) -> BaseException | None:
        """Why the current attempt's Spark job failed (None: it did not, or still runs)."""
        return self._job.error if self._job is not None else None

    @property
    def job_finished(self) -> bool:
        return self._job is not None and self._job.finished.is_set()


def _supervise_in_background(ref: Callable[[], SparkRun | None], ending: threading.Event) -> None:
    """The run's supervisor thread: one step (:meth:`SparkRun._supervise_step`) every
    ``_TICK`` seconds until the run stops, fails or is dropped.  It holds the run only while it
    steps: a run nobody else holds is dropped."""
    while not ending.wait(_TICK):
        run = ref()
        if run is None:
            return
        try:
            run._supervise_step()
        except BaseException:  # the run gave up: its callers hear why (run.failure)
            return
        finally:
            run = None


# -- entry points -------------------------------------------------------------------------------


def run_on_spark(topology: Topology | str, **options: Any) -> SparkRun:
    """Start ``topology`` (or a ``"module:name"`` reference) on Spark as ``workers`` barrier
    tasks; returns the running topology (a context manager).  The options are
    :class:`SparkRun`'s:

    * ``workers``: overrides the topology's ``num_workers``; ``config`` replaces its config;
    * ``spark``: the session to use; else ``master`` (a master URL) or the active session,
      else ``local[workers]`` (started, and stopped with the run);
    * ``capture``: gather every emitted tuple in the driver (``captured()``);
    * ``max_attempts`` (3): a lost worker restarts the whole topology, up to this many
      attempts in a row that complete no checkpoint (state comes back by replay from the
      start, or from the last complete checkpoint for a topology with stateful bolts: see the
      module doc);
    * ``start_timeout`` (120 s): how long an attempt may wait for Spark's task slots, and
      then for its workers to start;
    * ``driver_timeout`` (15 s): how long a worker goes on without a connection to the driver
      before it stops by itself;
    * ``ui``: serve the live topology UI from the driver, with the attempt history (True: a
      free port on 127.0.0.1; a port; ``"host:port"``; see ``run.ui.url``);
    * ``register`` (True): the name ``brokerless stream ps`` and ``kill`` find it by while it
      runs (as ``run_local``'s)."""
    ui = options.pop("ui", None)
    register = options.pop("register", True)
    return with_ui(SparkRun(topology, **options), ui, register)


def complete_on_spark(
    topology: Topology,
    mocked_sources: Mapping[str, Sequence[Sequence[Any]]] | None = None,
    *,
    timeout: float = 120.0,
    **options: Any,
) -> CompletedTopology:
    """``complete_topology`` on Spark: run until every spout is exhausted and every tuple is
    processed, and return what each component emitted (in the attempt that finished).
    ``options`` are :func:`run_on_spark`'s."""
    topology = finite_topology(
        topology, mocked_sources, options.get("workers"), options.get("config")
    )
    return run_to_completion(SparkRun(topology, capture=True, **options), timeout)
