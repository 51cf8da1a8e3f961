"""Multi-process mode: N worker processes on this machine, over ipc or tcp.

Theory of operation
-------------------
The driver (:class:`MultiprocessRun`, in the caller's process) binds a ROUTER on an ipc path
in a private temporary directory -- the *control* channel -- and starts N processes of
``python -m brokerless.stream worker``.  Each reads its job from its stdin (the topology,
pickled, or a ``module:attr`` reference; the config; its index), builds the same plan and the
same assignment as every other worker, connects a DEALER to the control channel, binds its
virtual port and reports ``ready`` with the endpoint.  When all are ready the driver sends
everyone the list of endpoints (``start``); that is the two-phase start-up a Spark barrier
stage will reuse.  From then on tuples go worker to worker; the control channel only carries
questions (``activity`` rounds for completion, ``stats``), the worker's errors and -- when
capturing -- the tuples it emitted, and at the end ``stop`` and each worker's ``final``
report.  Control messages are pickled (the driver only talks to processes it started, over a
socket in a directory only its user can enter).

No orphans: a worker keeps its stdin open and exits at once when it reaches end-of-file, which
happens when the driver process ends for any reason, even SIGKILL.  Workers ignore SIGINT: on
Ctrl-C the driver stops them.  ``stop()`` asks each worker to stop and report, waits for the
processes to exit, and kills any that do not.
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import weakref
from importlib import import_module
from pathlib import Path
from typing import Any

import brokerless as zmq

from .assignment import assign
from .config import Config
from .messaging import SocketMessaging
from .metrics import ErrorReport, Statistics
from .run import TopologyRun, plan_for
from .topology import Topology, TopologyError
from .worker import Activity, Worker

_PACKAGE_ROOT = str(Path(zmq.__file__).resolve().parent.parent)
_LENGTH = struct.Struct("!Q")
_WORKER_POLL_MS = 50


class WorkerProcessError(RuntimeError):
    """A worker process failed or died."""


def load_topology(reference: str) -> Topology:
    """``"package.module:name"`` -> the Topology it names (or that calling it returns)."""
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise TopologyError(f"topology reference {reference!r} must look like 'module:name'")
    found: Any = getattr(import_module(module_name), attribute)
    if not isinstance(found, Topology) and callable(found):
        found = found()
    if not isinstance(found, Topology):
        raise TopologyError(f"{reference!r} is a {type(found).__name__}, not a Topology")
    return found


class MultiprocessRun(TopologyRun):
    """A topology running in worker processes (see the module doc)."""

    poll_interval = 0.01

    def __init__(
        self,
        topology: Topology | str,
        *,
        workers: int | None = None,
        transport: str = "ipc",
        config: Config | None = None,
        capture: bool = False,
        start_timeout: float = 60.0,
    ) -> None:
        if transport not in ("ipc", "tcp"):
            raise ValueError(f"transport must be 'ipc' or 'tcp', not {transport!r}")
        definition = load_topology(topology) if isinstance(topology, str) else topology
        self.plan = plan = plan_for(definition, workers, config)  # mistakes show up here
        if isinstance(topology, str):
            shipped: Any = topology
        else:
            try:
                shipped = pickle.dumps(topology)
            except Exception as exc:
                raise TopologyError(
                    f"topology {plan.name!r} cannot be sent to worker processes ({exc}): "
                    "define its spouts, bolts and factories at module level (no lambdas), "
                    "or pass a 'module:name' reference"
                ) from exc
        self.transport = transport
        n = plan.config.num_workers
        self._lock = threading.RLock()
        self._directory = tempfile.mkdtemp(prefix="brokerless-stream-")
        self._context = zmq.Context()
        self._control = self._context.socket(zmq.ROUTER)
        self._control.linger = 0
        self._control.rcvhwm = 0
        control = f"ipc://{self._directory}/control"
        self._control.bind(control)
        self._endpoints: dict[int, str] = {}
        self._started: set[int] = set()
        self._replies: dict[tuple[str, int], dict[int, Any]] = {}
        self._finals: dict[int, dict[str, Any]] = {}
        self._captured: list[tuple[str, str, tuple[Any, ...]]] = []
        self._errors: list[ErrorReport] = []
        self._failures: dict[int, str] = {}
        self._asked = 0
        self._stopped = False
        self.hung_threads: list[str] = []  # threads stuck in user code when workers stopped
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [_PACKAGE_ROOT, *filter(None, [env.get("PYTHONPATH")])]
        )
        self.processes: list[subprocess.Popen[bytes]] = []
        self._finalizer = weakref.finalize(self, _kill, self.processes, self._directory)
        try:
            for index in range(n):
                process = subprocess.Popen(
                    [sys.executable, "-m", "brokerless.stream", "worker"],
                    stdin=subprocess.PIPE, env=env,
                )
                self.processes.append(process)
                job = {"index": index, "topology": shipped, "config": plan.config,
                       "transport": transport, "directory": self._directory,
                       "control": control, "capture": capture, "sys_path": list(sys.path)}
                data = pickle.dumps(job)
                process.stdin.write(_LENGTH.pack(len(data)) + data)
                process.stdin.flush()
            self._wait(lambda: len(self._endpoints) == n, start_timeout, "workers to bind")
            endpoints = [self._endpoints[i] for i in range(n)]
            for index in range(n):
                self._send(index, ("start", endpoints))
            self._wait(lambda: len(self._started) == n, start_timeout, "workers to start")
        except BaseException:
            self.stop()
            raise

    def __repr__(self) -> str:
        state = "stopped" if self._stopped else "running"
        return (f"<MultiprocessRun {self.plan.name!r} {state}, {len(self.processes)} "
                f"worker process(es) over {self.transport}>")

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    # -- the control channel -----------------------------------------------------------------

    def _send(self, index: int, message: tuple[Any, ...]) -> None:
        self._control.send_multipart([b"w%d" % index, pickle.dumps(message)])

    def _pump(self, timeout: float) -> None:
        """Handle what the workers sent, waiting up to ``timeout`` seconds for the first."""
        control = self._control
        if not control.poll(int(timeout * 1000)):
            self._check_alive()
            return
        while control.poll(0):
            identity, payload = control.recv_multipart()
            self._handle(int(identity[1:]), pickle.loads(payload))
        self._check_alive()

    def _handle(self, index: int, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "ready":
            self._endpoints[index] = message[1]
        elif kind == "started":
            self._started.add(index)
        elif kind == "events":
            self._captured += message[1]
            self._errors += message[2]
        elif kind in ("activity", "stats"):
            self._replies.setdefault((kind, message[1]), {})[index] = message[2]
        elif kind == "final":
            final = message[1]
            self._captured += final["captured"]
            self._errors += final["errors"]
            self.hung_threads += final["hung"]
            self._finals[index] = final
        elif kind == "failed":
            self._failures[index] = message[1]

    def _check_alive(self) -> None:
        if self._stopped:  # stopping: whatever happened, stop() finishes the clean-up
            return
        if self._failures:
            index, text = next(iter(self._failures.items()))
            raise WorkerProcessError(f"worker {index} of {self.plan.name!r} failed:\n{text}")
        for index, process in enumerate(self.processes):
            code = process.poll()
            if code is not None:
                raise WorkerProcessError(
                    f"worker {index} of {self.plan.name!r} (pid {process.pid}) exited with "
                    f"code {code}"
                )

    def _wait(self, done: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{self.plan.name!r}: timed out waiting for {what}")
            self._pump(min(remaining, 0.1))

    def _ask(self, kind: str, timeout: float = 30.0) -> list[Any]:
        """Ask every worker; returns their answers in worker order."""
        with self._lock:
            self._asked += 1
            key = (kind, self._asked)
            for index in range(len(self.processes)):
                self._send(index, (kind, self._asked))
            n = len(self.processes)
            self._wait(lambda: len(self._replies.get(key, ())) == n, timeout,
                       f"the workers' {kind}")
            answers = self._replies.pop(key)
            return [answers[i] for i in range(n)]

    # -- TopologyRun ---------------------------------------------------------------------------

    def activity(self) -> list[Activity]:
        return self._ask("activity")

    def statistics(self) -> Statistics:
        if self._stopped:
            return Statistics.merge(f["snapshot"] for _, f in sorted(self._finals.items()))
        return Statistics.merge(self._ask("stats"))

    def errors(self) -> list[ErrorReport]:
        with self._lock:
            if not self._stopped:
                self._pump(0)
            return list(self._errors)

    def captured(self) -> list[tuple[str, str, tuple[Any, ...]]]:
        with self._lock:
            if not self._stopped:
                self._pump(0)
            return list(self._captured)

    def _pause(self, seconds: float) -> None:
        with self._lock:
            self._pump(seconds)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the workers, collect their final reports, end the processes."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            try:
                running = [i for i, p in enumerate(self.processes) if p.poll() is None]
                for index in running:
                    self._send(index, ("stop",))
                deadline = time.monotonic() + timeout
                while (len(self._finals) < len(running) and not self._failures
                       and time.monotonic() < deadline
                       and any(p.poll() is None for p in self.processes)):
                    self._pump(0.1)
                for process in self.processes:
                    try:
                        process.wait(max(0.1, deadline - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        pass
            finally:
                self._finalizer()
                self._control.close(linger=0)
                self._context.term()


def _kill(processes: list[subprocess.Popen[bytes]], directory: str) -> None:
    """End worker processes still running and remove the run's directory."""
    for process in processes:
        if process.poll() is None:
            process.kill()
        if process.stdin is not None:
            try:
                process.stdin.close()
            except OSError:
                pass
        process.wait()
    shutil.rmtree(directory, ignore_errors=True)


def run_multiprocess(
    topology: Topology | str,
    *,
    workers: int | None = None,
    transport: str = "ipc",
    config: Config | None = None,
    capture: bool = False,
) -> MultiprocessRun:
    """Start ``topology`` (a Topology whose components are importable, or a ``"module:name"``
    reference) in ``workers`` processes talking over ``transport`` ("ipc" or "tcp");
    returns the running topology (a context manager).  ``config`` replaces the topology's
    own, ``workers`` overrides its ``num_workers``; ``capture`` gathers every emitted tuple
    in this process (``captured()``)."""
    return MultiprocessRun(topology, workers=workers, transport=transport, config=config,
                           capture=capture)


# -- the worker process -------------------------------------------------------------------------


def _read_exactly(fd: int, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            raise EOFError("the driver closed the job pipe")
        data += chunk
    return data


def worker_main(stdin_fd: int = 0) -> int:
    """The body of ``python -m brokerless.stream worker``: run one worker as its job (read
    from stdin) says, until the driver says stop or goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver handles Ctrl-C
    (length,) = _LENGTH.unpack(_read_exactly(stdin_fd, _LENGTH.size))
    job = pickle.loads(_read_exactly(stdin_fd, length))
    sys.path[:0] = [p for p in job["sys_path"] if p not in sys.path]
    stopping = threading.Event()

    def orphaned() -> None:  # stdin ends when the driver's process ends
        while os.read(stdin_fd, 4096):
            pass
        if not stopping.is_set():  # the driver died: its clean-up will not run
            shutil.rmtree(job["directory"], ignore_errors=True)
            os._exit(3)

    threading.Thread(target=orphaned, name="driver-watch", daemon=True).start()
    context = zmq.Context()
    control = context.socket(zmq.DEALER)
    control.setsockopt(zmq.ROUTING_ID, b"w%d" % job["index"])
    control.sndhwm = 0
    control.connect(job["control"])
    try:
        return _serve(job, context, control, stopping)
    except Exception:
        control.send_pyobj(("failed", traceback.format_exc()))
        return 1
    finally:
        stopping.set()
        control.close(linger=5000)
        context.term()


def _serve(job: dict[str, Any], context: zmq.Context, control: zmq.Socket,
           stopping: threading.Event) -> int:
    shipped = job["topology"]
    topology = load_topology(shipped) if isinstance(shipped, str) else pickle.loads(shipped)
    config: Config = job["config"]
    plan = topology.build(config)
    n = config.num_workers
    messaging = (SocketMessaging(context, job["transport"], job["directory"]) if n > 1
                 else None)
    worker = Worker(plan, assign(plan, n), job["index"], messaging, capture=job["capture"])
    control.send_pyobj(("ready", worker.bind()))
    reported = 0

    def events() -> None:
        nonlocal reported
        captured = worker.take_captured()
        errors = worker.errors[reported:]
        if captured or errors:
            reported += len(errors)
            control.send_pyobj(("events", captured, errors))

    try:
        while True:
            if control.poll(_WORKER_POLL_MS):
                command = control.recv_pyobj()
                kind = command[0]
                if kind == "start":
                    worker.start(command[1])
                    control.send_pyobj(("started",))
                elif kind == "activity":
                    control.send_pyobj(("activity", command[1], worker.activity()))
                elif kind == "stats":
                    control.send_pyobj(("stats", command[1], worker.snapshot()))
                elif kind == "stop":
                    break
            events()
    finally:
        stopping.set()
        hung = worker.stop()
    control.send_pyobj(("final", {
        "snapshot": worker.snapshot(),
        "captured": worker.take_captured(),
        "errors": worker.errors[reported:],
        "hung": hung,
    }))
    return 0
