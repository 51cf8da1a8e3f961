"""The control channel's wire: signed messages, the workers' ids, the limits on what either
end takes in (see the package doc)."""

from __future__ import annotations

import hashlib
import hmac
import os
import pickle
import struct
from typing import Any

import brokerless as zmq
from brokerless._strenum import StrEnum

WORKER_POLL = 0.05  # seconds a worker waits for a command before reporting its events
HEARTBEAT_MS = 1000  # ZMTP heartbeats on the control channel; a worker's HEARTBEAT as often
#: The largest frame either end of the control channel takes (MAXMSGSIZE).
MAX_FRAME = 4 << 20
REPORT_BYTES = 1 << 20  # a worker's reports are split into messages of about this size
RCVHWM = 16  # messages a control socket holds per connection for a reader that is busy
SNDHWM = 1000  # commands the driver queues for one connection
MONITORED = zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED
MONITOR_HEADER = struct.Struct("=HI")


class Kind(StrEnum):
    """What a control message is: its first item (see the package doc for each one's fields
    and direction).  ``ACTIVITY`` and ``STATS`` go both ways: the question, then each answer."""

    # worker -> driver
    HELLO = "hello"
    PROOF = "proof"
    READY = "ready"
    STARTED = "started"
    EVENTS = "events"
    FINAL = "final"
    FAILED = "failed"
    CHECKPOINTED = "checkpointed"
    LOST = "lost"
    HEARTBEAT = "heartbeat"
    # driver -> worker
    CHALLENGE = "challenge"
    START = "start"
    STOP = "stop"
    CHECKPOINT = "checkpoint"
    COMMIT = "commit"
    ACTIVE = "active"
    TAKEN = "taken"
    # both ways
    ACTIVITY = "activity"
    STATS = "stats"


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


def attempt_and_index(identity: bytes) -> tuple[int, int]:
    """What a worker id (one whose signature was checked) names."""
    attempt, index, _ = identity.split(b":")
    return int(attempt), int(index)


def limit(sock: zmq.SyncSocket) -> None:
    """The control channel's limits on what ``sock`` takes in (see the module doc)."""
    sock.maxmsgsize = MAX_FRAME
    sock.rcvhwm = RCVHWM
