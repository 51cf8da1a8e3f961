"""A Spark standalone cluster on this machine for the ``cluster`` tests: a Master and Workers
started from pyspark's own ``bin/spark-class``, everything on 127.0.0.1 with ports the JVMs
choose (``--port 0``), each process's log kept in a file of its own.

Nothing here sleeps to wait: a reader thread follows each JVM's log and the caller waits on the
line that says it is up (the master's URL, a worker's registration), with a deadline.  ``stop``
ends every process the cluster started -- the JVMs and, through /proc, their children (the
executors a Worker launched, and their Python workers) -- and says which, if any, outlived it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
from collections.abc import Iterable
from pathlib import Path

import pyspark

from .processes import descendants, gone
from .stream_topologies import wait_for

SPARK_HOME = str(Path(pyspark.__file__).resolve().parent)
_MASTER_URL = re.compile(r"Starting Spark master at (spark://\S+)")
_REGISTERED = re.compile(r"Successfully registered with master")
_LOOPBACK = ("--host", "127.0.0.1", "--port", "0", "--webui-port", "0")  # ports: the JVM's choice


class ClusterError(RuntimeError):
    """A JVM of the cluster did not come up, or outlived ``stop``."""


class Daemon:
    """One JVM started from ``spark-class``, its log followed line by line."""

    def __init__(self, name: str, args: list[str], log: Path, env: dict[str, str]) -> None:
        self.name = name
        self.log = log
        self._lines: list[str] = []
        self._changed = threading.Condition()
        self._ended = False
        self.process = subprocess.Popen(
            [f"{SPARK_HOME}/bin/spark-class", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            text=True,
            start_new_session=True,  # a terminal's Ctrl-C is the test's to handle
        )
        self._reader = threading.Thread(target=self._follow, name=f"log:{name}", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def _follow(self) -> None:
        assert self.process.stdout is not None
        with self.log.open("w") as out:
            for line in self.process.stdout:
                out.write(line)
                out.flush()
                with self._changed:
                    self._lines.append(line)
                    self._changed.notify_all()
        with self._changed:
            self._ended = True
            self._changed.notify_all()

    def wait_for(self, pattern: re.Pattern[str], timeout: float) -> re.Match[str]:
        """The first log line that matches ``pattern`` (waiting up to ``timeout`` seconds)."""
        seen = 0

        def found() -> re.Match[str] | None:
            nonlocal seen
            for line in self._lines[seen:]:
                seen += 1
                match = pattern.search(line)
                if match:
                    return match
            return None

        with self._changed:
            match = self._changed.wait_for(lambda: found() or self._ended, timeout)
        if isinstance(match, re.Match):
            return match
        state = "exited" if self._ended else f"still nothing after {timeout:g} s"
        raise ClusterError(
            f"{self.name}: no line matching {pattern.pattern!r} ({state}); see {self.log}"
        )

    def kill(self) -> set[int]:
        """SIGKILL the JVM; returns the processes it had started (they are orphans now)."""
        children = descendants(self.pid)
        self.process.kill()
        self.process.wait()
        return children


class StandaloneCluster:
    """A Master (``start_master``) and Workers (``start_worker``; ``kill_worker`` for failures)
    whose logs go to ``directory``; ``stop`` ends everything (a context manager).  The
    environment is what an installation on each node would give its executors: the Python to
    run (``python``) and where it finds brokerless (``python_path``)."""

    def __init__(self, directory: Path, *, python_path: Iterable[str], python: str) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.env = dict(
            os.environ,
            SPARK_HOME=SPARK_HOME,
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOG_DIR=str(directory),
            SPARK_WORKER_DIR=str(directory / "work"),
            # What a worker node's installation gives its executors' Python: this brokerless.
            PYSPARK_PYTHON=python,
            PYTHONPATH=os.pathsep.join(python_path),
        )
        self.env.pop("SPARK_CONF_DIR", None)
        self.daemons: list[Daemon] = []
        self.orphans: set[int] = set()  # processes of killed Workers
        self.workers: list[Daemon] = []
        self.url = ""

    def start_master(self, timeout: float = 120) -> str:
        """Start the Master; returns its URL once it listens."""
        master = self._start("master", ["org.apache.spark.deploy.master.Master", *_LOOPBACK])
        self.url = master.wait_for(_MASTER_URL, timeout)[1]
        return self.url

    def _start(self, name: str, args: list[str]) -> Daemon:
        log = self.directory / f"{len(self.daemons) + 1:02d}-{name}.log"
        daemon = Daemon(name, args, log, self.env)
        self.daemons.append(daemon)
        return daemon

    def start_worker(self, cores: int = 1, memory: str = "1g", timeout: float = 120) -> Daemon:
        """Start a Worker and wait until the master has registered it."""
        worker = self._start(
            f"worker{len(self.workers)}",
            [
                "org.apache.spark.deploy.worker.Worker",
                *_LOOPBACK,
                *("--cores", str(cores), "--memory", memory),
                *("--work-dir", str(self.directory / "work"), self.url),
            ],
        )
        worker.wait_for(_REGISTERED, timeout)
        self.workers.append(worker)
        return worker

    def kill_worker(self, worker: Daemon) -> set[int]:
        """SIGKILL a Worker JVM and the executor it ran (as if its machine died)."""
        children = worker.kill()
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.orphans |= children
        return children

    def processes(self) -> set[int]:
        """Every process the cluster started that is still alive, descendants included."""
        pids = set(self.orphans)
        for daemon in self.daemons:
            pids.add(daemon.pid)
            pids |= descendants(daemon.pid)
        return {pid for pid in pids if not gone(pid)}

    def stop(self, timeout: float = 60) -> None:
        """End every JVM (SIGTERM, then SIGKILL after ``timeout``) and their children; raise
        ClusterError naming any process still alive after that."""
        running = self.processes()
        for daemon in reversed(self.daemons):
            if daemon.process.poll() is None:
                daemon.process.terminate()
        for daemon in self.daemons:
            try:
                daemon.process.wait(timeout)
            except subprocess.TimeoutExpired:
                daemon.process.kill()
                daemon.process.wait()
        for pid in running:
            if not gone(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        try:  # SIGKILL is delivered at once; the kernel takes a moment to end a big JVM
            wait_for(lambda: all(gone(pid) for pid in running), timeout, "the cluster to end")
        except AssertionError:
            left = sorted(pid for pid in running if not gone(pid))
            raise ClusterError(f"processes outlived the cluster: {left}") from None

    def __enter__(self) -> StandaloneCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
