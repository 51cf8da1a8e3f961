"""Multi-process mode: N worker processes on this machine, over ipc or tcp.

Theory of operation
-------------------
The driver (:class:`MultiprocessRun`, in the caller's process) binds a ROUTER on an ipc path
in a private temporary directory -- the *control* channel -- and starts N processes of
``python -m brokerless.stream worker`` (``worker_process.py``).  Each reads its job from its
stdin (the topology, pickled, or a ``module:attr`` reference; the config; its index) -- after
importing the driver's main script as ``__mp_main__``, as multiprocessing's spawn does
(``main_module.py``), so that components defined in that script resolve -- builds the same plan
and the same assignment as every other worker, connects a DEALER to the control channel, binds
its virtual port and reports ``ready`` with the endpoint.  When all are ready the driver sends
everyone the list of endpoints (``start``); that is the two-phase start-up a Spark barrier
stage will reuse.  From then on tuples go worker to worker; the control channel only carries
questions (``activity`` rounds for completion, ``stats``), the worker's errors and -- when
capturing -- the tuples it emitted, and at the end ``stop`` and each worker's ``final``
report.  The control channel itself (``control/``) is shared with the Spark runner; its
messages are pickled and signed with a key the driver gives each worker on its stdin, with
the run's CURVE keys (``security.py``) that encrypt the control and worker-to-worker
connections unless the config says ``security="none"``.

A lost worker (its process exited, it reports a failed task, or it has said nothing -- not
even its heartbeat, every second -- for ``Config.worker_timeout_secs``, as a frozen process
does; or, in a checkpointed run, an attempt's workers are not all running after
``start_timeout``: each gets its job from a thread of the driver's, which a worker frozen before
reading it cannot hold; or more than ``Config.tolerable_failed_checkpoints`` checkpoints in a
row fail, as when a task hangs) makes the driver kill every worker process and start new ones, a new
*attempt* whose messages alone the control channel takes, as Storm's supervisor starts a lost
worker again: a checkpointed topology's all restore the last complete checkpoint, and what the
earlier attempts captured and reported is kept (``checkpoint.py``, ``run.py``); a plain
topology's start over -- its spouts open again, and what the lost attempt reported is dropped,
as on Spark.  This goes on up to ``max_attempts`` attempts in a row that complete no
checkpoint, then the run ends with :class:`WorkerProcessError` (a plain run's start that
times out: TimeoutError).  One loop owns the attempts (:meth:`MultiprocessRun._run_attempts`:
start, decide, start the next): looking at the control channel only notes a loss, and the
run's supervisor thread, which also drives the checkpoints, is what then calls that loop;
questions wait for the new attempt.  A rebalance (``TopologyRun.rebalance``) goes through the
supervisor too: it stops the workers as ``stop()`` does (their last reports are taken), and
starts the new plan's attempt, its job carrying the new config, keeping what was captured.

No orphans: a worker exits when the driver's process ends, whatever ended it (see
``worker_process.py``); on Ctrl-C the driver stops the workers.  ``stop()`` asks each worker to
stop and report, waits for the processes to exit, and kills any that do not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import brokerless as zmq

from .affinity import worker_cpu_sets
from .config import Config
from .control import AttemptState, ControlledRun, Kind, WorkerProcessError
from .main_module import check_not_preparing, describe_main, dumps_with_main
from .plan import TopologyPlan
from .run import plan_for, with_ui
from .topology import Topology, TopologyError, load_topology
from .worker_process import write_job

if TYPE_CHECKING:
    from .ui import UIAddress  # (the UI, and http.server, load only when used)

__all__ = ["MultiprocessRun", "WorkerProcessError", "run_multiprocess"]

_PACKAGE_ROOT = str(Path(zmq.__file__).resolve().parent.parent)
_STOP_TIMEOUT = 10.0  # seconds the workers get to stop and report before they are killed


class MultiprocessRun(ControlledRun):
    """A topology running in worker processes (see the module doc).  ``attempt`` is the
    current set of processes (1 at first), ``restarts`` says why each earlier one ended."""

    mode = "multiprocess"

    def __init__(
        self,
        topology: Topology | str,
        *,
        workers: int | None = None,
        transport: str = "ipc",
        config: Config | None = None,
        capture: bool = False,
        start_timeout: float = 60.0,
        max_attempts: int = 3,
    ) -> None:
        if transport not in ("ipc", "tcp"):
            raise ValueError(f"transport must be 'ipc' or 'tcp', not {transport!r}")
        check_not_preparing()
        main = describe_main()
        definition = load_topology(topology) if isinstance(topology, str) else topology
        self.plan = plan = plan_for(definition, workers, config)  # mistakes show up here
        self._definition = definition
        self._main = main
        #: The CPUs each worker keeps to (None: the scheduler's choice)
        self._worker_cpus = worker_cpu_sets(plan.config.worker_cpus, plan.config.num_workers)
        if isinstance(topology, str):
            shipped: Any = topology
        else:
            try:
                shipped = dumps_with_main(topology, main)
            except Exception as exc:
                raise TopologyError(
                    f"topology {plan.name!r} cannot be sent to worker processes ({exc}): "
                    "define its spouts, bolts and factories at module level (no lambdas), "
                    "or pass a 'module:name' reference"
                ) from exc
        self.transport = transport
        self.start_timeout = start_timeout
        self.max_attempts = max_attempts
        self.restarts: list[str] = []
        #: Why the current attempt lost a worker (None: it has not): the supervisor starts
        #: the next one (:meth:`_run_attempts`).
        self._lost_cause: str | None = None
        #: A rebalance asked for (the plan, its cause): the supervisor starts its attempt.
        self._rebalance_to: tuple[TopologyPlan, str] | None = None
        self._starting = False  # an attempt's workers are being started: not asked anything
        self._directory = tempfile.mkdtemp(prefix="brokerless-stream-")
        if plan.checkpointed and plan.config.checkpoint_dir is None:
            checkpoints = f"{self._directory}/checkpoints"
            self.plan = plan = plan_for(
                definition, None, plan.config.replace(checkpoint_dir=checkpoints)
            )
        control = self._open_control(f"ipc://{self._directory}/control")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([_PACKAGE_ROOT, *filter(None, [env.get("PYTHONPATH")])])
        self._env = env
        self._job = {
            "key": self._signer.key,
            "keys": self._keys,
            "topology": shipped,
            "main": main,
            "config": dumps_with_main(plan.config, main),
            "transport": transport,
            "directory": self._directory,
            "control": control,
            "capture": capture,
            "sys_path": list(sys.path),
        }
        self.processes: list[subprocess.Popen[bytes]] = []
        self._finalizer = weakref.finalize(self, _kill, self.processes, self._directory)
        try:
            self._run_attempts(self._open_checkpoints())
            self._start_supervisor()
        except BaseException:
            self.stop()
            raise

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "running"
        return (
            f"<MultiprocessRun {self.plan.name!r} {state}, {len(self.processes)} "
            f"worker process(es) over {self.transport}>"
        )

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    # -- attempts: one loop starts them all ------------------------------------------------------

    def _run_attempts(self, restore: int | None, keep_events: bool = False) -> None:
        """Start an attempt (restoring checkpoint ``restore``); while the attempt being started
        loses a worker, decide (:meth:`_next_attempt`) and start the next.  The only code that
        starts workers: at the start, and from the supervisor after a running attempt lost
        one (:meth:`_supervise_once`).  Looking at the control channel meanwhile only records
        a loss (:meth:`_check_alive`), so nothing here runs inside itself.  ``keep_events``:
        what the previous attempt captured stays (a rebalance's; a checkpointed run's always)."""
        while True:
            cause = self._start_attempt(restore, keep_events)
            if cause is None:
                with self._attempt_changed:
                    self._attempt_changed.notify_all()
                return
            restore = self._next_attempt(cause)
            keep_events = False

    def _start_attempt(self, restore: int | None, keep_events: bool) -> str | None:
        """Start the worker processes of a new attempt and wait until they all run; returns
        None, or why the attempt lost a worker before that."""
        n = self.plan.config.num_workers
        state = self._spawn(n, restore, keep_events)
        self._starting = True
        try:
            return self._await_start(state, n)
        finally:
            self._starting = False

    def _await_start(self, state: AttemptState, n: int) -> str | None:
        """Wait until the ``n`` workers of ``state``'s attempt are bound, start them, and wait
        until they run; returns None, or why the attempt lost a worker before that."""

        def ready() -> bool:
            return len(state.ready) == n or self._lost_cause is not None

        def started() -> bool:
            return len(state.started) == n or self._lost_cause is not None

        try:
            self._wait(ready, self.start_timeout, "workers to bind")
            if self._lost_cause is None:
                endpoints = [state.ready[i] for i in range(n)]
                for index in range(n):
                    self._send(index, (Kind.START, endpoints))
                self._wait(started, self.start_timeout, "workers to start")
        except TimeoutError:
            if self._coordinator is None:
                raise
            late = "; ".join(state.silent(i) for i in range(n) if i not in state.started)
            return (
                f"workers of {self.plan.name!r} not started after {self.start_timeout:g} s "
                f"(frozen, or slow to start: {late})"
            )
        return self._lost_cause

    def _spawn(self, n: int, restore: int | None, keep_events: bool) -> AttemptState:
        """End the previous attempt's processes; start a new attempt's; returns what the
        driver hears from them."""
        _end(self.processes)
        self.processes.clear()
        # a rollback keeps what the lost attempt captured; a plain topology starts over (the
        # errors are kept either way)
        self._new_attempt(n, keep_events=keep_events or self._coordinator is not None)
        self._lost_cause = None
        for index in range(n):
            process = subprocess.Popen(
                [sys.executable, "-m", "brokerless.stream", "worker"],
                stdin=subprocess.PIPE,
                env=self._env,
            )
            self.processes.append(process)
            job = dict(
                self._job,
                index=index,
                attempt=self.attempt,
                restore=restore,
                cpus=self._worker_cpus[index],
            )
            stdin = process.stdin
            assert stdin is not None, "the worker runs with stdin=PIPE"
            threading.Thread(
                target=_give_job, args=(stdin, job), name=f"job of worker {index}", daemon=True
            ).start()
        return self.state

    def _next_attempt(self, cause: str) -> int | None:
        """The current attempt lost a worker: raise (after stopping) when it was the last one
        allowed, else return the checkpoint the next one restores (None: from the start)."""
        failure = self._attempt_lost(cause)
        if failure is not None:
            # why, before the stop: whoever sees the run stopped must see why too
            self._failure = error = WorkerProcessError(failure)
            self.stop()
            raise error
        return None if self._coordinator is None else self._coordinator.restart()

    def _lost(self) -> str | None:
        """Why a worker of the current attempt is lost, or None."""
        if self.state.lost:
            index, why = next(iter(self.state.lost.items()))
            return f"worker {index} of {self.plan.name!r} failed: {why}"
        stalled = self._checkpoints_failing()
        if stalled is not None:
            return f"the workers of {self.plan.name!r} are running, but {stalled}"
        timeout = self.plan.config.worker_timeout_secs
        now = time.monotonic()
        for index, process in enumerate(self.processes):
            code = process.poll()
            if code is not None:
                return (
                    f"worker {index} of {self.plan.name!r} (pid {process.pid}) exited with "
                    f"code {code}"
                )
            if index in self.state.started and self._silent_for(index, now) > timeout:
                return (
                    f"worker {index} of {self.plan.name!r} (pid {process.pid}) said nothing "
                    f"for {timeout:g} s (worker_timeout_secs): frozen, or stopped (SIGSTOP)"
                )
        return None

    def _check_alive(self) -> None:
        """Raise if the run cannot go on; a lost worker is recorded for the supervisor, which
        starts the next attempt."""
        if self._stopped:  # stopping: whatever happened, stop() finishes the clean-up
            return
        if self.state.failures:
            index, text = next(iter(self.state.failures.items()))
            raise WorkerProcessError(f"worker {index} of {self.plan.name!r} failed:\n{text}")
        if self._lost_cause is not None:
            return
        cause = self._lost()
        if cause is not None:
            self._lost_cause = cause

    def _accepting_questions(self) -> bool:
        return self._lost_cause is None and not self._starting

    def _swap(self, plan: TopologyPlan, cause: str) -> None:
        """A rebalance: the supervisor, which owns the attempts, starts ``plan``'s
        (:meth:`_start_rebalanced`); wait until its workers run."""
        with self._lock:
            self._rebalance_to = (plan, cause)
        self._wait(
            lambda: self._rebalance_to is None and self._accepting_questions(), None, "a rebalance"
        )

    def _start_rebalanced(self, plan: TopologyPlan, cause: str) -> None:
        """Stop the workers as ``stop()`` does (their last reports are taken), then start
        ``plan``'s, keeping what the stopped ones captured."""
        running = [i for i, p in enumerate(self.processes) if p.poll() is None]
        self._stop_workers(
            running, _STOP_TIMEOUT, lambda: any(p.poll() is None for p in self.processes)
        )
        restore = self._rebalanced(plan, cause)
        self._job["config"] = dumps_with_main(plan.config, self._main)
        self._worker_cpus = worker_cpu_sets(plan.config.worker_cpus, plan.config.num_workers)
        self._run_attempts(restore, keep_events=True)

    def _supervise_once(self) -> None:
        super()._supervise_once()
        rebalance = self._rebalance_to
        if rebalance is not None and not self._stopped:
            self._start_rebalanced(*rebalance)
            self._rebalance_to = None
            return
        cause = self._lost_cause
        if cause is not None and not self._stopped:
            # a new attempt: a question waiting for answers is asked again of its workers
            # (ControlledRun._ask), and completion rounds of different attempts never confirm
            # each other (epoch)
            self._run_attempts(self._next_attempt(cause))

    def stop(self, timeout: float = _STOP_TIMEOUT) -> None:
        """Stop the workers, collect their final reports, end the processes."""
        self._stop_supervisor()
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            try:
                running = [i for i, p in enumerate(self.processes) if p.poll() is None]
                deadline = time.monotonic() + timeout
                self._stop_workers(
                    running, timeout, lambda: any(p.poll() is None for p in self.processes)
                )
                for process in self.processes:
                    try:
                        process.wait(max(0.1, deadline - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        pass
            finally:
                self._finalizer()
                self._close_control()


def _give_job(stdin: IO[bytes], job: dict[str, Any]) -> None:
    """Write a worker's job to its stdin -- in a thread of its own, since a worker that froze
    before reading it holds the write; one that died first (a broken pipe), or that the
    driver ended meanwhile, is found lost by its attempt."""
    try:
        write_job(stdin, job)
    except (OSError, ValueError):  # ValueError: the pipe was closed after the worker ended
        pass


def _end(processes: list[subprocess.Popen[bytes]]) -> None:
    """End worker processes still running."""
    for process in processes:
        if process.poll() is None:
            process.kill()
        if process.stdin is not None:
            try:
                process.stdin.close()
            except OSError:
                pass
        process.wait()


def _kill(processes: list[subprocess.Popen[bytes]], directory: str) -> None:
    """End worker processes still running and remove the run's directory."""
    _end(processes)
    shutil.rmtree(directory, ignore_errors=True)


def run_multiprocess(
    topology: Topology | str,
    *,
    workers: int | None = None,
    transport: str = "ipc",
    config: Config | None = None,
    capture: bool = False,
    max_attempts: int = 3,
    ui: UIAddress | None = None,
    register: str | bool = True,
) -> MultiprocessRun:
    """Start ``topology`` (a Topology whose components are importable or defined in the main
    script -- start the run under ``if __name__ == "__main__":`` -- or a ``"module:name"``
    reference) in ``workers`` processes talking over ``transport`` ("ipc" or "tcp");
    returns the running topology (a context manager).  ``config`` replaces the topology's own,
    ``workers`` overrides its ``num_workers``; ``capture`` gathers every emitted tuple in this
    process (``captured()``); ``max_attempts`` bounds how many sets of processes the run
    starts in a row (a lost worker starts a new set) without completing a checkpoint between;
    ``ui`` serves the live topology UI and ``register`` names it for ``brokerless stream ps``
    and ``kill`` (as ``run_local``)."""
    run = MultiprocessRun(
        topology,
        workers=workers,
        transport=transport,
        config=config,
        capture=capture,
        max_attempts=max_attempts,
    )
    return with_ui(run, ui, register)
