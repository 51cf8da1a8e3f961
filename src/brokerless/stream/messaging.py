"""How batches of ``[task id, payload]`` pairs travel between workers.

Theory of operation
-------------------
A worker's messaging has one job: carry a batch (a list of frames) from this worker's sender
thread to another worker's receiver thread, in order.  Start-up is two-phase so that workers
started by someone else (a Spark barrier stage) can plug in: ``bind()`` opens the worker's
*virtual port* and returns its endpoint; once every worker's endpoint is known,
``connect(endpoints)`` (indexed by worker) opens the way to each other worker.  Calling
``connect`` again with changed endpoints refreshes only the connections that changed.

Two implementations:

* :class:`LocalMessaging` -- in-memory queues between workers of one process (local mode with
  several workers; no sockets).  Batches are still serialized, so local mode exercises the
  same path as separate processes.
* :class:`SocketMessaging` -- brokerless sockets over ipc or tcp: each worker binds one PULL
  (its virtual port) and connects one PUSH per other worker; a batch is one multipart message.

Threading: ``send`` is called only by the worker's sender thread, ``recv`` only by its
receiver thread, ``connect`` by the sender thread once running; ``interrupt`` (any thread)
makes a blocked ``send``/``recv`` give up soon, after which ``close`` releases everything.
"""

from __future__ import annotations

import itertools
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence

import brokerless as zmq

from .queues import BoundedQueue, Shutdown

_POLL_MS = 50  # how often a blocked send rechecks for interrupt


class Messaging(ABC):
    @abstractmethod
    def bind(self) -> str:
        """Open this worker's virtual port; returns the endpoint other workers connect to."""

    @abstractmethod
    def connect(self, endpoints: Sequence[str]) -> None:
        """Connect to every worker's endpoint (index = worker); again to refresh."""

    @abstractmethod
    def send(self, worker: int, frames: list[bytes]) -> None:
        """Send one batch to ``worker`` (waits while the way there is full)."""

    @abstractmethod
    def recv(self, timeout: float) -> list[bytes] | None:
        """The next batch for this worker, or None after ``timeout`` seconds."""

    @abstractmethod
    def interrupt(self) -> None:
        """Make blocked and later send/recv calls raise Shutdown."""

    @abstractmethod
    def close(self) -> None:
        """Release everything (after the sender and receiver threads have ended)."""


class LocalNetwork:
    """The in-memory "network" between the workers of one process."""

    def __init__(self) -> None:
        self.inboxes: dict[str, BoundedQueue] = {}
        self._ids = itertools.count()

    def new_endpoint(self) -> str:
        return f"local://{next(self._ids)}"


class LocalMessaging(Messaging):
    def __init__(self, network: LocalNetwork) -> None:
        self._network = network
        self._endpoint = ""
        self._inbox = BoundedQueue()
        self._peers: list[BoundedQueue] = []

    def bind(self) -> str:
        self._endpoint = self._network.new_endpoint()
        self._network.inboxes[self._endpoint] = self._inbox
        return self._endpoint

    def connect(self, endpoints: Sequence[str]) -> None:
        self._peers = [self._network.inboxes[e] for e in endpoints]

    def send(self, worker: int, frames: list[bytes]) -> None:
        self._peers[worker].push(frames)

    def recv(self, timeout: float) -> list[bytes] | None:
        batch = self._inbox.take(1, timeout)
        return batch[0] if batch else None

    def interrupt(self) -> None:
        self._inbox.close()

    def close(self) -> None:
        self._network.inboxes.pop(self._endpoint, None)


def tcp_endpoint(host: str, port: int) -> str:
    """``tcp://host:port`` (an IPv6 address in brackets)."""
    return f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"


class SocketMessaging(Messaging):
    """Brokerless PUSH/PULL sockets over ``ipc`` (in ``directory``) or ``tcp``.  On tcp the
    virtual port binds on ``host`` (``"*"``: every interface) and is announced as
    ``advertise`` when given: the address other machines reach this one at."""

    def __init__(
        self,
        context: zmq.Context,
        transport: str = "ipc",
        directory: str | None = None,
        host: str = "127.0.0.1",
        advertise: str | None = None,
    ) -> None:
        if transport not in ("ipc", "tcp"):
            raise ValueError(f"transport must be 'ipc' or 'tcp', not {transport!r}")
        if transport == "ipc" and not directory:
            raise ValueError("ipc transport needs a directory for the socket files")
        self._context = context
        self._transport = transport
        self._directory = directory
        self._host = host
        self._advertise = advertise
        self._pull: zmq.Socket | None = None
        self._endpoint = ""
        self._pushes: dict[int, tuple[str, zmq.Socket]] = {}
        self._interrupted = False

    def bind(self) -> str:
        pull = self._context.socket(zmq.PULL)
        pull.linger = 0
        if self._transport == "ipc":
            address = f"ipc://{self._directory}/worker-{os.getpid()}-{id(self):x}"
        else:
            address = f"tcp://{self._host}:0"
        pull.bind(address)
        self._pull = pull
        endpoint = pull.getsockopt(zmq.LAST_ENDPOINT).decode()
        if self._transport == "tcp" and self._advertise is not None:
            endpoint = tcp_endpoint(self._advertise, int(endpoint.rsplit(":", 1)[1]))
        self._endpoint = endpoint
        return endpoint

    def connect(self, endpoints: Sequence[str]) -> None:
        for worker, endpoint in enumerate(endpoints):
            current = self._pushes.get(worker)
            if endpoint == self._endpoint or (current is not None and current[0] == endpoint):
                continue
            if current is not None:
                current[1].close(linger=0)
            push = self._context.socket(zmq.PUSH)
            push.linger = 0
            push.sndtimeo = _POLL_MS
            push.connect(endpoint)
            self._pushes[worker] = (endpoint, push)
        for worker in [w for w in self._pushes if w >= len(endpoints)]:
            self._pushes.pop(worker)[1].close(linger=0)

    def send(self, worker: int, frames: list[bytes]) -> None:
        push = self._pushes[worker][1]
        while True:
            if self._interrupted:
                raise Shutdown
            try:
                push.send_multipart(frames)
                return
            except zmq.Again:
                continue

    def recv(self, timeout: float) -> list[bytes] | None:
        if self._interrupted:
            raise Shutdown
        pull = self._pull
        if pull.poll(max(0, int(timeout * 1000))):
            return pull.recv_multipart()
        return None

    def interrupt(self) -> None:
        self._interrupted = True

    def close(self) -> None:
        for _, push in self._pushes.values():
            push.close(linger=0)
        self._pushes.clear()
        if self._pull is not None:
            self._pull.close(linger=0)
            self._pull = None
