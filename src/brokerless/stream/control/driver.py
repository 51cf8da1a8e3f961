"""The driver's side of the control channel: :class:`ControlledRun` (see the package doc)."""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import brokerless as zmq
from brokerless.auth.thread import ThreadAuthenticator

from ..checkpoint import Step
from ..errorlog import ErrorList, ErrorLog, ErrorReport
from ..messaging import tcp_endpoint
from ..run import TopologyRun
from ..security import admit_only_run, run_keys, serve_to_run
from ..statistics import Statistics
from ..worker import Activity
from .wire import (
    HEARTBEAT_MS,
    SNDHWM,
    Kind,
    Signer,
    attempt_and_index,
    limit,
    new_key,
)


@dataclass
class AttemptState:
    """What the driver has heard from the workers of the current attempt."""

    ready: dict[int, str] = field(default_factory=dict)  # index -> virtual port endpoint
    started: dict[int, dict[str, Any]] = field(default_factory=dict)  # index -> info
    replies: dict[tuple[Kind, int], dict[int, Any]] = field(default_factory=dict)  # to _question
    finals: dict[int, dict[str, Any]] = field(default_factory=dict)
    captured: list[tuple[str, str, tuple[Any, ...]]] = field(default_factory=list)
    #: the run's: each task's latest reports, of this attempt and the earlier ones
    errors: ErrorLog = field(default_factory=ErrorLog)
    failures: dict[int, str] = field(default_factory=dict)  # index -> traceback
    lost: dict[int, str] = field(default_factory=dict)  # index -> why (a checkpointed run's)
    #: index -> (the driver's routing id of the connection the worker proved, its id)
    routes: dict[int, tuple[bytes, bytes]] = field(default_factory=dict)
    outbox: dict[int, list[tuple[Any, ...]]] = field(default_factory=dict)  # no route yet
    heard: dict[int, int] = field(default_factory=dict)  # index -> signed messages taken
    heard_at: dict[int, float] = field(default_factory=dict)  # index -> when (monotonic)
    proved: dict[int, int] = field(default_factory=dict)  # index -> connections it proved
    #: index -> the number of its next events message; its later ones that came first
    events_next: dict[int, int] = field(default_factory=dict)
    events_early: dict[int, dict[int, tuple[list[Any], list[tuple[int, ErrorReport]]]]] = field(
        default_factory=dict
    )
    #: index -> the number (in the worker's log) of the error report after the last taken
    errors_next: dict[int, int] = field(default_factory=dict)

    def take_events(
        self,
        index: int,
        number: int,
        captured: list[Any],
        errors: list[tuple[int, ErrorReport]],
    ) -> None:
        """Events message ``number`` of worker ``index``: kept in the order the worker sent
        them, each once (a worker says them all again on a new connection, since some may
        have been lost with the old one).  A gap in the numbers of its error reports is the
        ones it dropped before it shipped them (it keeps only each task's latest): counted."""
        expected = self.events_next.get(index, 0)
        if number < expected:
            return  # a repeat
        early = self.events_early.setdefault(index, {})
        early[number] = (captured, errors)
        while expected in early:
            more_captured, more_errors = early.pop(expected)
            self.captured += more_captured
            for seq, report in more_errors:
                self.errors.add(report, dropped=seq - self.errors_next.get(index, 0))
                self.errors_next[index] = seq + 1
            expected += 1
        self.events_next[index] = expected

    def silent(self, index: int) -> str:
        """What was heard of worker ``index`` (for an error about one that said too little)."""
        heard = self.heard.get(index, 0)
        if not heard:
            return f"worker {index}: never heard from"
        return (
            f"worker {index}: {heard} message(s), {self.proved.get(index, 0)} connection(s) proved"
        )


class ControlledRun(TopologyRun):
    """A topology whose workers run in other processes and answer over the control channel.

    Subclasses call :meth:`_open_control` then :meth:`_new_attempt` before starting workers,
    implement :meth:`_check_alive` (raise when the run cannot go on, or note that the attempt
    lost a worker; it never waits: what starts the next attempt is the run's supervisor, and
    the questions waiting for answers notice the new attempt and ask it again) and
    :meth:`stop` (with :meth:`_stop_workers` and :meth:`_close_control`), and may say when
    the workers can be asked anything (:meth:`_accepting_questions`).  Whatever uses the
    control socket holds ``_lock``."""

    poll_interval = 0.01

    def _open_control(self, bind: str, advertise: str | None = None) -> str:
        """Bind the control ROUTER at ``bind``; returns the endpoint workers connect to (with
        ``advertise`` as its host when given).  Makes the run's keys: the signing key and,
        unless the plan's config says ``security="none"``, the CURVE keys (``_keys``)."""
        self._lock = threading.RLock()
        #: Notified when the run's supervisor has moved it on (a new attempt's workers all run,
        #: say); whoever waits for the workers sleeps on it, the lock let go (``_wait``).
        self._attempt_changed = threading.Condition(self._lock)
        self._signer = Signer(new_key())
        self._keys = run_keys(self.plan.config.security)
        self._context = zmq.Context()
        self._authenticator = admit_only_run(self._context, self._keys)
        control = self._control = self._context.socket(zmq.ROUTER)
        serve_to_run(control, self._keys)
        control.linger = 0
        limit(control)
        control.sndhwm = SNDHWM
        control.router_mandatory = 1  # a command for a connection that is gone: see _send
        # Heartbeats drop a connection whose worker vanished; the route goes with it.
        control.heartbeat_ivl = HEARTBEAT_MS
        control.heartbeat_timeout = 5 * HEARTBEAT_MS
        control.bind(bind)
        self._asked = 0
        #: When the driver last took in what the workers sent, and since when it has done so
        #: every few seconds: a worker is silent only for as long as the driver listened.
        self._looked_at = self._listening_since = time.monotonic()
        self._question: tuple[Kind, int] | None = None  # what _ask waits for
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
        Their errors are kept (each task's latest, as Storm keeps a component's across its
        workers' restarts); ``keep_events``: their captured tuples too."""
        self.attempt += 1
        self.epoch = self.attempt
        self.workers = workers
        previous = self.state
        self.state = AttemptState(errors=previous.errors)
        if keep_events:
            self.state.captured = previous.captured

    def _close_control(self) -> None:
        """The end of a stop: the control socket closed, the run no longer registered."""
        close_control(self._control, self._authenticator, self._context)
        self._unregister()

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

    def _silent_for(self, index: int, now: float) -> float:
        """How long the driver has listened without hearing from started worker ``index``."""
        return now - max(self.state.heard_at[index], self._listening_since)

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
        now = time.monotonic()
        if now - self._looked_at > 2 * HEARTBEAT_MS / 1000:
            # Nobody looked for a while (nothing asked, or this process was paused: its I/O
            # thread may not have read the heartbeats yet): silence so far proves nothing.
            self._listening_since = now
        self._looked_at = now
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
        attempt, index = attempt_and_index(identity)
        if attempt != self.attempt:
            return
        heard = self.state.heard
        heard[index] = heard.get(index, 0) + 1
        self.state.heard_at[index] = time.monotonic()
        kind = message[0]
        if kind == Kind.HELLO:
            if self.state.routes.get(index) != (connection, identity):
                challenge = (Kind.CHALLENGE, self._signer.challenge(connection))
                try:
                    self._control.send_multipart(
                        [connection, *self._signer.pack(challenge, identity)], zmq.NOBLOCK
                    )
                except zmq.ZMQError:  # gone already, or reads nothing: it proves nothing
                    pass
        elif kind == Kind.PROOF:
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
        state.proved[index] = state.proved.get(index, 0) + 1
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
        if kind == Kind.READY:
            state.ready[index] = message[1]
        elif kind == Kind.STARTED:
            state.started[index] = message[1]
            if not self.active:  # (a worker of a later attempt: deactivated as the rest)
                self._send(index, (Kind.ACTIVE, False))
        elif kind == Kind.EVENTS:
            state.take_events(index, message[1], message[2], message[3])
            # The worker keeps each events message until told it was taken (to say it again
            # on a new connection); it may let go of what came in order.
            self._send(index, (Kind.TAKEN, state.events_next[index]))
        elif kind in (Kind.ACTIVITY, Kind.STATS):
            if (kind, message[1]) == self._question:  # not a late or repeated answer
                state.replies.setdefault(self._question, {})[index] = message[2]
        elif kind == Kind.FINAL:
            final = message[1]
            self.hung_threads += final["hung"]
            state.finals[index] = final
        elif kind == Kind.FAILED:
            state.failures[index] = message[1]
        elif kind == Kind.CHECKPOINTED:
            self._drive_checkpoints(message[1])
        elif kind == Kind.LOST:
            state.lost[index] = message[1]

    def _wait(self, done: Callable[[], Any], timeout: float | None, what: str) -> None:
        """Take in what the workers send until ``done()``; TimeoutError after ``timeout``
        seconds (None: :meth:`_check_alive` is what ends a wait that cannot succeed).  Between
        looks the lock is let go, so that the run's supervisor moves the attempts on."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while True:
                self._raise_failure()  # the supervisor's: it will not move the run on
                self._raise_if_stopped(f"it stopped while waiting for {what}")
                self._pump(0)
                if done():
                    return
                remaining = self.poll_interval if deadline is None else deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"{self.plan.name!r}: timed out waiting for {what}")
                self._attempt_changed.wait(min(remaining, self.poll_interval))

    def _ask(self, kind: Kind, timeout: float = 30.0) -> list[Any]:
        """Ask every worker; returns their answers in worker order, all from one attempt (a
        new attempt meanwhile is asked again, once its workers are all there)."""
        with self._lock:
            try:
                while True:
                    self._await_attempt()
                    epoch = self.epoch
                    self._asked += 1
                    key = self._question = (kind, self._asked)
                    n = self.workers
                    for index in range(n):
                        self._send(index, key)
                    self._wait(
                        partial(self._answered, key, n, epoch), timeout, f"the workers' {kind}"
                    )
                    answers = self.state.replies.pop(key, {})
                    if self.epoch == epoch and len(answers) == n:
                        return [answers[i] for i in range(n)]
            finally:
                self._question = None

    def _await_attempt(self) -> None:
        """Until the current attempt's workers are all there to answer (the lock let go
        meanwhile: whatever starts the next attempt, the run's supervisor, needs it)."""
        self._wait(self._accepting_questions, None, "the workers to start")

    def _answered(self, key: tuple[Kind, int], n: int, epoch: int) -> bool:
        """Every worker answered question ``key`` -- or the workers asked are gone."""
        return (
            self.epoch != epoch
            or not self._accepting_questions()
            or len(self.state.replies.get(key, ())) == n
        )

    def _look(self, seconds: float = 0.0) -> None:
        """Take in what the workers sent."""
        with self._lock:
            if not self._stopped:
                self._pump(seconds)

    def _stop_workers(self, running: list[int], timeout: float, alive: Callable[[], bool]) -> None:
        """Ask the ``running`` workers to stop; wait (up to ``timeout`` seconds) for their
        final reports, a failure, or none of them being ``alive()`` any more."""
        for index in running:
            self._send(index, (Kind.STOP,))
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
            self._raise_failure()
            self._check_alive()
            raise RuntimeError(f"topology {self.plan.name!r} is stopped: {why}")

    def activity(self) -> list[Activity]:
        self._raise_if_stopped("its workers are gone")
        return self._ask(Kind.ACTIVITY)

    def statistics(self) -> Statistics:
        if self._stopped:
            finals = self.state.finals
            return Statistics.merge(finals[i]["snapshot"] for i in sorted(finals))
        return Statistics.merge(self._ask(Kind.STATS))

    def errors(self) -> ErrorList:
        self._look()
        return self.state.errors.reports()

    def captured(self) -> list[tuple[str, str, tuple[Any, ...]]]:
        self._look()
        return list(self.state.captured)

    def _pause(self, seconds: float) -> None:
        self._look(seconds)

    def _tell_active(self) -> None:
        with self._lock:
            for index in range(self.workers):
                self._send(index, (Kind.ACTIVE, self.active))

    def _broadcast(self, step: Step, checkpoint: int) -> None:
        for index in range(self.workers):
            self._send(
                index, (Kind.CHECKPOINT if step is Step.CHECKPOINT else Kind.COMMIT, checkpoint)
            )

    def _supervise_once(self) -> None:
        if not self._stopped:
            self._pump(0)
            if self._coordinator is not None:
                self._drive_checkpoints(())


def close_control(
    control: zmq.SyncSocket, authenticator: ThreadAuthenticator | None, context: zmq.SyncContext
) -> None:
    """Close the driver's control socket, then its ZAP handler, then its context."""
    control.close(linger=0)
    if authenticator is not None:
        authenticator.stop()
    context.term()
