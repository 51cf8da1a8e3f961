"""A running topology, and how to tell that it has finished.

Theory of operation: completion
-------------------------------
A run "to completion" ends when every spout is exhausted and every tuple has been processed.
The spouts' part is exact and driven by acking: a spout executor is *done* when each of its
tasks says ``exhausted()`` and it has no spout tuple in flight (all acked or failed).  The
rest -- unanchored tuples, acks still travelling, messages between workers -- is a distributed
termination problem, solved with counters (Mattern's four-counter method).  Each worker
reports (``Worker.activity``): items ever queued on its queues, items whose handling is over,
pairs sent to other workers and pairs received.  All counters only grow, and each is bumped
only after the work it counts (a handled item's emits are queued before it counts as handled).
If two consecutive rounds of reports show all spouts done, queued == handled and sent ==
received in total, and the same totals, then nothing moved between the rounds, so at the end
of the first round nothing was queued, being handled or in flight: the topology had finished.

Checkpoints and lost workers
---------------------------
A run has a *supervisor* thread of its own, and a run of a checkpointed topology a
:class:`~.checkpoint.CheckpointCoordinator`: every ``_SUPERVISE_EVERY`` seconds the supervisor
takes the workers' acknowledgements, triggers and commits checkpoints (``_drive_checkpoints``;
the subclass says how to reach the workers, ``_broadcast``) and notices a lost worker -- or
workers whose checkpoints keep failing (more than ``tolerable_failed_checkpoints`` in a row:
``_checkpoints_failing``), which it treats as lost, as a hung task never answers -- after
which the run starts every worker again -- from the last complete checkpoint, or a plain
topology's from the start -- until ``max_attempts`` in a row complete no checkpoint
(:meth:`TopologyRun._attempt_lost`).  Then the run stops, and the error is raised to whoever
waits on it next (and is ``run.failure``); so is anything else that ends the supervisor
(starting a process failed, say): nothing would move the run on after it.

Rebalance
---------
:meth:`TopologyRun.rebalance` is Storm's: the new plan is built first (``Config.num_workers``
and ``Config.parallelism``, the executors of some components; the tasks never change, so a
task's state and its place in a fields grouping stay), so a bad argument raises before
anything stops; then the spouts are deactivated, the run waits for the tuples in flight
(``_drain``: up to the wait, less once the reports show none pending, queued or moving), a
checkpointed run takes a checkpoint, and the mode swaps its workers (``_swap``: every worker
stops and the new plan's start as a new attempt -- in multi-process and Spark mode through the
supervisor, which owns the attempts -- restoring that checkpoint, or the last complete one,
as a rollback does).  ``restarts`` records the swap (``_rebalanced``) but it is no lost
attempt: ``max_attempts`` does not count it.

The live UI
-----------
Every kind of run can serve the topology UI (``stream/ui``): ``open_ui`` starts it, the
entry points (``run_local``, ``run_multiprocess``, ``run_on_spark``) take ``ui=`` and call it
through :func:`with_ui`.  The page stays up after ``stop()`` with the final figures, until
``close_ui()`` or the end of the ``with`` block.  :func:`with_ui` also registers the run by
name for ``brokerless stream ps`` and ``kill`` (``registration.py``; ``register=``), and each
mode's ``stop`` calls :meth:`TopologyRun._unregister`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .checkpoint import CheckpointCoordinator, CheckpointStatistics, Step, TaskAck
from .errorlog import ErrorList
from .plan import TopologyPlan
from .registration import register, unregister
from .registry import Registration
from .statistics import Statistics
from .storage import open_storage
from .topology import Topology
from .worker import Activity

log = logging.getLogger("brokerless.stream")

_SUPERVISE_EVERY = 0.02  # seconds between the supervisor's looks at a run

if TYPE_CHECKING:
    from .ui import TopologyUI, UIAddress

_Totals = tuple[int, int, int, int]
_Run = TypeVar("_Run", bound="TopologyRun")


def settled_totals(wave: Sequence[Activity]) -> _Totals | None:
    """The summed counters of one round if it looks finished, else None."""
    if not all(a.spouts_done for a in wave):
        return None
    enqueued = sum(a.enqueued for a in wave)
    dequeued = sum(a.dequeued for a in wave)
    sent = sum(a.sent for a in wave)
    received = sum(a.received for a in wave)
    if enqueued != dequeued or sent != received:
        return None
    return enqueued, dequeued, sent, received


def plan_for(topology: Topology, workers: int | None, config: Any) -> TopologyPlan:
    """Build ``topology`` with ``config`` (default: its own), ``workers`` overriding
    ``num_workers``."""
    config = config or topology.config
    if workers is not None:
        config = config.replace(num_workers=workers)
    return topology.build(config)


class TopologyRun(ABC):
    """A topology running in local or multi-process mode.  Use it as a context manager, or
    call ``stop()``; ``statistics()``, ``errors()`` and ``captured()`` still answer after it
    stopped."""

    plan: TopologyPlan
    poll_interval = 0.005
    #: Changes when the run replaces its workers (a restart): rounds of reports from different
    #: epochs never confirm each other.
    epoch = 0
    _settled: tuple[int, _Totals] | None = None  # the last round's totals, if it looked finished
    _last_wave: Sequence[Activity] = ()
    _lock: threading.RLock
    #: Checkpointed runs: where the checkpoints are, and who drives them.
    checkpoint_dir: str | None = None
    _coordinator: CheckpointCoordinator | None = None
    _supervisor: threading.Thread | None = None
    _halt: threading.Event
    #: Why the run ended by itself (a checkpointed run out of attempts): raised to the caller.
    _failure: BaseException | None = None
    #: The live web page of this run, when one was opened (``open_ui``).
    ui: TopologyUI | None = None
    #: Its entry in the registry of running topologies, and its control server when it has no
    #: UI (``registration.py``; each mode's ``stop`` calls ``_unregister``).
    registration: Registration | None = None
    control_server: TopologyUI | None = None
    #: The topology the run was started with (a rebalance builds its new plan from it).
    _definition: Topology
    #: What a rebalance under way changes (``"workers 2 -> 3"``), or None.
    rebalancing: str | None = None
    _resume_active = True  # whether the spouts emit again after the rebalance under way
    #: How it runs: "local", "multiprocess" or "spark".
    mode: str
    #: The current set of workers (1 at first; a rollback or a lost worker starts another);
    #: why each earlier one ended.  ``max_attempts`` in a row that lost a worker without
    #: completing a checkpoint end the run (:meth:`_attempt_lost`).
    attempt: int
    max_attempts: int
    restarts: list[str]
    _lost_in_a_row = 0  # attempts in a row that lost a worker and completed no checkpoint
    _completed_before = 0  # checkpoints completed when the current attempt started

    @abstractmethod
    def activity(self) -> list[Activity]:
        """One report per worker."""

    @abstractmethod
    def statistics(self) -> Statistics: ...

    @abstractmethod
    def errors(self) -> ErrorList:
        """The latest error reports of each task (``errorlog.KEEP``, as Storm UI shows a
        component's latest errors), oldest first, those of the attempts it lost too; ``total``
        counts every report, the ones dropped to keep the latest too."""

    @abstractmethod
    def captured(self) -> list[tuple[str, str, tuple[Any, ...]]]:
        """Every tuple emitted so far as (component, stream, values), when capturing."""

    @abstractmethod
    def stop(self) -> None: ...

    #: Whether the spouts emit (``deactivate``/``activate``)
    active = True

    def deactivate(self) -> None:
        """Storm's ``storm deactivate``: the spouts emit nothing more (``next_tuple`` is not
        called; each task gets ``deactivate()``) until ``activate()``; the tuples in flight
        are still processed, acked, failed and timed out.  Workers started again later (a
        rollback) start deactivated too, and so does a rebalance under way at the end."""
        self.active = self._resume_active = False
        self._tell_active()

    def activate(self) -> None:
        """Storm's ``storm activate``: the spouts emit again (each task gets ``activate()``)."""
        self.active = self._resume_active = True
        self._tell_active()

    @abstractmethod
    def _tell_active(self) -> None:
        """Tell every worker whether its spouts emit (``self.active``)."""

    @property
    @abstractmethod
    def stopped(self) -> bool:
        """Whether the run has stopped (by ``stop()``, or by itself when it failed)."""

    @property
    def failure(self) -> BaseException | None:
        """Why the run ended by itself (it lost a worker in each of its last attempts), or
        None; ``wait_until_done`` raises it, a loop that only watches the run finds it here."""
        return self._failure

    @property
    def worker_info(self) -> list[dict[str, Any]]:
        """What each worker of the current attempt said when it started (pid, host, ...), for
        workers in other processes."""
        return []

    @abstractmethod
    def _pause(self, seconds: float) -> None:
        """Wait between rounds of reports (and do any housekeeping)."""

    def done(self) -> bool:
        """Take one round of reports; True when it and the round before it both look finished
        with the same totals (see the module doc: any time may pass between the rounds)."""
        self._raise_failure()
        wave = self.activity()
        totals = settled_totals(wave)
        key = None if totals is None else (self.epoch, totals)
        confirmed = key is not None and key == self._settled
        self._settled = key
        self._last_wave = wave
        return confirmed

    def wait_until_done(self, timeout: float = 60.0, until: threading.Event | None = None) -> None:
        """Wait until every spout is exhausted and every tuple processed (see the module doc),
        or until ``until`` is set; raises TimeoutError with the workers' last reports after
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.done():
            if until is not None and until.is_set():
                return
            if self.stopped:  # (by another thread, or killed: ``registration.py``)
                raise RuntimeError(
                    f"topology {self.plan.name!r} is stopped: stopped or killed before it was done"
                )
            if self._settled is not None:
                continue  # confirm with a second round at once
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                errors = self.errors()
                said = f"; {errors.total} error(s), the last: {errors[-1]}" if errors else ""
                raise TimeoutError(
                    f"topology {self.plan.name!r} not finished after {timeout} s: "
                    f"{self._last_wave}{said}"
                )
            self._pause(min(self.poll_interval, remaining))

    # -- rebalance -----------------------------------------------------------------------------

    def rebalance(
        self,
        wait: float | None = None,
        workers: int | None = None,
        parallelism: Mapping[str, int] | None = None,
        *,
        block: bool = True,
    ) -> str:
        """Storm's ``storm rebalance``: run the topology on ``workers`` workers and/or with
        ``parallelism`` executors of some components (``{"count": 4}``: at most each one's
        tasks, which never change); returns what changed (``"workers 2 -> 3"``) when the
        new layout runs -- or, with ``block=False``, at once, the rest going on in a thread of
        its own (``rebalancing`` says what it changes until it is done).

        The spouts are deactivated; the run waits up to ``wait`` seconds (default: the
        topology's ``message_timeout_secs``) for the tuples in flight to finish -- less once
        no spout tuple is pending and nothing is queued or moving; a checkpointed run then
        takes a checkpoint; every worker stops and the new layout's workers start, a
        checkpointed run's from that checkpoint (or, if it could not complete, the last
        complete one: as a rollback, no loss and no double counting); a plain run's tasks
        all start afresh, as in Storm -- each spout opened again (what did not complete is
        for its source to replay), each bolt without what it held in memory (only a
        ``StatefulBolt``'s state moves).  The spouts are then active again if they were.
        The swap is a new ``attempt``, its cause in ``restarts``, and not a failure (it does
        not count toward ``max_attempts``); what earlier attempts captured and reported is
        kept.

        Raises ValueError (``TopologyError``) for an unknown component, a parallelism below 1
        or above the component's tasks, ``workers`` below 1 or nothing to change, and
        RuntimeError when the run has stopped or is rebalancing already -- before anything
        stops."""
        plan, change = self._rebalanced_plan(workers, parallelism)
        if wait is None:
            wait = self.plan.config.message_timeout_secs
        if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait < math.inf:
            raise ValueError(f"rebalance: wait must be a number of seconds >= 0, not {wait!r}")
        with self._lock:
            self._raise_failure()
            if self.stopped:
                raise RuntimeError(f"topology {self.plan.name!r} has stopped: nothing to rebalance")
            if self.rebalancing is not None:
                raise RuntimeError(
                    f"topology {self.plan.name!r} is being rebalanced already "
                    f"({self.rebalancing}): wait until that is done"
                )
            self.rebalancing = change
        if block:
            self._rebalance(plan, change, wait)
        else:
            threading.Thread(
                target=self._rebalance_in_background,
                args=(plan, change, wait),
                name=f"{self.plan.name}:rebalance",
                daemon=True,
            ).start()
        return change

    def _rebalance(self, plan: TopologyPlan, change: str, wait: float) -> None:
        """The rebalance to ``plan`` that ``rebalance`` checked (see there)."""
        self._resume_active, self.active = self.active, False
        try:
            self._tell_active()
            self._drain(wait)
            if self._coordinator is not None:
                try:
                    self.checkpoint(plan.config.checkpoint_timeout_secs)
                except TimeoutError:
                    pass  # the new workers restore the last complete checkpoint instead
            self._swap(plan, f"rebalanced: {change}")
        finally:
            self.rebalancing = None
            if self._resume_active and not self.stopped:
                self.activate()

    def _rebalanced_plan(
        self, workers: int | None, parallelism: Mapping[str, int] | None
    ) -> tuple[TopologyPlan, str]:
        """The plan a rebalance to ``workers`` and ``parallelism`` runs, and what it changes
        (``"workers 2 -> 3, 'count' executors 2 -> 4"``); raises ValueError for bad input."""
        name, config = self.plan.name, self.plan.config
        if workers is not None and (
            isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
        ):
            raise ValueError(
                f"rebalance of {name!r}: workers must be an integer >= 1, not {workers!r}"
            )
        executors = dict(config.parallelism)
        executors.update(parallelism or {})
        new = config.replace(
            num_workers=config.num_workers if workers is None else workers, parallelism=executors
        )
        plan = self._definition.build(new)  # (an unknown component, too many executors: raise)
        changes = []
        if new.num_workers != config.num_workers:
            changes.append(f"workers {config.num_workers} -> {new.num_workers}")
        for component in parallelism or {}:
            before = len(self.plan.components[component].executors)
            after = len(plan.components[component].executors)
            if after != before:
                changes.append(f"{component!r} executors {before} -> {after}")
        if not changes:
            raise ValueError(
                f"rebalance of {name!r} changes nothing: it runs {config.num_workers} worker(s) "
                "and those executors already; give other workers or parallelism"
            )
        self._check_rebalance(plan)
        return plan, ", ".join(changes)

    def _rebalance_in_background(self, plan: TopologyPlan, change: str, wait: float) -> None:
        try:
            self._rebalance(plan, change, wait)
        except Exception as exc:  # the run stopped (Ctrl-C, a kill) or failed meanwhile
            if not self.stopped:  # (a stop says why it stopped; a failure is ``failure``)
                log.warning("%s: rebalance (%s) not done: %s", self.plan.name, change, exc)

    def _check_rebalance(self, plan: TopologyPlan) -> None:  # noqa: B027 (most modes: none)
        """Raise ValueError if this run cannot run ``plan`` (a mode's own limits)."""

    def _drain(self, wait: float) -> None:
        """Wait up to ``wait`` seconds (less when the run has stopped) for the tuples in
        flight to finish: until no spout has a tuple pending and two rounds of reports in a
        row find nothing queued or moving, and the same totals."""
        deadline = time.monotonic() + wait
        last: _Totals | None = None
        while not self.stopped and (remaining := deadline - time.monotonic()) > 0:
            wave = self.activity()
            totals = (
                sum(a.enqueued for a in wave),
                sum(a.dequeued for a in wave),
                sum(a.sent for a in wave),
                sum(a.received for a in wave),
            )
            pending = sum(c.pending for c in self.statistics().components.values())
            quiet = pending == 0 and totals[0] == totals[1] and totals[2] == totals[3]
            if quiet and totals == last:
                return
            last = totals if quiet else None
            self._pause(min(self.poll_interval, remaining))

    @abstractmethod
    def _swap(self, plan: TopologyPlan, cause: str) -> None:
        """Stop every worker and start ``plan``'s (a new attempt, ``cause`` in ``restarts``;
        a checkpointed run's restoring its last complete checkpoint); return when they run."""

    def _rebalanced(self, plan: TopologyPlan, cause: str) -> int | None:
        """The bookkeeping of a swap: ``plan`` is the run's, ``cause`` is recorded (not as a
        lost attempt); returns the checkpoint the new workers restore (None: none)."""
        self.restarts.append(f"attempt {self.attempt}: {cause}")
        self.plan = plan
        coordinator = self._coordinator
        return None if coordinator is None else coordinator.restart()

    # -- checkpoints ---------------------------------------------------------------------------

    def checkpoint(self, timeout: float = 60.0) -> int:
        """Take a checkpoint now and wait until it is complete; returns its id (a checkpoint
        holding everything done before the call)."""
        coordinator = self._coordinator
        if coordinator is None:
            raise RuntimeError(
                f"topology {self.plan.name!r} has no stateful bolts: it takes no checkpoints"
            )
        with self._lock:
            self._raise_failure()
            target = coordinator.request()
        deadline = time.monotonic() + timeout
        while coordinator.latest is None or coordinator.latest < target:
            self._raise_failure()
            if self.stopped:
                raise RuntimeError(f"topology {self.plan.name!r} is stopped: no checkpoint")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"topology {self.plan.name!r}: checkpoint {target} not complete after "
                    f"{timeout} s ({coordinator.stats})"
                )
            self._pause(min(_SUPERVISE_EVERY, remaining))
        return coordinator.latest

    def checkpoint_statistics(self) -> CheckpointStatistics:
        """Checkpoints completed and abandoned, the last one, and the figures of each."""
        if self._coordinator is None:
            return CheckpointStatistics()
        with self._lock:
            stats = self._coordinator.stats
            return dataclasses.replace(stats, history=list(stats.history))

    def _open_checkpoints(self) -> int | None:
        """A checkpointed run's coordinator, over its plan's checkpoint location; returns the
        checkpoint the workers start from (None: from the start, or not checkpointed)."""
        plan = self.plan
        if not plan.checkpointed:
            return None
        self.checkpoint_dir = plan.config.checkpoint_dir
        assert self.checkpoint_dir is not None
        self._coordinator = CheckpointCoordinator(plan, open_storage(self.checkpoint_dir))
        return self._coordinator.latest

    def _broadcast(self, step: Step, checkpoint: int) -> None:
        """Tell every worker ``step`` of ``checkpoint``."""
        raise NotImplementedError

    def _drive_checkpoints(self, acks: Iterable[TaskAck]) -> None:
        """Take acknowledgements, commit, and trigger the next checkpoint when it is due."""
        coordinator = self._coordinator
        assert coordinator is not None
        for ack in acks:
            committed = coordinator.acknowledge(ack)
            if committed is not None:
                self._broadcast(Step.COMMIT, committed)
        now = time.monotonic()
        coordinator.expire(now)
        if coordinator.due(now) and coordinator.failing() is None:
            self._broadcast(Step.CHECKPOINT, coordinator.trigger(now))

    def _checkpoints_failing(self) -> str | None:
        """Why the current workers are lost though they run: more checkpoints in a row than
        ``tolerable_failed_checkpoints`` failed (a task hung, say); None while they are not.
        Each mode treats it as a lost worker (until the next attempt starts it stays true)."""
        coordinator = self._coordinator
        return None if coordinator is None else coordinator.failing()

    def _supervise_once(self) -> None:
        """One look at the run by the supervisor (with the lock held)."""
        raise NotImplementedError

    def _attempt_lost(self, cause: str) -> str | None:
        """Attempt ``attempt`` lost a worker (``cause``): note it, and return what ends the run
        (a WorkerProcessError's message) when it was the last allowed -- the
        ``max_attempts``-th in a row that completed no checkpoint.  An attempt that completed
        one made progress: the count starts again, so a job that loses a machine now and then
        is not ended by it."""
        self.restarts.append(f"attempt {self.attempt}: {cause}")
        coordinator = self._coordinator
        completed = coordinator.stats.completed if coordinator is not None else 0
        progressed = completed > self._completed_before
        self._lost_in_a_row = 1 if progressed else self._lost_in_a_row + 1
        self._completed_before = completed
        if self._lost_in_a_row < self.max_attempts:
            return None
        where = " on Spark" if self.mode == "spark" else ""
        return (
            f"topology {self.plan.name!r}{where} lost a worker in each of its last "
            f"{self._lost_in_a_row} attempt(s), none of which completed a checkpoint "
            f"(max_attempts={self.max_attempts}):\n" + "\n".join(self.restarts)
        )

    def _start_supervisor(self) -> None:
        self._halt = threading.Event()
        self._supervisor = threading.Thread(
            target=self._supervise, name=f"{self.plan.name}:supervisor", daemon=True
        )
        self._supervisor.start()

    def _stop_supervisor(self) -> None:
        """End the supervisor (it never waits long for the lock, so this may hold it)."""
        supervisor = self._supervisor
        if supervisor is not None:
            self._halt.set()
            if supervisor is not threading.current_thread():
                supervisor.join()

    def _supervise(self) -> None:
        halt = self._halt
        while not halt.wait(_SUPERVISE_EVERY):
            if not self._lock.acquire(timeout=_SUPERVISE_EVERY):
                continue
            try:
                if halt.is_set():
                    return
                self._supervise_once()
            except BaseException as exc:  # the run failed: tell whoever waits on it
                self._failure = exc
                return
            finally:
                self._lock.release()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def open_ui(self, where: UIAddress = True) -> TopologyUI:
        """Serve the live topology UI (``stream/ui``) at ``where``: True for a free port on
        127.0.0.1, a port, or ``"host:port"``; returns it (``.url`` says where)."""
        from .ui import TopologyUI

        if self.ui is not None:
            raise RuntimeError(f"topology {self.plan.name!r} already has a UI at {self.ui.url}")
        self.ui = TopologyUI(self, where)
        return self.ui

    def _unregister(self) -> None:
        """The run has stopped: no longer in the registry (``registration.py``)."""
        unregister(self)

    def close_ui(self) -> None:
        if self.ui is not None:
            self.ui.close()

    def __enter__(self: _Run) -> _Run:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            self.close_ui()


def with_ui(run: _Run, ui: UIAddress | None, name: str | bool = True) -> _Run:
    """``run`` serving its UI at ``ui`` (None or False: no UI), registered under ``name``
    (``registration.register``); stops ``run`` if the UI cannot be served (the port is taken,
    say) or the name is taken."""
    try:
        if ui is not None and ui is not False:
            run.open_ui(ui)
        register(run, name)
    except BaseException:
        run.stop()
        raise
    return run
