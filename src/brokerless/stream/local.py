"""Local mode: a whole topology in this process, on in-memory queues.

A run recovers here as in the other modes: when an executor crashes, ``kill_worker`` simulates
a lost worker or, in a checkpointed topology (one with stateful bolts), a task fails or more
than ``tolerable_failed_checkpoints`` checkpoints in a row fail (a task hung), the run's
supervisor stops every worker and starts them all again -- a checkpointed topology's from the
last complete checkpoint (``run.py``, ``checkpoint.py``), a plain one's from the start (its
spouts open again; what the lost attempt captured and reported is dropped, as in the other
modes).  Threads cannot be killed: a hung one is left behind (its threads are daemons, named
in ``hung_threads``), and the restart's cause in ``run.restarts`` (and the run's error, after
the last attempt) shows the stack of each executor thread that was in a component's code.
A round of reports that finds a failed worker does this at once instead (or raises,
after the last attempt): a run is never done with a failed task.  A rebalance
(``TopologyRun.rebalance``) stops every worker too and starts the new plan's, keeping what the
stopped ones captured and reported.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from typing import TYPE_CHECKING, Any

from .assignment import assign
from .checkpoint import Step
from .config import Config
from .control import WorkerProcessError
from .errorlog import ErrorList, ErrorLog
from .messaging import LocalMessaging, LocalNetwork
from .plan import TopologyPlan
from .run import TopologyRun, plan_for, with_ui
from .statistics import Statistics
from .topology import Topology
from .worker import Activity, Worker

if TYPE_CHECKING:
    from .ui import UIAddress  # (the UI, and http.server, load only when used)


class LocalRun(TopologyRun):
    """A topology running in this process, with ``num_workers`` workers (more than one: they
    exchange serialized batches over in-memory messaging, as separate processes would).
    ``attempt`` counts the sets of workers the run started, ``restarts`` says why each earlier
    one ended."""

    mode = "local"

    def __init__(
        self,
        topology: Topology,
        *,
        workers: int | None = None,
        config: Config | None = None,
        capture: bool = False,
        max_attempts: int = 3,
    ) -> None:
        plan = plan_for(topology, workers, config)
        self._definition = topology
        self._temporary: str | None = None
        if plan.checkpointed and plan.config.checkpoint_dir is None:
            self._temporary = tempfile.mkdtemp(prefix="brokerless-checkpoints-")
            plan = plan_for(topology, None, plan.config.replace(checkpoint_dir=self._temporary))
        self.plan = plan
        self.max_attempts = max_attempts
        self.attempt = 1
        self.restarts: list[str] = []
        self._capture = capture
        self._lock = threading.RLock()
        self._stopped = threading.Event()
        self.hung_threads: list[str] = []
        self._earlier: list[Worker] = []  # workers of earlier attempts: their tuples
        self._lost_errors = ErrorLog()  # what the workers of earlier attempts reported
        self.workers: list[Worker] = []
        try:
            self._start_workers(self._open_checkpoints())
            self._start_supervisor()
        except BaseException:
            self.stop()
            raise

    def _start_workers(self, restore: int | None) -> None:
        plan = self.plan
        n = plan.config.num_workers
        assignment = assign(plan, n)
        network = LocalNetwork() if n > 1 else None
        self.workers = [
            Worker(
                plan,
                assignment,
                i,
                LocalMessaging(network) if network else None,
                capture=self._capture,
                restore=restore,
                attempt=self.attempt,
            )
            for i in range(n)
        ]
        endpoints = [w.bind() for w in self.workers]
        for worker in self.workers:
            worker.set_active(self.active)
            worker.start(endpoints)

    def _tell_active(self) -> None:
        with self._lock:
            for worker in self.workers:
                worker.set_active(self.active)

    def __repr__(self) -> str:
        state = "stopped" if self._stopped.is_set() else "running"
        return f"<LocalRun {self.plan.name!r} {state}, {len(self.workers)} worker(s)>"

    def activity(self) -> list[Activity]:
        with self._lock:
            if any(w.failure is not None for w in self.workers):
                # a failed worker is no finished one: start again now (as the supervisor would
                # at its next look), or raise when that was the last attempt
                self._supervise_once()
                self._raise_failure()
            return [w.activity() for w in self.workers]

    def statistics(self) -> Statistics:
        """The current workers' metrics (a rollback starts them afresh)."""
        with self._lock:
            return Statistics.merge(w.snapshot() for w in self.workers)

    def errors(self) -> ErrorList:
        with self._lock:
            return ErrorLog.merged([self._lost_errors, *(w.errors for w in self.workers)])

    def captured(self) -> list[tuple[str, str, tuple[Any, ...]]]:
        with self._lock:
            return [c for w in self._earlier + self.workers for c in (w.capture or ())]

    def kill_worker(self, index: int) -> None:
        """Simulate the loss of worker ``index``: it stops at once (what its queues held is
        lost) and the run starts its workers again -- from its last complete checkpoint, or
        from the start -- as it would if the worker's process died in multi-process mode."""
        with self._lock:
            worker = self.workers[index]
            self.hung_threads += worker.stop()
            if worker.failure is None:
                worker.failure = "killed (kill_worker)"

    def _broadcast(self, step: Step, checkpoint: int) -> None:
        for worker in self.workers:
            if step is Step.CHECKPOINT:
                worker.checkpoint(checkpoint)
            else:
                worker.commit(checkpoint)

    def _supervise_once(self) -> None:
        if self._stopped.is_set():
            return
        for worker in self.workers:
            if worker.failure is not None:
                self._roll_back(f"worker {worker.index}: {worker.failure}")
                return
        if self._coordinator is not None:
            self._drive_checkpoints(
                [ack for w in self.workers if w.checkpoints for ack in w.checkpoints.take_acks()]
            )
            stalled = self._checkpoints_failing()
            if stalled is not None:  # a hung thread cannot be killed: it is left behind
                stacks = [s for w in self.workers for s in w.component_stacks()]
                where = "".join(f"\n{stack}" for stack in stacks)
                self._roll_back(f"the workers are running, but {stalled}{where}")

    def _roll_back(self, cause: str) -> None:
        """A worker failed: start every worker again, from the last complete checkpoint (what
        the lost attempt captured is kept) or from the start (it is dropped); its errors are
        kept either way."""
        coordinator = self._coordinator
        failure = self._attempt_lost(cause)
        for worker in self.workers:
            self.hung_threads += worker.stop()
        if coordinator is not None:
            self._earlier += self.workers
        if failure is not None:
            self._failure = WorkerProcessError(failure)
            self.stop()
            return
        for worker in self.workers:
            self._lost_errors.absorb(worker.errors)
        self.attempt += 1
        self.epoch = self.attempt
        self._start_workers(None if coordinator is None else coordinator.restart())

    def _swap(self, plan: TopologyPlan, cause: str) -> None:
        """A rebalance: stop every worker and start ``plan``'s, keeping what the stopped ones
        captured and reported."""
        with self._lock:
            self._raise_failure()
            if self._stopped.is_set():
                raise RuntimeError(f"topology {self.plan.name!r} stopped while rebalancing")
            for worker in self.workers:
                self.hung_threads += worker.stop()
                self._lost_errors.absorb(worker.errors)
            self._earlier += self.workers
            restore = self._rebalanced(plan, cause)
            self.attempt += 1
            self.epoch = self.attempt
            self._start_workers(restore)

    def _pause(self, seconds: float) -> None:
        self._stopped.wait(seconds)

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def stop(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._stop_supervisor()
        with self._lock:
            for worker in self.workers:
                self.hung_threads += worker.stop()
        if self._temporary is not None:
            shutil.rmtree(self._temporary, ignore_errors=True)
        self._unregister()


def run_local(
    topology: Topology,
    *,
    workers: int | None = None,
    config: Config | None = None,
    capture: bool = False,
    max_attempts: int = 3,
    ui: UIAddress | None = None,
    register: str | bool = True,
) -> LocalRun:
    """Start ``topology`` in this process; returns the running topology (a context manager).

    ``config`` replaces the topology's own; ``workers`` overrides its ``num_workers``;
    ``capture`` records every emitted tuple (for ``captured()``); ``max_attempts`` bounds how
    many times in a row a checkpointed topology starts its workers (a rollback starts them
    again) without completing a checkpoint between;
    ``ui`` serves the live topology UI (True: a free port on 127.0.0.1; a port;
    ``"host:port"``; see ``run.ui.url``); ``register`` is the name ``brokerless stream ps``
    and ``kill`` find it by while it runs (True: the topology's, or NAME-2... if a run holds
    that; False: not listed; see ``registration.py``)."""
    run = LocalRun(
        topology, workers=workers, config=config, capture=capture, max_attempts=max_attempts
    )
    return with_ui(run, ui, register)
