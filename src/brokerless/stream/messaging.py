"""How batches of ``[task id, payload]`` pairs travel between workers.

Theory of operation
-------------------
A worker's messaging has one job: carry a batch (a list of frames) from this worker's sender
thread to another worker's receiver thread, in order.  Start-up is two-phase so that workers
started by someone else (a Spark barrier stage) can plug in: ``bind()`` opens the worker's
*virtual port* and returns its endpoint; once every worker's endpoint is known,
``connect(endpoints)`` (indexed by worker) opens the way to each other worker.  Calling
``connect`` again with changed endpoints refreshes only the connections that changed.
``recv`` gives each batch with its *sender*: a name for the connection it came from, so that
the receiver can tell one peer's bad messages from another's (see ``inbound.py``).

Two implementations:

* :class:`LocalMessaging` -- in-memory queues between workers of one process (local mode with
  several workers; no sockets).  Batches are still serialized, so local mode exercises the
  same path as separate processes.
* :class:`SocketMessaging` -- brokerless sockets over ipc or tcp: each worker binds one ROUTER
  (its virtual port: the routing id names the connection a batch came from) and connects one
  DEALER per other worker; a batch is one multipart message.  The virtual port is open to
  whoever reaches it, so it bounds what a peer can make it hold: MAXMSGSIZE (the largest
  tuple plus its header, in a packed part of its own) and an RCVHWM of
  :data:`VIRTUAL_PORT_RCVHWM` batches per connection.
  Given the run's keys, every connection is CURVE and the port admits only the run's key
  (``security.py``); the port's ZAP handler lives and ends with it.  A batch travels *packed*:
  its frames as msgpack arrays of binaries, in as few frames as MAXMSGSIZE allows
  (:func:`pack`, :func:`unpack`; one call into msgpack's C code each way).  Every frame costs
  the ZMTP codec's Python on both sides and, over CURVE, a box (a MAC, a nonce, a call into
  libsodium): a few frames per batch rather than two per pair (BENCHMARKS.md, *Stream layer*).

Threading: ``send`` is called only by the worker's sender thread, ``recv`` only by its
receiver thread, ``connect`` by the sender thread once running; ``interrupt`` (any thread)
makes a blocked ``send``/``recv`` give up soon, after which ``close`` releases everything.
"""

from __future__ import annotations

import itertools
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence

import msgpack

import brokerless as zmq
from brokerless.auth.thread import ThreadAuthenticator

from .queues import BoundedQueue, Shutdown
from .security import RunKeys, admit_only_run, connect_to_run, serve_to_run
from .serializer import packer

_POLL_MS = 50  # how often a blocked send rechecks for interrupt
#: Batches (of up to MAX_BATCH pairs) the virtual port holds per connection before that
#: sender waits: enough to keep the receiver busy, while the credit window bounds tuples.
VIRTUAL_PORT_RCVHWM = 64
#: A peer connection only sends; whatever arrives on it is a stranger's and is kept small.
PEER_MAXMSGSIZE = 1024
PEER_RCVHWM = 16
_ARRAY_HEAD = _BIN_HEAD = 5  # the most bytes a msgpack array's or binary's header takes
#: What a packed part adds to the frames in it, at most: its own header and one per frame.
PACKING_ROOM = _ARRAY_HEAD + _BIN_HEAD


class Messaging(ABC):
    @abstractmethod
    def bind(self, max_frame: int) -> str:
        """Open this worker's virtual port, which takes frames of at most ``max_frame``
        bytes; returns the endpoint other workers connect to."""

    @abstractmethod
    def connect(self, endpoints: Sequence[str]) -> None:
        """Connect to every worker's endpoint (index = worker); again to refresh."""

    @abstractmethod
    def send(self, worker: int, frames: list[bytes]) -> None:
        """Send one batch to ``worker`` (waits while the way there is full)."""

    @abstractmethod
    def recv(self, timeout: float) -> tuple[str, list[bytes]] | None:
        """The next batch for this worker with its sender (who sent it: a worker's endpoint,
        or a connection's routing id), or None after ``timeout`` seconds."""

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

    def bind(self, max_frame: int) -> str:
        self._endpoint = self._network.new_endpoint()
        self._network.inboxes[self._endpoint] = self._inbox
        return self._endpoint

    def connect(self, endpoints: Sequence[str]) -> None:
        self._peers = [self._network.inboxes[e] for e in endpoints]

    def send(self, worker: int, frames: list[bytes]) -> None:
        self._peers[worker].push((self._endpoint, frames))

    def recv(self, timeout: float) -> tuple[str, list[bytes]] | None:
        batch = self._inbox.take(1, timeout)
        return batch[0] if batch else None

    def interrupt(self) -> None:
        self._inbox.close()

    def close(self) -> None:
        self._network.inboxes.pop(self._endpoint, None)


def tcp_endpoint(host: str, port: int) -> str:
    """``tcp://host:port`` (an IPv6 address in brackets)."""
    return f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"


def pack(frames: Sequence[bytes], limit: int) -> list[bytes]:
    """``frames`` packed into as few msgpack arrays of at most ``limit`` bytes as greedy
    filling gives (a frame of up to ``limit - PACKING_ROOM`` bytes always fits in a part of
    its own)."""
    to_msgpack = packer()
    if sum(map(len, frames)) + _BIN_HEAD * len(frames) + _ARRAY_HEAD <= limit:
        return [to_msgpack(frames)]  # the common case: the whole batch in one part
    parts: list[bytes] = []
    current: list[bytes] = []
    size = _ARRAY_HEAD
    for frame in frames:
        if current and size + _BIN_HEAD + len(frame) > limit:
            parts.append(to_msgpack(current))
            current = []
            size = _ARRAY_HEAD
        current.append(frame)
        size += _BIN_HEAD + len(frame)
    parts.append(to_msgpack(current))
    return parts


def unpack(parts: Sequence[bytes]) -> list[bytes]:
    """The frames :func:`pack` packed into ``parts``; parts that are not a packing come back
    as they are (a batch that does not make pairs: the receiver's checks drop it)."""
    frames: list[bytes] = []
    for part in parts:
        try:
            packed = msgpack.unpackb(part)
        except Exception:
            return list(parts)
        if packed.__class__ is not list or not {*map(type, packed)} <= {bytes}:
            return list(parts)
        frames += packed
    return frames


class SocketMessaging(Messaging):
    """Brokerless DEALER/ROUTER sockets over ``ipc`` (in ``directory``) or ``tcp``.  On tcp the
    virtual port binds on ``host`` (``"*"``: every interface) and is announced as
    ``advertise`` when given: the address other machines reach this one at.  ``keys``: the
    run's CURVE keys (None: no encryption, anyone may connect)."""

    def __init__(
        self,
        context: zmq.SyncContext,
        transport: str = "ipc",
        directory: str | None = None,
        host: str = "127.0.0.1",
        advertise: str | None = None,
        keys: RunKeys | None = None,
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
        self._keys = keys
        self._authenticator: ThreadAuthenticator | None = None
        self._port: zmq.SyncSocket | None = None
        self._endpoint = ""
        self._peers: dict[int, tuple[str, zmq.SyncSocket]] = {}
        self._interrupted = False
        self._part_limit = 0  # the largest packed part (see the module doc), set by bind()

    def bind(self, max_frame: int) -> str:
        port = self._context.socket(zmq.ROUTER)
        port.linger = 0
        self._part_limit = max_frame + PACKING_ROOM  # a frame of max_frame fits in a part alone
        port.maxmsgsize = self._part_limit
        port.rcvhwm = VIRTUAL_PORT_RCVHWM
        serve_to_run(port, self._keys)
        self._port = port  # close() closes it, and the ZAP handler, whatever happens next
        self._authenticator = admit_only_run(self._context, self._keys)
        if self._transport == "ipc":
            address = f"ipc://{self._directory}/worker-{os.getpid()}-{id(self):x}"
        else:
            address = f"tcp://{self._host}:0"
        port.bind(address)
        endpoint = port.last_endpoint.decode()
        if self._transport == "tcp" and self._advertise is not None:
            endpoint = tcp_endpoint(self._advertise, int(endpoint.rsplit(":", 1)[1]))
        self._endpoint = endpoint
        return endpoint

    def connect(self, endpoints: Sequence[str]) -> None:
        for worker, endpoint in enumerate(endpoints):
            current = self._peers.get(worker)
            if endpoint == self._endpoint or (current is not None and current[0] == endpoint):
                continue
            if current is not None:
                current[1].close(linger=0)
            peer = self._context.socket(zmq.DEALER)
            peer.linger = 0
            peer.sndtimeo = _POLL_MS
            peer.maxmsgsize = PEER_MAXMSGSIZE
            peer.rcvhwm = PEER_RCVHWM
            connect_to_run(peer, self._keys)
            peer.connect(endpoint)
            self._peers[worker] = (endpoint, peer)
        for worker in [w for w in self._peers if w >= len(endpoints)]:
            self._peers.pop(worker)[1].close(linger=0)

    def send(self, worker: int, frames: list[bytes]) -> None:
        peer = self._peers[worker][1]
        frames = pack(frames, self._part_limit)
        while True:
            if self._interrupted:
                raise Shutdown
            try:
                peer.send_multipart(frames)
                return
            except zmq.Again:
                continue

    def recv(self, timeout: float) -> tuple[str, list[bytes]] | None:
        if self._interrupted:
            raise Shutdown
        port = self._port
        assert port is not None, "bind() comes first"
        if port.poll(max(0, int(timeout * 1000))):
            routing_id, *frames = port.recv_multipart()
            return f"peer {routing_id.hex()}", unpack(frames)
        return None

    def interrupt(self) -> None:
        self._interrupted = True

    def close(self) -> None:
        for _, peer in self._peers.values():
            peer.close(linger=0)
        self._peers.clear()
        if self._port is not None:
            self._port.close(linger=0)
            self._port = None
        if self._authenticator is not None:
            self._authenticator.stop()
            self._authenticator = None
