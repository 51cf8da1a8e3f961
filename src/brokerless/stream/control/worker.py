"""A worker's side of the control channel: :class:`WorkerChannel` and :func:`serve`, the loop
a worker runs until told to stop (see the package doc)."""

from __future__ import annotations

import os
import pickle
import socket
import time
from collections import deque
from typing import Any

import brokerless as zmq

from ..errorlog import ErrorReport
from ..security import RunKeys, connect_to_run
from ..worker import Worker
from .wire import (
    HEARTBEAT_MS,
    MAX_FRAME,
    MONITOR_HEADER,
    MONITORED,
    REPORT_BYTES,
    WORKER_POLL,
    DriverGone,
    Kind,
    Signer,
    limit,
    worker_identity,
)


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
        limit(control)
        connect_to_run(control, keys)
        if driver_timeout is not None:
            control.heartbeat_ivl = HEARTBEAT_MS
            control.heartbeat_timeout = max(HEARTBEAT_MS, int(driver_timeout * 500))
        self._announced: list[bytes] = []  # what announce() sent: said again on reconnection
        #: (number, payload) of each events message the driver has not said it has (TAKEN):
        #: said again on reconnection too.  What it has is dropped here: the driver keeps it.
        self._reported: deque[tuple[int, bytes]] = deque()
        self._events_sent = 0
        self._reannounce = False  # a connection was lost since the last handshake
        self._monitor = control.get_monitor_socket(MONITORED)
        self._poller = zmq.Poller()
        self._poller.register(control, zmq.POLLIN)
        self._poller.register(self._monitor, zmq.POLLIN)
        self._lost_since: float | None = time.monotonic()  # not connected yet
        control.connect(endpoint)

    def send(self, message: tuple[Any, ...]) -> None:
        self._send_payload(pickle.dumps(message, pickle.HIGHEST_PROTOCOL))

    def announce(self, message: tuple[Any, ...]) -> None:
        """Send ``message`` now, and again on the next connection whenever one to the driver
        is lost: what the driver must hear (``ready``, ``started``) whatever becomes of the
        connection it left on -- a message in flight when a connection breaks is lost, as with
        any ZeroMQ socket.  The driver takes a repeat as it took the first."""
        payload = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
        self._announced.append(payload)
        self._send_payload(payload)

    def send_events(
        self,
        captured: list[tuple[str, str, tuple[Any, ...]]],
        errors: list[tuple[int, ErrorReport]],
    ) -> None:
        """Report captured tuples and errors (each with its number in the worker's log), in
        as many messages as keep each to about ``REPORT_BYTES``, numbered, and said again on
        the next connection whenever one is lost (as ``announce`` does: the driver keeps each
        once, in order)."""
        number = self._events_sent
        payload = pickle.dumps((Kind.EVENTS, number, captured, errors), pickle.HIGHEST_PROTOCOL)
        count = len(captured) + len(errors)
        if len(payload) <= REPORT_BYTES or count == 1:
            self._send_payload(payload)  # (first: it refuses a message too large to send)
            self._reported.append((number, payload))
            self._events_sent += 1
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
                event, _ = MONITOR_HEADER.unpack(header[: MONITOR_HEADER.size])
                if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                    self._lost_since = None
                    self.send((Kind.HELLO,))  # a new connection: the driver asks for a proof
                    if self._reannounce:
                        self._reannounce = False
                        for payload in self._announced:
                            self._send_payload(payload)
                        for _, payload in self._reported:
                            self._send_payload(payload)
                else:  # disconnected
                    self._reannounce = True
                    if self._lost_since is None:
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
                if command[0] == Kind.CHALLENGE:
                    self.send((Kind.PROOF, command[1]))
                    continue
                if command[0] == Kind.TAKEN:  # the driver has every events message below n
                    reported = self._reported
                    while reported and reported[0][0] < command[1]:
                        reported.popleft()
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
    reported = 0  # the number of the next error report to ship

    def events() -> None:
        nonlocal reported
        captured = worker.take_captured()
        errors = worker.errors.since(reported)  # (what was dropped meanwhile: only counted)
        if captured or errors:
            if errors:
                reported = errors[-1][0] + 1
            channel.send_events(captured, errors)

    checkpoints = worker.checkpoints
    beat = time.monotonic()  # the last heartbeat: one a second, once started
    try:
        if worker.started:
            channel.announce((Kind.STARTED, info))
        while True:
            if worker.started and time.monotonic() - beat >= HEARTBEAT_MS / 1000:
                beat = time.monotonic()
                channel.send((Kind.HEARTBEAT,))
            command = channel.recv(WORKER_POLL)
            if command is not None:
                kind = command[0]
                if kind == Kind.START:
                    worker.start(command[1])
                    channel.announce((Kind.STARTED, info))
                elif kind == Kind.ACTIVITY:
                    channel.send((Kind.ACTIVITY, command[1], worker.activity()))
                elif kind == Kind.STATS:
                    channel.send((Kind.STATS, command[1], worker.snapshot()))
                elif kind == Kind.CHECKPOINT:
                    worker.checkpoint(command[1])
                elif kind == Kind.COMMIT:
                    worker.commit(command[1])
                elif kind == Kind.ACTIVE:
                    worker.set_active(command[1] is True)
                elif kind == Kind.STOP:
                    break
            events()
            if checkpoints is not None:
                acks = checkpoints.take_acks()
                if acks:
                    channel.send((Kind.CHECKPOINTED, acks))
                if worker.failure is not None:  # the run rolls back
                    channel.send((Kind.LOST, worker.failure))
                    break
    finally:
        hung = worker.stop()
    events()
    channel.send((Kind.FINAL, {"snapshot": worker.snapshot(), "hung": hung}))
