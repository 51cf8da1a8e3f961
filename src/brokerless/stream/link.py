"""A worker's link to the other workers: its sender thread and its receiver thread.

Theory of operation
-------------------
The sender thread drains the worker's transfer queue (what its executors' outboxes handed over
for other workers: ``(worker, task frame, payload)``), groups what it took by destination and
sends each group as one batch ``[task, payload, task, payload, ...]`` through the messaging
(``messaging.py``); a ``(None, None, endpoints)`` item in the queue makes it send what came
before and then reconnect (``Worker.refresh``).  The receiver thread reads batches from the
worker's virtual port, checks each pair against the executor it is for (``inbound.py``),
queues what passes without ever waiting (its room was reserved by credits, see ``worker.py``)
and releases the credits that came back.  A pair that fails the checks is dropped and counted
(``bad_messages``); the first from each sender is reported, up to ``_MAX_BAD_SENDERS`` senders.

The counters ``sent``, ``received`` and ``handled`` (transfer-queue items the sender is done
with) are bumped only after the work they count, for the completion detector (``run.py``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from .inbound import BadMessage, Inbound
from .messaging import Messaging
from .protocol import MAX_BATCH, WORKER_TASK
from .queues import BoundedQueue, Shutdown
from .transfer import Credits

log = logging.getLogger("brokerless.stream")

_RECV_WAIT = 0.05  # seconds the receiver waits before rechecking for stop
_MAX_BAD_SENDERS = 64  # senders whose first bad message is reported (all are counted)


class Link:
    """The sender and receiver threads of worker ``index`` (see the module doc)."""

    def __init__(
        self,
        index: int,
        messaging: Messaging,
        transfer: BoundedQueue,
        inbound: Inbound,
        credits: Credits,
        record_error: Callable[[str, int, BaseException], None],
    ) -> None:
        self.index = index
        self.messaging = messaging
        self.transfer = transfer
        self.inbound = inbound
        self.credits = credits
        self.record_error = record_error
        self.sent = 0  # pairs sent to other workers
        self.received = 0  # pairs received from other workers (and accepted)
        self.bad_messages = 0  # pairs (or malformed batches) received and dropped
        self.handled = 0  # transfer-queue items sent (or acted on)
        self.stopping = False  # the receiver stops at its next look
        self._bad_senders: set[str] = set()  # those whose first bad message was reported

    def threads(self, name: str) -> list[threading.Thread]:
        """The sender and receiver threads (not started), named after ``name``."""
        return [
            threading.Thread(target=self._send_loop, name=f"{name}:send", daemon=True),
            threading.Thread(target=self._receive_loop, name=f"{name}:recv", daemon=True),
        ]

    def _send_loop(self) -> None:
        messaging = self.messaging
        take = self.transfer.take
        try:
            while True:
                items = take(MAX_BATCH)
                batches: dict[int, list[bytes]] = {}
                for worker, frame, payload in items:
                    if worker is None:  # refresh: send what came before, then reconnect
                        self._flush(batches)
                        messaging.connect(payload)
                        continue
                    frames = batches.get(worker)
                    if frames is None:
                        frames = batches[worker] = []
                    frames.append(frame)
                    frames.append(payload)
                self._flush(batches)
                self.handled += len(items)
        except Shutdown:
            pass

    def _flush(self, batches: dict[int, list[bytes]]) -> None:
        send = self.messaging.send
        for worker, frames in batches.items():
            send(worker, frames)
            self.sent += len(frames) >> 1
        batches.clear()

    def _receive_loop(self) -> None:
        recv = self.messaging.recv
        try:
            while not self.stopping:
                batch = recv(_RECV_WAIT)
                if batch is not None:
                    try:
                        self.deliver(*batch)
                    except Shutdown:
                        raise
                    except Exception as exc:  # a bug: report it, keep receiving
                        log.exception("worker %d: a received batch broke delivery", self.index)
                        self.record_error("__worker", WORKER_TASK, exc)
        except Shutdown:
            pass

    def deliver(self, sender: str, frames: list[bytes]) -> None:
        """Route one batch from another worker to the tasks' queues (never waits): what
        passes the checks (``inbound.py``) is queued, the rest counted and reported."""
        accepted = self.inbound.read(frames)
        if accepted.credits:
            release = self.credits.release
            for executor, count in accepted.credits:
                release(executor, count)
        for queue, items in accepted.items.items():
            queue.push_many(items)
        self.received += accepted.pairs
        if accepted.bad:
            self._bad(sender, accepted.bad)

    def _bad(self, sender: str, reasons: list[str]) -> None:
        """Count bad messages; report the first from each sender (up to _MAX_BAD_SENDERS)."""
        self.bad_messages += len(reasons)
        senders = self._bad_senders
        if sender in senders or len(senders) > _MAX_BAD_SENDERS:
            return
        senders.add(sender)
        if len(senders) > _MAX_BAD_SENDERS:
            text = (
                f"bad messages from more than {_MAX_BAD_SENDERS} senders: from now on "
                "they are only counted (bad_messages)"
            )
        else:
            text = (
                f"dropped a bad message from {sender}: {reasons[0]} (its next ones are "
                "only counted: bad_messages)"
            )
        self.record_error("__worker", WORKER_TASK, BadMessage(text))


class _Idle:
    """The counters of a worker with no link (alone: nothing to send or receive)."""

    sent = received = bad_messages = handled = 0


#: What ``Worker`` reads in place of a link it does not have.
NO_LINK = _Idle()
