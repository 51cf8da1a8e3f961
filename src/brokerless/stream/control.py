"""The control channel between a run's driver and workers in other processes (the worker
processes of ``multiprocess.py``, or the barrier tasks of ``brokerless.spark``).

Theory of operation
-------------------
The driver binds a ROUTER; each worker connects a DEALER.  A worker's *id* names the run's
*attempt*, the worker's index and a random part of its own (``b"<attempt>:<index>:<16 hex
digits>"``).  A run that restarts its workers (Spark) starts a new attempt, and the driver drops
whatever still arrives from an older one.  Tuples never travel here -- they go worker to
worker -- only:

    worker -> driver                              driver -> worker
    ("hello",)               on each connection   ("challenge", nonce)   prove the connection
    ("proof", nonce)         the nonce, signed
    ("ready", endpoint)      virtual port bound   ("start", endpoints)   connect and run
    ("started", info)        running (pid, host)  ("activity", n)        completion counters
    ("activity", n, Activity)                     ("stats", n)           metrics snapshot
    ("stats", n, snapshot)                        ("stop",)              stop and report
    ("events", captured tuples, errors)   as they happen, and what is left after stop
    ("final", {snapshot, hung})   after stop
    ("failed", traceback)    the worker itself broke (not a component: those are errors)

and for a checkpointed topology (``checkpoint.py``):

    ("checkpointed", [TaskAck, ...])  tasks stored   ("checkpoint", id)    inject barriers
    ("lost", why)            a task failed: roll back ("commit", id)        it is complete

*Encryption.*  With ``Config.security == "curve"`` (the default) the channel is CURVE with the
run's keys (``security.py``): the driver's ROUTER admits only the run's workers, so a stranger
fails its handshake and none of what follows is ever in its reach.  The signatures below stay:
they are what holds with ``security="none"``, and they bind each message to a worker's id.

Messages are pickled and signed with a key only the run knows (HMAC-SHA256 over the worker's
id and the payload; a message that does not carry a good signature is dropped unread), so a
tcp control port open on a network does not let anyone who can reach it run code in the driver
or the workers, or pass a message off as another worker's, attempt's or process's.  A worker
sends ``[id, signature, payload]``; the driver sends ``[signature, payload]``, signed for the
id of the worker it is meant for.

*Routes.*  Workers set no routing id: the ROUTER gives each connection one of its own, and has
no ROUTER_HANDOVER, so claiming an id takes no connection over.  The driver sends to worker
``i`` over the connection in ``state.routes[i]``, and only a fresh proof puts a connection
there: on each new connection (the monitor's HANDSHAKE_SUCCEEDED) the worker says ``hello``;
the driver answers that connection with a ``challenge``, a nonce derived from the key and the
connection's routing id; the worker signs it back in a ``proof``; only a proof of the nonce of
the connection it arrives on moves the route.  So a stranger -- without the key, or replaying
a worker's signed messages from its own connection -- never receives a worker's commands nor
cuts a worker off, while a worker that reconnects (or a stage Spark retried with new
processes) proves itself on its new connection and the route follows it.  A command for a
worker without a route (still starting, or its connection gone: ROUTER_MANDATORY says so)
waits in ``state.outbox`` until the worker has proved itself, and when a route moves, the
question the driver is waiting on is asked again on it, since it may have gone down a
connection that was already dead.  Signed messages are taken from any connection, since they
carry their sender's id: nothing a worker reports is lost to a route being proved.  (The one
gap: the routing id of a worker's connection that has just died is free until the worker
proves its next one, and a peer that guessed it -- a counter with a random start -- could
claim it meanwhile and swallow commands; the next proof ends that.)

*Limits.*  No frame may exceed :data:`MAX_FRAME` (MAXMSGSIZE: a peer that sends a larger one is
disconnected as its header arrives), and the driver's socket holds at most ``_RCVHWM``
messages per connection while nobody pumps it (RCVHWM): beyond that the connection is not
read and the backlog waits with its sender -- in a worker's own queue, where nothing is lost,
or in a stranger's kernel buffers.  So a peer makes the driver hold at most ``_RCVHWM``
messages of frames no larger than ``MAX_FRAME``, however much it sends.  A worker splits its
reports into messages of about ``_REPORT_BYTES``; one captured tuple or error larger than
``MAX_FRAME`` is an error.
The driver's SNDHWM bounds what it queues for a connection that reads nothing (a stranger
that was sent challenges): more is dropped, as a ROUTER does.

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
from brokerless.auth.thread import ThreadAuthenticator

from .messaging import tcp_endpoint
from .metrics import ErrorReport, Statistics
from .run import TopologyRun
from .security import RunKeys, admit_only_run, connect_to_run, run_keys, serve_to_run
from .worker import Activity, Worker

_WORKER_POLL = 0.05  # seconds a worker waits for a command before reporting its events
_HEARTBEAT_MS = 1000
#: The largest frame either end of the control channel takes (MAXMSGSIZE).
MAX_FRAME = 4 << 20
_REPORT_BYTES = 1 << 20  # a worker's reports are split into messages of about this size
_RCVHWM = 16  # messages a control socket holds per connection for a reader that is busy
_SNDHWM = 1000  # commands the driver queues for one connection
_MONITORED = zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED
_MONITOR_HEADER = struct.Struct("=HI")


class WorkerProcessError(RuntimeError):
    """A worker process failed or died."""


class DriverGone(RuntimeError):
    """A worker lost its connection to the driver for longer than it may."""


class Signer:
    """Pickles and signs control messages; unpickles only what carries the key's signature.

    The signature covers the worker's id (attempt, index, random part) with the payload, so a
    message cannot be passed off as another worker's, another attempt's or another process's."""

    def __init__(self, key: bytes) -> None:
        self.key = key

    def sign(self, payload: bytes, identity: bytes) -> bytes:
        return hmac.digest(self.key, identity + b"\0" + payload, hashlib.sha256)

    def pack(self, message: Any, identity: bytes) -> list[bytes]:
        payload = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
        return [self.sign(payload, identity), payload]

    def unpack(self, frames: list[bytes], identity: bytes) -> Any:
        """The message, or None when ``frames`` is not a message signed with the key for
        ``identity``."""
        if len(frames) != 2:
            return None
        signature, payload = frames
        if not hmac.compare_digest(signature, self.sign(payload, identity)):
            return None
        return pickle.loads(payload)

    def challenge(self, connection: bytes) -> bytes:
        """The nonce a worker signs to prove that the driver's connection ``connection`` (its
        routing id there) is the worker's own."""
        return hmac.digest(self.key, b"challenge\0" + connection, hashlib.sha256)


def new_key() -> bytes:
    return os.urandom(32)


def worker_identity(attempt: int, index: int) -> bytes:
    """A new id for worker ``index`` of ``attempt``, with a random part of its own."""
    return b"%d:%d:%s" % (attempt, index, os.urandom(8).hex().encode())


def _attempt_and_index(identity: bytes) -> tuple[int, int]:
    """What a worker id (one whose signature was checked) names."""
    attempt, index, _ = identity.split(b":")
    return int(attempt), int(index)


def _limit(sock: zmq.SyncSocket) -> None:
    """The control channel's limits on what ``sock`` takes in (see the module doc)."""
    sock.maxmsgsize = MAX_FRAME
    sock.rcvhwm = _RCVHWM


# -- the driver's side --------------------------------------------------------------------------


@dataclass
class AttemptState:
    """What the driver has heard from the workers of the current attempt."""

    ready: dict[int, str] = field(default_factory=dict)  # index -> virtual port endpoint
    started: dict[int, dict[str, Any]] = field(default_factory=dict)  # index -> info
    replies: dict[tuple[str, int], dict[int, Any]] = field(default_factory=dict)  # to _question
    finals: dict[int, dict[str, Any]] = field(default_factory=dict)
    captured: list[tuple[str, str, tuple[Any, ...]]] = field(default_factory=list)
    errors: list[ErrorReport] = field(default_factory=list)
    failures: dict[int, str] = field(default_factory=dict)  # index -> traceback
    lost: dict[int, str] = field(default_factory=dict)  # index -> why (a checkpointed run's)
    #: index -> (the driver's routing id of the connection the worker proved, its id)
    routes: dict[int, tuple[bytes, bytes]] = field(default_factory=dict)
    outbox: dict[int, list[tuple[Any, ...]]] = field(default_factory=dict)  # no route yet


class ControlledRun(TopologyRun):
    """A topology whose workers run in other processes and answer over the control channel.

    Subclasses call :meth:`_open_control` then :meth:`_new_attempt` before starting workers,
    implement :meth:`_check_alive` (raise when the run cannot go on; a run that replaces its
    workers starts a new attempt there, which the questions waiting for answers notice) and
    :meth:`stop` (with :meth:`_stop_workers` and :meth:`_close_control`), and may say when
    the workers can be asked anything (:meth:`_accepting_questions`).  Whatever uses the
    control socket holds ``_lock``."""

    poll_interval = 0.01

    def _open_control(self, bind: str, advertise: str | None = None) -> str:
        """Bind the control ROUTER at ``bind``; returns the endpoint workers connect to (with
        ``advertise`` as its host when given).  Makes the run's keys: the signing key and,
        unless the plan's config says ``security="none"``, the CURVE keys (``_keys``)."""
        self._lock = threading.RLock()
        self._signer = Signer(new_key())
        self._keys = run_keys(self.plan.config.security)
        self._context = zmq.Context()
        self._authenticator = admit_only_run(self._context, self._keys)
        control = self._control = self._context.socket(zmq.ROUTER)
        serve_to_run(control, self._keys)
        control.linger = 0
        _limit(control)
        control.sndhwm = _SNDHWM
        control.router_mandatory = 1  # a command for a connection that is gone: see _send
        # Heartbeats drop a connection whose worker vanished; the route goes with it.
        control.heartbeat_ivl = _HEARTBEAT_MS
        control.heartbeat_timeout = 5 * _HEARTBEAT_MS
        control.bind(bind)
        self._asked = 0
        self._question: tuple[str, int] | None = None  # what _ask waits for
        self._stopped = False
        self.attempt = 0
        self.workers = 0
        self.state = AttemptState()
        self.hung_threads: list[str] = []  # threads stuck in user code when workers stopped
        endpoint = self._control.last_endpoint.decode()
        if advertise is not None:
            endpoint = tcp_endpoint(advertise, int(endpoint.rsplit(":", 1)[1]))
        return endpoint

    def _new_attempt(self, workers: int, keep_events: bool = False) -> None:
        """Forget the previous attempt's workers; from now on only the new ones are heard.
        ``keep_events``: keep what they reported (captured tuples, errors)."""
        self.attempt += 1
        self.epoch = self.attempt
        self.workers = workers
        previous = self.state
        self.state = AttemptState()
        if keep_events:
            self.state.captured = previous.captured
            self.state.errors = previous.errors

    def _close_control(self) -> None:
        close_control(self._control, self._authenticator, self._context)

    def _check_alive(self) -> None:
        """Raise if the run cannot go on (called after every look at the control channel)."""

    def _accepting_questions(self) -> bool:
        """Whether the current attempt's workers are all there to answer (a run that is
        between attempts is not)."""
        return True

    @property
    def stopped(self) -> bool:
        return self._stopped

    @property
    def worker_info(self) -> list[dict[str, Any]]:
        """What each worker of the current attempt said when it started (pid, host, ...)."""
        started = self.state.started
        return [started[i] for i in sorted(started)]

    @property
    def worker_pids(self) -> list[int]:
        return [info["pid"] for info in self.worker_info]

    # -- the control channel -----------------------------------------------------------------

    def _send(self, index: int, message: tuple[Any, ...]) -> None:
        """Send worker ``index`` a command over the connection it proved is its own, or keep the
        command for it until it has proved one."""
        state = self.state
        route = state.routes.get(index)
        if route is not None:
            connection, identity = route
            try:
                self._control.send_multipart(
                    [connection, *self._signer.pack(message, identity)], zmq.NOBLOCK
                )
                return
            except zmq.Again:
                return  # SNDHWM commands unread: the worker is stuck; dropped, as a ROUTER does
            except zmq.ZMQError as exc:
                if exc.errno != zmq.EHOSTUNREACH:
                    raise
                del state.routes[index]  # that connection is gone: wait for the next one
        state.outbox.setdefault(index, []).append(message)

    def _pump(self, timeout: float) -> None:
        """Handle what the workers sent, waiting up to ``timeout`` seconds for the first."""
        control = self._control
        if control.poll(int(timeout * 1000)):
            while control.poll(0):
                frames = control.recv_multipart()
                if len(frames) == 4:  # connection, worker id, signature, payload
                    self._take(frames[0], frames[1], self._signer.unpack(frames[2:], frames[1]))
        self._check_alive()

    def _take(self, connection: bytes, identity: bytes, message: Any) -> None:
        """A message from ``connection``, signed by worker ``identity`` (None: not signed)."""
        if message is None:
            return
        attempt, index = _attempt_and_index(identity)
        if attempt != self.attempt:
            return
        kind = message[0]
        if kind == "hello":
            if self.state.routes.get(index) != (connection, identity):
                challenge = ("challenge", self._signer.challenge(connection))
                try:
                    self._control.send_multipart(
                        [connection, *self._signer.pack(challenge, identity)], zmq.NOBLOCK
                    )
                except zmq.ZMQError:  # gone already, or reads nothing: it proves nothing
                    pass
        elif kind == "proof":
            if hmac.compare_digest(message[1], self._signer.challenge(connection)):
                self._route(index, connection, identity)
        else:
            self._handle(index, message)

    def _route(self, index: int, connection: bytes, identity: bytes) -> None:
        """Worker ``index`` proved ``connection`` is its own: send it the commands that waited
        for a route, and the open question again if it has not answered (the question may have
        gone down a connection that was already dead)."""
        state = self.state
        if state.routes.get(index) == (connection, identity):
            return
        state.routes[index] = (connection, identity)
        waiting = state.outbox.pop(index, [])
        question = self._question
        if (
            question is not None
            and question not in waiting
            and index not in state.replies.get(question, ())
        ):
            waiting.append(question)
        for command in waiting:
            self._send(index, command)

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
            if (kind, message[1]) == self._question:  # not a late or repeated answer
                state.replies.setdefault(self._question, {})[index] = message[2]
        elif kind == "final":
            final = message[1]
            self.hung_threads += final["hung"]
            state.finals[index] = final
        elif kind == "failed":
            state.failures[index] = message[1]
        elif kind == "checkpointed":
            self._drive_checkpoints(message[1])
        elif kind == "lost":
            state.lost[index] = message[1]

    def _wait(self, done: Callable[[], Any], timeout: float | None, what: str) -> None:
        """Take in what the workers send until ``done()``; TimeoutError after ``timeout``
        seconds (None: :meth:`_check_alive` is what ends a wait that cannot succeed)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not done():
            self._raise_if_stopped(f"it stopped while waiting for {what}")
            remaining = 0.1 if deadline is None else deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{self.plan.name!r}: timed out waiting for {what}")
            self._pump(min(remaining, 0.1))

    def _ask(self, kind: str, timeout: float = 30.0) -> list[Any]:
        """Ask every worker; returns their answers in worker order, all from one attempt (a
        new attempt meanwhile is asked again, once its workers are all there)."""
        with self._lock:
            try:
                while True:
                    self._wait(self._accepting_questions, None, "the workers to start")
                    epoch = self.epoch
                    self._asked += 1
                    key = self._question = (kind, self._asked)
                    n = self.workers
                    for index in range(n):
                        self._send(index, key)
                    self._wait(
                        partial(self._answered, key, n, epoch), timeout, f"the workers' {kind}"
                    )
                    if self.epoch == epoch:
                        answers = self.state.replies.pop(key)
                        return [answers[i] for i in range(n)]
            finally:
                self._question = None

    def _answered(self, key: tuple[str, int], n: int, epoch: int) -> bool:
        """Every worker answered question ``key`` -- or the workers asked are gone."""
        return self.epoch != epoch or len(self.state.replies.get(key, ())) == n

    def _look(self, seconds: float = 0.0) -> None:
        """Take in what the workers sent."""
        with self._lock:
            if not self._stopped:
                self._pump(seconds)

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

    def _raise_if_stopped(self, why: str) -> None:
        """Raise once the run is stopped: what :meth:`_check_alive` raises for a run that
        failed, else RuntimeError saying ``why``."""
        if self._stopped:
            self._check_alive()
            raise RuntimeError(f"topology {self.plan.name!r} is stopped: {why}")

    def activity(self) -> list[Activity]:
        self._raise_if_stopped("its workers are gone")
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

    def _broadcast(self, kind: str, checkpoint: int) -> None:
        for index in range(self.workers):
            self._send(index, (kind, checkpoint))

    def _supervise_once(self) -> None:
        if not self._stopped:
            self._pump(0)
            self._drive_checkpoints(())


def close_control(
    control: zmq.SyncSocket, authenticator: ThreadAuthenticator | None, context: zmq.SyncContext
) -> None:
    """Close the driver's control socket, then its ZAP handler, then its context."""
    control.close(linger=0)
    if authenticator is not None:
        authenticator.stop()
    context.term()


# -- the worker's side --------------------------------------------------------------------------


class WorkerChannel:
    """A worker's end of the control channel: a DEALER to the driver, signed messages, the
    proof that each new connection is this worker's, and a watch on the connection
    (``driver_timeout`` seconds without one: :class:`DriverGone`; None: no watch); CURVE
    with the run's ``keys`` when given."""

    def __init__(
        self,
        context: zmq.SyncContext,
        endpoint: str,
        key: bytes,
        attempt: int,
        index: int,
        driver_timeout: float | None = None,
        keys: RunKeys | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.identity = worker_identity(attempt, index)
        self._signer = Signer(key)
        self._driver_timeout = driver_timeout
        control = self._control = context.socket(zmq.DEALER)
        control.sndhwm = 0  # reports wait here, in the worker, while the driver is busy
        control.linger = 0
        _limit(control)
        connect_to_run(control, keys)
        if driver_timeout is not None:
            control.heartbeat_ivl = _HEARTBEAT_MS
            control.heartbeat_timeout = max(_HEARTBEAT_MS, int(driver_timeout * 500))
        self._monitor = control.get_monitor_socket(_MONITORED)
        self._poller = zmq.Poller()
        self._poller.register(control, zmq.POLLIN)
        self._poller.register(self._monitor, zmq.POLLIN)
        self._lost_since: float | None = time.monotonic()  # not connected yet
        control.connect(endpoint)

    def send(self, message: tuple[Any, ...]) -> None:
        self._send_payload(pickle.dumps(message, pickle.HIGHEST_PROTOCOL))

    def send_events(
        self, captured: list[tuple[str, str, tuple[Any, ...]]], errors: list[ErrorReport]
    ) -> None:
        """Report captured tuples and errors, in as many messages as keep each to about
        ``_REPORT_BYTES``."""
        payload = pickle.dumps(("events", captured, errors), pickle.HIGHEST_PROTOCOL)
        count = len(captured) + len(errors)
        if len(payload) <= _REPORT_BYTES or count == 1:
            self._send_payload(payload)
            return
        half = count // 2
        cut = max(0, half - len(captured))  # the errors that go with the first half
        self.send_events(captured[:half], errors[:cut])
        self.send_events(captured[half:], errors[cut:])

    def _send_payload(self, payload: bytes) -> None:
        if len(payload) > MAX_FRAME:
            raise ValueError(
                f"a control message of {len(payload)} bytes is larger than the control channel "
                f"carries ({MAX_FRAME}): a captured tuple or an error report that big?"
            )
        identity = self.identity
        self._control.send_multipart([identity, self._signer.sign(payload, identity), payload])

    def recv(self, timeout: float) -> tuple[Any, ...] | None:
        """The driver's next command, or None after ``timeout`` seconds."""
        ready = dict(self._poller.poll(int(timeout * 1000)))
        if self._monitor in ready:
            while self._monitor.poll(0):
                header = self._monitor.recv_multipart()[0]
                event, _ = _MONITOR_HEADER.unpack(header[: _MONITOR_HEADER.size])
                if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                    self._lost_since = None
                    self.send(("hello",))  # a new connection: the driver asks for a proof
                elif self._lost_since is None:
                    self._lost_since = time.monotonic()
        lost = self._lost_since
        if (
            self._driver_timeout is not None
            and lost is not None
            and time.monotonic() - lost > self._driver_timeout
        ):
            raise DriverGone(
                f"no connection to the driver at {self.endpoint} for "
                f"{self._driver_timeout:g} s (it has ended, or this host cannot reach it)"
            )
        if self._control in ready:
            while self._control.poll(0):
                # the driver's commands are tuples (signed: no one else's get this far)
                command: tuple[Any, ...] | None = self._signer.unpack(
                    self._control.recv_multipart(), self.identity
                )
                if command is None:
                    continue
                if command[0] == "challenge":
                    self.send(("proof", command[1]))
                    continue
                return command
        return None

    def close(self, linger: int = 5000) -> None:
        """Close, first giving what was sent up to ``linger`` ms to leave."""
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
            channel.send_events(captured, errors)

    checkpoints = worker.checkpoints
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
                elif kind == "checkpoint":
                    worker.checkpoint(command[1])
                elif kind == "commit":
                    worker.commit(command[1])
                elif kind == "stop":
                    break
            events()
            if checkpoints is not None:
                acks = checkpoints.take_acks()
                if acks:
                    channel.send(("checkpointed", acks))
                if worker.failure is not None:  # the run rolls back
                    channel.send(("lost", worker.failure))
                    break
    finally:
        hung = worker.stop()
    events()
    channel.send(("final", {"snapshot": worker.snapshot(), "hung": hung}))
