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
*Start-up.*  The driver (:class:`SparkRun`, in the caller's process) first checks that Spark
has a task slot for every worker: a barrier stage runs all its tasks at once or not at all, and
Spark's own check retries for minutes before it says so.  It binds the control channel
(``stream/control.py``) on tcp and announces it at ``spark.driver.host``, then submits a job of
N partitions as one barrier stage, from a background thread and under a job group of its own.
Each task is one worker: it builds the same plan and assignment as every other, binds its
virtual port on every interface (announcing the executor's address, from the barrier
context), swaps endpoints with the other tasks through ``BarrierTaskContext.allGather`` (in
partition order), starts, says ``started`` and then answers the driver exactly as a worker
process of ``multiprocess.py`` does (the same :func:`~brokerless.stream.control.serve`).
Tuples go worker to worker over brokerless tcp; Spark carries none of them.

*A lost worker.*  When a worker's process dies, Spark fails the barrier stage (and kills its
other tasks), so the job ends with an error.  The runner then starts a new *attempt*: it drops
what the failed attempt reported (captured tuples, statistics, errors), tells whatever is
left of it to stop, and submits the whole stage again -- up to ``max_attempts`` in all, after
which it stops and raises one :class:`WorkerProcessError` naming each attempt's cause.  The
control channel ignores late messages from an older attempt, and ``wait_until_done`` goes on
across a restart.  A worker that reports an error of its own (say, its executor cannot import
the topology's module) is not retried: every attempt would fail the same way.

*Recovering state: replay from the start.*  Every attempt begins from nothing -- spouts from
their first tuple, bolts with empty state.  For a finite, replayable input (a file, a fixed
list, a log read from offset 0) that gives exact results with no snapshot of bolt state to
coordinate across workers: a word count is right because the attempt that finishes counted
every word once, and no half-done attempt's counts survive it.  The limit: a live, unbounded
source cannot be replayed from its start; surviving a lost worker there needs Storm-style
checkpointed state (spout offsets and bolt state snapshotted together, restored on restart),
which is not done here.

*Stopping.*  ``stop()`` asks the workers to stop, collects their final reports (their threads
end and every bolt's ``cleanup``/spout's ``close`` runs), waits for the job to end and
cancels its job group if it does not.  Ctrl-C in the driver raises KeyboardInterrupt in the
waiting caller, and leaving the ``with`` block stops the run; the tasks themselves ignore
SIGINT while they run (a terminal sends it to Spark's Python workers too).  A worker whose
driver is gone -- no control connection for ``driver_timeout`` seconds -- stops by itself and
fails its task, so no task serves a run nobody watches.

*Reused Python workers.*  Spark runs the next task in the same Python process
(``spark.python.worker.reuse``), so a task leaves nothing behind: every thread is joined,
every socket closed and the context terminated before it returns, and its changes to
``sys.path`` and to SIGINT are undone.
"""

from __future__ import annotations

import ipaddress
import os
import pickle
import re
import signal
import socket
import sys
import threading
import time
import traceback
import uuid
import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, NoReturn

from pyspark import BarrierTaskContext, SparkContext, cloudpickle
from pyspark.sql import SparkSession

import brokerless as zmq
from brokerless.stream import Config, Topology, TopologyError
from brokerless.stream.assignment import assign
from brokerless.stream.control import (
    ControlledRun,
    Restarted,
    WorkerChannel,
    WorkerProcessError,
    serve,
    started_info,
)
from brokerless.stream.messaging import SocketMessaging, tcp_endpoint
from brokerless.stream.multiprocess import load_topology
from brokerless.stream.run import plan_for, with_ui
from brokerless.stream.testing import CompletedTopology, finite_topology, run_to_completion
from brokerless.stream.worker import Worker

__all__ = [
    "SparkRun",
    "complete_on_spark",
    "run_on_spark",
    "session_builder",
    "task_slots",
]

_PACKAGE_ROOT = str(Path(zmq.__file__).resolve().parent.parent)
_LOCAL = re.compile(r"local(?:\[(\*|\d+)(?:\s*,\s*\d+)?\])?")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*\d+\s*\]")
_EXECUTOR_WAIT = 10.0  # seconds a cluster's executors get to register before slots are counted


def is_local(master: str) -> bool:
    """Whether ``master`` runs every executor on this machine."""
    return bool(_LOCAL.fullmatch(master) or _LOCAL_CLUSTER.fullmatch(master))


def session_builder(master: str, app_name: str = "brokerless") -> SparkSession.Builder:
    """A session builder set up for topologies: Spark's barrier slot check fails at once
    (not after minutes of retries), no console progress bar; for a local master also the
    driver on 127.0.0.1 and Python workers that import this brokerless and run this
    interpreter (``PYSPARK_PYTHON``, which PySpark reads from the environment, is set to it
    unless it is set already).  Add your own ``.config(...)`` and call ``getOrCreate()``."""
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures", "1")
        .config("spark.scheduler.barrier.maxConcurrentTasksCheck.interval", "1s")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if is_local(master):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        paths = [_PACKAGE_ROOT, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        builder = (
            builder.config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.pyspark.python", sys.executable)
            .config(
                "spark.executorEnv.PYTHONPATH", os.pathsep.join(os.path.abspath(p) for p in paths)
            )
        )
    return builder


def task_slots(sc: SparkContext) -> int:
    """How many tasks Spark can run at once now: the most workers a barrier stage can have."""
    try:  # what Spark's own barrier check counts (executors' cores / spark.task.cpus)
        jsc = sc._jsc.sc()  # type: ignore[union-attr]
        profile = jsc.resourceProfileManager().defaultResourceProfile()
        return int(jsc.maxNumConcurrentTasks(profile))
    except Exception:  # the JVM method is internal: count from the master URL instead
        pass
    cpus = int(sc.getConf().get("spark.task.cpus", "1"))
    local = _LOCAL.fullmatch(sc.master)
    if local:
        cores = (os.cpu_count() or 1) if local[1] == "*" else int(local[1] or 1)
        return cores // cpus
    cluster = _LOCAL_CLUSTER.fullmatch(sc.master)
    if cluster:
        return int(cluster[1]) * (int(cluster[2]) // cpus)
    return sc.defaultParallelism // cpus


def check_slots(sc: SparkContext, workers: int, name: str) -> None:
    """Raise TopologyError at once when Spark cannot run ``workers`` tasks at the same time
    (a cluster's executors get a few seconds to register first)."""
    slots = task_slots(sc)
    if slots < workers and not is_local(sc.master):
        deadline = time.monotonic() + _EXECUTOR_WAIT
        pause = threading.Event()
        while slots < workers and time.monotonic() < deadline:
            pause.wait(0.5)
            slots = task_slots(sc)
    if slots < workers:
        raise TopologyError(
            f"topology {name!r} needs {workers} Spark task slots at once (one barrier task per "
            f"worker) but Spark master {sc.master!r} has {slots}: ask for fewer workers "
            f"(workers={slots}) or give Spark more cores (e.g. master='local[{workers}]', or "
            "more executors/executor cores on a cluster)"
        )


def bind_address(host: str) -> str:
    """Where to bind for peers that reach this machine at ``host``: that address itself when
    it is a loopback one (nothing else can reach it anyway), else every interface."""
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return "*"
    if addresses and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses):
        return min(addresses)
    return "*"


def _describe(error: BaseException) -> str:
    """The gist of a failed Spark job on one line: its messages without the stack traces."""
    lines = [
        line.lstrip(": ")
        for line in str(error).splitlines()
        if line.strip() and not line[0].isspace() and not line.startswith("An error")
    ]
    return " | ".join(line[:300] for line in lines[:4]) or repr(error)


def _worker_lost(error: BaseException) -> bool:
    """Whether a failed job lost a worker -- a process or an executor died, which a new
    attempt may not meet again -- rather than Python code in a task raising (it would raise
    again: a module the executors cannot import, a driver they cannot reach)."""
    return "PythonException" not in _describe(error)


class _AttemptFailed(Exception):
    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause


class _Job:
    """One attempt's barrier job, collected in a background thread under its own group."""

    def __init__(self, sc: SparkContext, group: str, description: str, rdd: Any) -> None:
        self.group = group
        self.error: BaseException | None = None
        self.finished = threading.Event()
        self.thread = threading.Thread(
            target=self._run, args=(sc, description, rdd), name=f"{group}:job", daemon=True
        )
        self.thread.start()

    def _run(self, sc: SparkContext, description: str, rdd: Any) -> None:
        try:
            sc.setJobGroup(self.group, description, interruptOnCancel=True)
            rdd.collect()
        except BaseException as exc:
            self.error = exc
        finally:
            self.finished.set()


class SparkRun(ControlledRun):
    """A topology running on Spark (see the module doc).  ``attempt`` is the current attempt
    (1 at first), ``restarts`` says why each earlier one ended, ``worker_info`` what each
    worker of this attempt reported when it started (pid, host, endpoint)."""

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
        try:
            shipped = cloudpickle.dumps((definition, plan.config))
        except Exception as exc:
            raise TopologyError(
                f"topology {plan.name!r} cannot be sent to Spark's executors ({exc})"
            ) from exc
        n = plan.config.num_workers
        self.max_attempts = max_attempts
        self.start_timeout = start_timeout
        self.restarts: list[str] = []
        self._job: _Job | None = None
        self._launching = False
        self.spark, self._owns_session = _session(spark, master, n)
        sc = self.spark.sparkContext
        try:
            check_slots(sc, n, plan.name)
            driver_host = sc.getConf().get("spark.driver.host") or socket.gethostname()
            self.control_endpoint = self._open_control(
                tcp_endpoint(bind_address(driver_host), 0), advertise=driver_host
            )
        except BaseException:
            if self._owns_session:
                self.spark.stop()
            raise
        self._group = f"brokerless-{plan.name}-{uuid.uuid4().hex[:8]}"
        self._groups: list[str] = []  # every attempt's job group
        # a run dropped without stop(): its tasks would serve nobody until the session ends
        self._abandoned = weakref.finalize(
            self, _abandon, sc, self._groups, self._control, self._context
        )
        self._job_template = {
            "topology": shipped,
            "control": self.control_endpoint,
            "key": self._signer.key,
            "capture": capture,
            "driver_timeout": driver_timeout,
            "sys_path": list(sys.path) if is_local(sc.master) else [],
        }
        try:
            self._launch()
        except BaseException:
            self.stop()
            raise

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "running"
        return (
            f"<SparkRun {self.plan.name!r} {state}, {self.workers} worker(s) on "
            f"{self.spark.sparkContext.master}, attempt {self.attempt}>"
        )

    # -- attempts ----------------------------------------------------------------------------

    def _launch(self) -> None:
        """Start attempts until one has every worker running (or attempts run out)."""
        while True:
            self._submit()
            self._launching = True
            try:
                self._wait(
                    lambda: len(self.state.started) == self.workers,
                    self.start_timeout,
                    "the workers to start",
                )
                return
            except _AttemptFailed as failed:
                self._attempt_failed(failed.cause)
            except TimeoutError:
                raise TimeoutError(
                    f"{self.plan.name!r}: {len(self.state.started)} of {self.workers} Spark "
                    f"tasks started within {self.start_timeout:g} s: Spark could not give the "
                    "stage all its slots at once (other jobs running?), or the executors "
                    f"cannot reach the driver at {self.control_endpoint}"
                ) from None
            finally:
                self._launching = False

    def _submit(self) -> None:
        n = self.plan.config.num_workers
        self._new_attempt(n)
        job = dict(self._job_template, attempt=self.attempt)
        sc = self.spark.sparkContext
        rdd = sc.parallelize(range(n), n).barrier().mapPartitions(partial(_task, job))
        group = f"{self._group}-{self.attempt}"
        self._groups.append(group)
        self._job = _Job(
            sc, group, f"brokerless topology {self.plan.name!r}, attempt {self.attempt}", rdd
        )

    def _attempt_failed(self, cause: str) -> None:
        """The current attempt lost a worker: end what is left of it; raise (after stopping)
        when it was the last attempt allowed."""
        self.restarts.append(f"attempt {self.attempt}: {cause}")
        for index in range(self.workers):  # survivors stop now rather than when Spark kills them
            self._send(index, ("stop",))
        job = self._job
        if job is not None and not job.finished.is_set():
            self.spark.sparkContext.cancelJobGroup(job.group)
        if self.attempt >= self.max_attempts:
            self._fail(
                f"topology {self.plan.name!r} on Spark lost a worker in each of its "
                f"{self.attempt} attempt(s) (max_attempts={self.max_attempts}):\n"
                + "\n".join(self.restarts)
            )

    def _fail(self, message: str) -> NoReturn:
        """Stop the run and say why, once."""
        self.stop()
        raise WorkerProcessError(message)

    def _check_alive(self) -> None:
        if self._stopped:  # stopping: whatever happened, stop() finishes the clean-up
            return
        failures = self.state.failures
        if failures:
            index, text = next(iter(failures.items()))
            self._fail(
                f"worker {index} of {self.plan.name!r} on Spark failed (attempt "
                f"{self.attempt}, not retried: it would fail again):\n{text}"
            )
        job = self._job
        if job is not None and job.finished.is_set():
            if job.error is not None and not _worker_lost(job.error):
                self._fail(
                    f"a worker of {self.plan.name!r} on Spark raised (attempt {self.attempt}, "
                    f"not retried: it would raise again):\n{_describe(job.error)}"
                )
            if job.error is not None:
                cause = _describe(job.error)
            else:
                cause = "the Spark job ended while the topology ran (a worker lost the driver?)"
            if self._launching:
                raise _AttemptFailed(cause)
            self._attempt_failed(cause)
            self._launch()
            raise Restarted

    # -- stopping ----------------------------------------------------------------------------

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the workers, collect their final reports, end the Spark job (and the session
        when the run started it)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
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


def _abandon(
    sc: SparkContext, groups: list[str], control: zmq.Socket, context: zmq.Context
) -> None:
    """What stop() would have ended, for a run dropped without it."""
    for group in groups:
        try:
            sc.cancelJobGroup(group)
        except Exception:  # the session has ended: so have its jobs
            pass
    control.close(linger=0)
    context.term()


def _session(
    spark: SparkSession | None, master: str | None, workers: int
) -> tuple[SparkSession, bool]:
    """The session to run on, and whether the run started it (and so stops it)."""
    if spark is not None:
        return spark, False
    if master is None:
        active = SparkSession.getActiveSession()
        if active is not None:
            return active, False
        master = f"local[{workers}]"
    existed = SparkContext._active_spark_context is not None
    session = session_builder(master).getOrCreate()
    if not existed:
        session.sparkContext.setLogLevel("ERROR")
    return session, not existed


# -- the task: one worker -----------------------------------------------------------------------


def _task(job: Mapping[str, Any], _partition: Iterable[int]) -> Iterator[int]:
    """One worker, as one barrier task (see the module doc)."""
    barrier = BarrierTaskContext.get()
    index = barrier.partitionId()
    main_thread = threading.current_thread() is threading.main_thread()
    previous_sigint = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread else None
    added = [p for p in job["sys_path"] if p not in sys.path]
    sys.path[:0] = added
    others = [t.name for t in threading.enumerate() if t is not threading.current_thread()]
    context = zmq.Context()
    channel: WorkerChannel | None = None
    try:
        channel = WorkerChannel(
            context, job["control"], job["key"], job["attempt"], index, job["driver_timeout"]
        )
        try:
            topology, config = pickle.loads(job["topology"])
            plan = topology.build(config)
            n = config.num_workers
            host = barrier.getTaskInfos()[index].address.rsplit(":", 1)[0]
            messaging = (
                SocketMessaging(context, "tcp", host=bind_address(host), advertise=host)
                if n > 1
                else None
            )
            worker = Worker(plan, assign(plan, n), index, messaging, capture=job["capture"])
            endpoint = worker.bind()
        except Exception:
            channel.send(("failed", traceback.format_exc()))
            raise
        try:
            endpoints = barrier.allGather(endpoint)
        except BaseException:  # another task failed the barrier: Spark retries the stage
            worker.stop()  # closes its bound socket, or term() below would wait for it
            raise
        try:
            worker.start(endpoints)
        except Exception:
            worker.stop()
            channel.send(("failed", traceback.format_exc()))
            raise
        serve(
            worker,
            channel,
            started_info(worker, endpoint, attempt=job["attempt"], threads_before=others),
        )
    finally:
        if channel is not None:
            channel.close()
        context.term()
        for path in added:
            if path in sys.path:
                sys.path.remove(path)
        if previous_sigint is not None:
            signal.signal(signal.SIGINT, previous_sigint)
    return iter(())


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
      attempts in all (state comes back by replay from the start: see the module doc);
    * ``start_timeout`` (120 s): how long the workers may take to start;
    * ``driver_timeout`` (15 s): how long a worker goes on without a connection to the driver
      before it stops by itself;
    * ``ui``: serve the live topology UI from the driver, with the attempt history (True: a
      free port on 127.0.0.1; a port; ``"host:port"``; see ``run.ui.url``)."""
    ui = options.pop("ui", None)
    return with_ui(SparkRun(topology, **options), ui)


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
