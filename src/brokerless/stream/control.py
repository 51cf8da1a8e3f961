"""The control channel between a run's driver and workers in other processes (the worker
processes of ``multiprocess.py``, or the barrier tasks of ``brokerless.spark``).

Theory of operation
-------------------
The driver binds a ROUTER; each worker connects a DEALER whose routing id names the run's
*attempt* and the worker's index (``b"<attempt>:<index>"``).  A run that restarts its workers
(Spark) starts a new attempt, and the driver drops whatever still arrives from an older one.
Tuples never travel here -- they go worker to worker -- only:

    worker -> driver                              driver -> worker
    ("ready", endpoint)      virtual port bound   ("start", endpoints)   connect and run
    ("started", info)        running (pid, host)  ("activity", n)        completion counters
    ("activity", n, Activity)                     ("stats", n)           metrics snapshot
    ("stats", n, snapshot)                        ("stop",)              stop and report
    ("events", captured tuples, errors)   as they happen
    ("final", {snapshot, captured, errors, hung})   after stop
    ("failed", traceback)    the worker itself broke (not a component: those are errors)

Messages are pickled and signed with a key only the run knows (HMAC-SHA256; a message that
does not carry a good signature is dropped unread), so a tcp control port open on a network
does not let anyone who can reach it run code in the driver or the workers.

The driver's side is :class:`ControlledRun`: the control loop of a :class:`TopologyRun`
whose workers answer over this channel (questions, completion rounds, the stop handshake);
subclasses say how workers are started and whether they are still alive.  The worker's side
is :class:`WorkerChannel` plus :func:`serve`, the loop a worker runs until told to stop.

A driver that vanishes: the worker's DEALER sends ZMTP heartbeats and watches its connection
(socket monitor).  When it has had no connection to the driver for ``driver_timeout``
seconds -- the driver's process ended, its host is gone, or it closed the run without a
word -- :func:`serve` stops the worker and raises :class:`DriverGone`, so no worker serves a
run nobody is watching.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import brokerless as zmq

from .messaging import tcp_endpoint
from .metrics import ErrorReport, Statistics
from .run import TopologyRun
from .worker import Activity, Worker

_WORKER_POLL = 0.05  # seconds a worker waits for a command before reporting its events
_HEARTBEAT_MS = 1000
_MONITORED = zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED
_MONITOR_HEADER = struct.Struct("=HI")


class WorkerProcessError(RuntimeError):
    """A worker process failed or died."""


class DriverGone(RuntimeError):
    """A worker lost its connection to the driver for longer than it may."""


class Restarted(Exception):
    """(internal) The run replaced its workers while the caller waited: ask again."""


class Signer:
    """Pickles and signs control messages; unpickles only what carries the key's signature.

    The signature covers the worker's routing id (attempt and index) with the payload, so a
    message cannot be passed off as another worker's or another attempt's."""

    def __init__(self, key: bytes) -> None:
        self.key = key

    def _digest(self, identity: bytes, payload: bytes) -> bytes:
        return hmac.digest(self.key, identity + b"\0" + payload, hashlib.sha256)

    def pack(self, message: Any, identity: bytes) -> list[bytes]:
        payload = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
        return [self._digest(identity, payload), payload]

    def unpack(self, frames: list[bytes], identity: bytes) -> Any:
        """The message, or None when ``frames`` is not a message signed with the key for
        ``identity``."""
        if len(frames) != 2:
            return None
        signature, payload = frames
        if not hmac.compare_digest(signature, self._digest(identity, payload)):
            return None
        return pickle.loads(payload)


def new_key() -> bytes:
    return os.urandom(32)


def worker_identity(attempt: int, index: int) -> bytes:
    return b"%d:%d" % (attempt, index)


# -- the driver's side --------------------------------------------------------------------------


@dataclass
class AttemptState:
    """What the driver has heard from the workers of the current attempt."""

    ready: dict[int, str] = field(default_factory=dict)  # index -> virtual port endpoint
    started: dict[int, dict[str, Any]] = field(default_factory=dict)  # index -> info
    replies: dict[tuple[str, int], dict[int, Any]] = field(default_factory=dict)
    finals: dict[int, dict[str, Any]] = field(default_factory=dict)
    captured: list[tuple[str, str, tuple[Any, ...]]] = field(default_factory=list)
    errors: list[ErrorReport] = field(default_factory=list)
    failures: dict[int, str] = field(default_factory=dict)  # index -> traceback


class ControlledRun(TopologyRun):
    """A topology whose workers run in other processes and answer over the control channel.

    Subclasses call :meth:`_open_control` then :meth:`_new_attempt` before starting workers,
    implement :meth:`_check_alive` (raise when a worker is lost; raise :class:`Restarted`
    after replacing the workers) and :meth:`stop` (with :meth:`_stop_workers` and
    :meth:`_close_control`)."""

    poll_interval = 0.01

    def _open_control(self, bind: str, advertise: str | None = None) -> str:
        """Bind the control ROUTER at ``bind``; returns the endpoint workers connect to (with
        ``advertise`` as its host when given)."""
        self._lock = threading.RLock()
        self._signer = Signer(new_key())
        self._context = zmq.Context()
        self._control = self._context.socket(zmq.ROUTER)
        self._control.linger = 0
        self._control.rcvhwm = 0
        self._control.sndhwm = 0
        # A worker that reconnects (after a network hiccup the driver did not notice yet)
        # takes its routing id over from the stale connection, which heartbeats also drop:
        # neither a dead connection nor a stranger holding the id can shut a worker out.
        self._control.router_handover = 1
        self._control.heartbeat_ivl = _HEARTBEAT_MS
        self._control.heartbeat_timeout = 5 * _HEARTBEAT_MS
        self._control.bind(bind)
        self._asked = 0
        self._stopped = False
        self.attempt = 0
        self.workers = 0
        self.state = AttemptState()
        self.hung_threads: list[str] = []  # threads stuck in user code when workers stopped
        endpoint = self._control.getsockopt(zmq.LAST_ENDPOINT).decode()
        if advertise is not None:
            endpoint = tcp_endpoint(advertise, int(endpoint.rsplit(":", 1)[1]))
        return endpoint

    def _new_attempt(self, workers: int) -> None:
        """Forget the previous attempt's workers; from now on only the new ones are heard."""
        self.attempt += 1
        self.epoch = self.attempt
        self.workers = workers
        self.state = AttemptState()

    def _close_control(self) -> None:
        self._control.close(linger=0)
        self._context.term()

    def _check_alive(self) -> None:
        """Raise if a worker is lost (called after every look at the control channel)."""

    @property
    def worker_info(self) -> list[dict[str, Any]]:
        """What each worker of the current attempt said when it started (pid, host, ...)."""
        started = self.state.started
        return [started[i] for i in sorted(started)]

    @property
    def worker_pids(self) -> list[int]:
        return [info["pid"] for info in self.worker_info]

    # -- the control channel -----------------------------------------------------------------

    def _send(self, index: int, message: tuple[Any, ...], attempt: int | None = None) -> None:
        identity = worker_identity(self.attempt if attempt is None else attempt, index)
        self._control.send_multipart([identity, *self._signer.pack(message, identity)])

    def _pump(self, timeout: float) -> None:
        """Handle what the workers sent, waiting up to ``timeout`` seconds for the first."""
        control = self._control
        if control.poll(int(timeout * 1000)):
            current = b"%d" % self.attempt
            while control.poll(0):
                identity, *frames = control.recv_multipart()
                attempt, _, index = identity.partition(b":")
                message = self._signer.unpack(frames, identity)
                if attempt == current and message is not None:
                    self._handle(int(index), message)
        self._check_alive()

    def _handle(self, index: int, message: tuple[Any, ...]) -> None:
        state = self.state
        kind = message[0]
        if kind == "ready":
            state.ready[index] = message[1]
        elif kind == "started":
            state.started[index] = message[1]
        elif kind == "events":
            state.captured += message[1]
            state.errors += message[2]
        elif kind in ("activity", "stats"):
            state.replies.setdefault((kind, message[1]), {})[index] = message[2]
        elif kind == "final":
            final = message[1]
            state.captured += final["captured"]
            state.errors += final["errors"]
            self.hung_threads += final["hung"]
            state.finals[index] = final
        elif kind == "failed":
            state.failures[index] = message[1]

    def _wait(self, done: Callable[[], Any], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{self.plan.name!r}: timed out waiting for {what}")
            self._pump(min(remaining, 0.1))

    def _ask(self, kind: str, timeout: float = 30.0) -> list[Any]:
        """Ask every worker; returns their answers in worker order (all from one attempt)."""
        with self._lock:
            while True:
                self._asked += 1
                key = (kind, self._asked)
                n = self.workers
                for index in range(n):
                    self._send(index, (kind, self._asked))
                try:
                    self._wait(partial(self._answered, key, n), timeout, f"the workers' {kind}")
                except Restarted:
                    continue
                answers = self.state.replies.pop(key)
                return [answers[i] for i in range(n)]

    def _answered(self, key: tuple[str, int], n: int) -> bool:
        return len(self.state.replies.get(key, ())) == n

    def _look(self, seconds: float = 0.0) -> None:
        """Take in what the workers sent (a restart meanwhile is no news to the caller)."""
        with self._lock:
            if self._stopped:
                return
            try:
                self._pump(seconds)
            except Restarted:
                pass

    def _stop_workers(self, running: list[int], timeout: float, alive: Callable[[], bool]) -> None:
        """Ask the ``running`` workers to stop; wait (up to ``timeout`` seconds) for their
        final reports, a failure, or none of them being ``alive()`` any more."""
        for index in running:
            self._send(index, ("stop",))
        deadline = time.monotonic() + timeout
        state = self.state
        while (
            len(state.finals) < len(running)
            and not state.failures
            and time.monotonic() < deadline
            and alive()
        ):
            self._pump(0.1)

    # -- TopologyRun ---------------------------------------------------------------------------

    def activity(self) -> list[Activity]:
        if self._stopped:
            raise RuntimeError(f"topology {self.plan.name!r} is stopped: its workers are gone")
        return self._ask("activity")

    def statistics(self) -> Statistics:
        if self._stopped:
            finals = self.state.finals
            return Statistics.merge(finals[i]["snapshot"] for i in sorted(finals))
        return Statistics.merge(self._ask("stats"))

    def errors(self) -> list[ErrorReport]:
        self._look()
        return list(self.state.errors)

    def captured(self) -> list[tuple[str, str, tuple[Any, ...]]]:
        self._look()
        return list(self.state.captured)

    def _pause(self, seconds: float) -> None:
        self._look(seconds)


# -- the worker's side --------------------------------------------------------------------------


class WorkerChannel:
    """A worker's end of the control channel: a DEALER to the driver, signed messages, and a
    watch on the connection (``driver_timeout`` seconds without one: :class:`DriverGone`;
    None: no watch)."""

    def __init__(
        self,
        context: zmq.Context,
        endpoint: str,
        key: bytes,
        attempt: int,
        index: int,
        driver_timeout: float | None = None,
    ) -> None:
        self.endpoint = endpoint
        self._signer = Signer(key)
        self._driver_timeout = driver_timeout
        control = self._control = context.socket(zmq.DEALER)
        self._identity = worker_identity(attempt, index)
        control.setsockopt(zmq.ROUTING_ID, self._identity)
        control.sndhwm = 0
        control.linger = 0
        self._poller = zmq.Poller()
        self._poller.register(control, zmq.POLLIN)
        self._monitor: zmq.Socket | None = None
        if driver_timeout is not None:
            control.heartbeat_ivl = _HEARTBEAT_MS
            control.heartbeat_timeout = max(_HEARTBEAT_MS, int(driver_timeout * 500))
            self._monitor = control.get_monitor_socket(_MONITORED)
            self._poller.register(self._monitor, zmq.POLLIN)
        self._lost_since: float | None = time.monotonic()  # not connected yet
        control.connect(endpoint)

    def send(self, message: tuple[Any, ...]) -> None:
        self._control.send_multipart(self._signer.pack(message, self._identity))

    def recv(self, timeout: float) -> tuple[Any, ...] | None:
        """The driver's next command, or None after ``timeout`` seconds."""
        ready = dict(self._poller.poll(int(timeout * 1000)))
        if self._monitor is not None:
            if self._monitor in ready:
                while self._monitor.poll(0):
                    header = self._monitor.recv_multipart()[0]
                    event, _ = _MONITOR_HEADER.unpack(header[: _MONITOR_HEADER.size])
                    if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                        self._lost_since = None
                    elif self._lost_since is None:
                        self._lost_since = time.monotonic()
            lost = self._lost_since
            if lost is not None and time.monotonic() - lost > self._driver_timeout:
                raise DriverGone(
                    f"no connection to the driver at {self.endpoint} for "
                    f"{self._driver_timeout:g} s (it has ended, or this host cannot reach it)"
                )
        if self._control in ready:
            while self._control.poll(0):
                command = self._signer.unpack(self._control.recv_multipart(), self._identity)
                if command is not None:
                    return command
        return None

    def close(self, linger: int = 5000) -> None:
        """Close, first giving what was sent up to ``linger`` ms to leave."""
        if self._monitor is not None:
            self._control.disable_monitor()
            self._monitor.close(linger=0)
        self._control.close(linger=linger)


def started_info(worker: Worker, endpoint: str, **extra: Any) -> dict[str, Any]:
    """What a worker tells the driver when it runs: pid, host, virtual port, and the threads
    its process had before the worker started (a reused process should have none of ours)."""
    return {
        "index": worker.index,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "endpoint": endpoint,
        **extra,
    }


def serve(worker: Worker, channel: WorkerChannel, info: dict[str, Any]) -> None:
    """Answer the driver until it says stop (or is gone); then stop the worker and send the
    final report.  A worker already started reports ``started`` at once; otherwise it waits
    for the driver's ``start``."""
    reported = 0

    def events() -> None:
        nonlocal reported
        captured = worker.take_captured()
        errors = worker.errors[reported:]
        if captured or errors:
            reported += len(errors)
            channel.send(("events", captured, errors))

    try:
        if worker.started:
            channel.send(("started", info))
        while True:
            command = channel.recv(_WORKER_POLL)
            if command is not None:
                kind = command[0]
                if kind == "start":
                    worker.start(command[1])
                    channel.send(("started", info))
                elif kind == "activity":
                    channel.send(("activity", command[1], worker.activity()))
                elif kind == "stats":
                    channel.send(("stats", command[1], worker.snapshot()))
                elif kind == "stop":
                    break
            events()
    finally:
        hung = worker.stop()
    channel.send(
        (
            "final",
            {
                "snapshot": worker.snapshot(),
                "captured": worker.take_captured(),
                "errors": worker.errors[reported:],
                "hung": hung,
            },
        )
    )
