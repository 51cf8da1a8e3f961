"""Acknowledged ingestion: a sender that keeps every message until the receiver says it is on
disk, and the receiver's record of what it has (no Spark import: the sender runs anywhere).

ZeroMQ alone loses what is in a kernel's buffers or on the wire when a connection breaks.  The
Guide's chapter 4 ("Reliable Request-Reply Patterns") answers that in user space: the client
keeps what it sent and sends it again when no reply comes in time or after it reconnects (the
Lazy Pirate), the server replies only once the request is stored on disk (Titanic), and a
server whose work is not idempotent recognises a request it has already done by its id.  Here
the request is "take this message", the server is the Structured Streaming source started with
``ack=true`` (a ROUTER), and the reply is an acknowledgement sent once the message is in the
source's fsynced write-ahead log.

Theory of operation
-------------------
*Wire.*  One ZMTP message each way, over DEALER (the sender) and ROUTER (the source)::

    sender -> source   [PROTOCOL, sender id (16 bytes), seq (u64), base (u64), payload frames...]
    source -> sender   [PROTOCOL, sender id, upto (u64)]

A sender numbers its messages 1, 2, 3, ... (``seq``) and says with each one the lowest number it
still holds (``base``: everything before it was acknowledged).  An acknowledgement is
cumulative: every message of that sender up to ``upto`` is durable.

*The source* (:class:`AckTable`) keeps, for each sender, the highest number it has logged.  It
logs a message only if it is the next one (``seq == max(logged + 1, base)``): a number it has
already logged is a duplicate (dropped, and acknowledged again, so the sender learns it), and
one further on means some were lost on the way (dropped: the sender sends them again, in
order -- go-back-N).  It acknowledges, per drained batch, once the batch is fsynced.  The
table survives the source's own restarts: the log's records carry their sender and number
(``[sender id, seq, payload frames...]``), so reopening the log rebuilds the table, and before
the log drops committed records the table is written, atomically, to :data:`TABLE_FILE` in the
log's directory.  A sender the table does not know starts at its ``base``.

*The sender* (:class:`ReliableSender`) keeps every message until it is acknowledged, at most
``window`` of them (``send`` waits for room).  It sends them all again, in order, when its
connection is made again (the socket monitor's handshake event) and when ``timeout`` seconds
pass without the acknowledgements moving on.  With a ``journal`` directory it survives its
own death too: each message is in the journal (a write-ahead log, fsynced) before ``send``
returns, the sender's id is kept there, and a sender opened on the same journal sends again
what was not acknowledged and numbers on after it.  So a message ``send`` returned for lands
in the source's log exactly once, whichever of the two is killed and restarted.

Acknowledgements are read, and messages sent again, inside ``send``, :meth:`ReliableSender.pump`
and :meth:`ReliableSender.flush`: a sender that stops sending for a while calls ``pump`` (or
``flush``, to wait until everything is acknowledged).
"""

from __future__ import annotations

import contextlib
import enum
import os
import struct
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from pathlib import Path

import brokerless as zmq
from brokerless.stream.storage import LocalStorage
from brokerless.stream.wal import WriteAheadLog, read_range

__all__ = ["PROTOCOL", "TABLE_FILE", "AckTable", "Admit", "ReliableSender"]

#: The first frame of every acknowledged-ingestion message, both ways.
PROTOCOL = b"BKLACK1"
#: Where the source keeps its senders' table, in the write-ahead log's directory.
TABLE_FILE = "ack-senders"
ID_BYTES = 16
_U64 = struct.Struct(">Q")
_ENTRY = struct.Struct(f">{ID_BYTES}sQ")
_SENDER_ID_FILE = "sender-id"
#: Senders the source tracks at most: messages from further new ids are dropped, so a peer
#: that makes up ids costs a bounded table.
MAX_SENDERS = 1 << 16
#: The largest frame a sender takes (MAXMSGSIZE): an acknowledgement's are at most 16 octets,
#: and a sender bound with ``bind=True`` may be reached by anyone.
ACK_MAX_FRAME = 64
_TRIM_EVERY = 4096  # acknowledged messages between two trims of a sender's journal


def encode_message(sender: bytes, seq: int, base: int, frames: Sequence[bytes]) -> list[bytes]:
    return [PROTOCOL, sender, _U64.pack(seq), _U64.pack(base), *frames]


def decode_message(frames: Sequence[bytes]) -> tuple[bytes, int, int, list[bytes]] | None:
    """(sender id, seq, base, payload frames), or None when ``frames`` is not such a message."""
    if len(frames) < 5 or frames[0] != PROTOCOL or len(frames[1]) != ID_BYTES:
        return None
    if len(frames[2]) != _U64.size or len(frames[3]) != _U64.size:
        return None
    seq, base = _U64.unpack(frames[2])[0], _U64.unpack(frames[3])[0]
    if not 0 < base <= seq:
        return None
    return bytes(frames[1]), seq, base, list(frames[4:])


def encode_ack(sender: bytes, upto: int) -> list[bytes]:
    return [PROTOCOL, sender, _U64.pack(upto)]


def decode_ack(frames: Sequence[bytes]) -> tuple[bytes, int] | None:
    if len(frames) != 3 or frames[0] != PROTOCOL or len(frames[2]) != _U64.size:
        return None
    return bytes(frames[1]), _U64.unpack(frames[2])[0]


def record_frames(sender: bytes, seq: int, payload: Sequence[bytes]) -> list[bytes]:
    """What the source logs for a message: its sender and number, then its payload."""
    return [sender, _U64.pack(seq), *payload]


def payload_of(record: Sequence[bytes]) -> Sequence[bytes]:
    """A logged message's payload frames (see :func:`record_frames`)."""
    return record[2:]


# -- the source's side ------------------------------------------------------------------------


class Admit(enum.Enum):
    """What the source does with a message (see the module doc)."""

    LOG = "log"  # the next one from its sender
    DUPLICATE = "duplicate"  # logged before: acknowledge again
    GAP = "gap"  # some before it are missing: drop, the sender sends them again
    REFUSED = "refused"  # a new sender past MAX_SENDERS


class AckTable:
    """For each sender, the highest number logged (``durable``) and admitted (``admitted``,
    ahead of ``durable`` until the log is flushed).  Thread-safe: the source's receiver admits
    and the Spark thread that commits saves."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.path = Path(directory) / TABLE_FILE
        self._lock = threading.Lock()
        self.durable: dict[bytes, int] = {}
        self.admitted: dict[bytes, int] = {}

    def load(self, first_seq: int, durable_seq: int) -> None:
        """Rebuild the table: the saved file, then every record the log still holds."""
        table: dict[bytes, int] = {}
        with contextlib.suppress(FileNotFoundError):
            data = self.path.read_bytes()
            for offset in range(0, len(data) - len(data) % _ENTRY.size, _ENTRY.size):
                sender, upto = _ENTRY.unpack_from(data, offset)
                table[sender] = upto
        for record in read_range(self.path.parent, first_seq - 1, durable_seq):
            sender, seq = bytes(record.frames[0]), _U64.unpack(record.frames[1])[0]
            table[sender] = max(table.get(sender, 0), seq)
        with self._lock:
            self.durable = table
            self.admitted = dict(table)

    def admit(self, sender: bytes, seq: int, base: int) -> Admit:
        with self._lock:
            logged = self.admitted.get(sender)
            if logged is None and len(self.admitted) >= MAX_SENDERS:
                return Admit.REFUSED
            expected = max((logged or 0) + 1, base)
            if seq == expected:
                self.admitted[sender] = seq
                return Admit.LOG
            return Admit.DUPLICATE if seq < expected else Admit.GAP

    def flushed(self) -> None:
        """Everything admitted is in the log now."""
        with self._lock:
            self.durable.update(self.admitted)

    def durable_upto(self, sender: bytes) -> int:
        with self._lock:
            return self.durable.get(sender, 0)

    def save(self) -> None:
        """Write the durable table to :data:`TABLE_FILE` (atomically, fsynced) -- before the
        log drops the records it was rebuilt from."""
        with self._lock:
            data = b"".join(_ENTRY.pack(s, upto) for s, upto in self.durable.items())
        _write_durably(self.path, data)


# -- the sender's side ------------------------------------------------------------------------


class ReliableSender:
    """Sends messages to a brokerless source started with ``ack=true`` and keeps each one until
    the source says it is durable (see the module doc).

    ``endpoint``: the source's (connected to, or bound with ``bind=True``); ``journal``: a
    directory that makes the sender survive its own death (None: kept in memory only);
    ``window``: unacknowledged messages at most; ``timeout``: seconds without progress before
    everything unacknowledged is sent again."""

    def __init__(
        self,
        endpoint: str,
        *,
        journal: str | os.PathLike[str] | None = None,
        window: int = 10_000,
        timeout: float = 2.0,
        bind: bool = False,
        context: zmq.SyncContext | None = None,
    ) -> None:
        if window < 1:
            raise ValueError(f"window must be at least 1, not {window!r}")
        self.window = window
        self.timeout = timeout
        self._own_context = context is None
        self._context = context or zmq.Context()
        self._journal: WriteAheadLog | None = None
        #: Payloads not acknowledged yet: message ``_base + i`` is ``_outbox[i]``.
        self._outbox: deque[list[bytes]] = deque()
        self._base = 1
        self._trimmed = 0  # the journal holds nothing acknowledged up to here
        if journal is None:
            self.sender_id = os.urandom(ID_BYTES)
        else:
            self._journal = wal = WriteAheadLog(journal)
            self.sender_id = _sender_id(Path(journal))
            self._base = wal.first_seq
            self._outbox.extend(r.frames for r in wal.read(wal.first_seq - 1, wal.durable_seq))
        sock = self._socket = self._context.socket(zmq.DEALER)
        sock.linger = 0
        sock.sndhwm = window
        sock.maxmsgsize = ACK_MAX_FRAME
        self._monitor = sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
        if bind:
            sock.bind(endpoint)
        else:
            sock.connect(endpoint)
        self._progress = time.monotonic()  # when the acknowledgements last moved on

    def __repr__(self) -> str:
        return (
            f"<ReliableSender {self.sender_id.hex()[:8]} next {self.next_seq}, "
            f"{len(self._outbox)} unacknowledged>"
        )

    @property
    def unacknowledged(self) -> int:
        return len(self._outbox)

    @property
    def next_seq(self) -> int:
        """The number the next message gets (1 + the messages this sender ever took)."""
        return self._base + len(self._outbox)

    def send(self, frames: bytes | Sequence[bytes], timeout: float | None = None) -> int:
        """Send one message (a frame or a list of frames); returns its number."""
        return self.send_many([frames], timeout)

    def send_many(
        self, messages: Iterable[bytes | Sequence[bytes]], timeout: float | None = None
    ) -> int:
        """Send messages (journaled with one fsync); returns the last one's number.  Waits up
        to ``timeout`` seconds (None: for ever) for room in the window; raises zmq.Again
        when there is none."""
        # A single frame may be any bytes-like object (not iterated as a sequence of ints); the
        # frames are carried as the bytes the signature names.
        batch: list[list[bytes]] = [
            [m] if isinstance(m, bytes | bytearray | memoryview) else list(m)  # type: ignore[list-item]
            for m in messages
        ]
        if len(batch) > self.window:
            raise ValueError(f"{len(batch)} messages at once: more than window={self.window}")
        deadline = None if timeout is None else time.monotonic() + timeout
        while len(self._outbox) + len(batch) > self.window:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise zmq.Again("the window is full: the source has not acknowledged enough")
            self.pump(0.1 if left is None else min(left, 0.1))
        if self._journal is not None:
            now = time.time_ns() // 1000
            for frames in batch:
                self._journal.append(frames, now)
            self._journal.flush()
        if not self._outbox:
            self._progress = time.monotonic()  # the timeout runs from the first unacknowledged
        for frames in batch:
            self._outbox.append(frames)
            self._transmit(self.next_seq - 1, frames)
        self.pump(0)
        return self.next_seq - 1

    def pump(self, timeout: float = 0) -> None:
        """Read acknowledgements (waiting up to ``timeout`` seconds for the first), and send
        everything unacknowledged again after a reconnection or ``self.timeout`` seconds
        without progress."""
        if self._monitor.poll(0):
            reconnected = False
            while self._monitor.poll(0):
                self._monitor.recv_multipart()
                reconnected = True
            if reconnected:
                self._resend()
        if self._socket.poll(int(timeout * 1000)):
            while self._socket.poll(0):
                ack = decode_ack(self._socket.recv_multipart())
                if ack is not None and ack[0] == self.sender_id:
                    self._acknowledged(ack[1])
        if self._outbox and time.monotonic() - self._progress > self.timeout:
            self._resend()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every message sent is acknowledged; False after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._outbox:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            self.pump(0.1 if left is None else min(left, 0.1))
        return True

    def close(self) -> None:
        """Close the socket (and the journal); what is unacknowledged stays in the journal."""
        self._socket.disable_monitor()
        self._monitor.close(linger=0)
        self._socket.close(linger=0)
        if self._own_context:
            self._context.term()
        if self._journal is not None:
            self._journal.close()

    def __enter__(self) -> ReliableSender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _transmit(self, seq: int, frames: list[bytes]) -> bool:
        message = encode_message(self.sender_id, seq, self._base, frames)
        try:
            self._socket.send_multipart(message, zmq.NOBLOCK)
        except zmq.Again:  # SNDHWM messages queued: sent again later
            return False
        return True

    def _resend(self) -> None:
        self._progress = time.monotonic()
        for offset, frames in enumerate(self._outbox):
            if not self._transmit(self._base + offset, frames):
                break

    def _acknowledged(self, upto: int) -> None:
        if upto < self._base:
            return
        while self._outbox and self._base <= upto:
            self._outbox.popleft()
            self._base += 1
        self._progress = time.monotonic()
        journal = self._journal
        if journal is not None and (not self._outbox or upto - self._trimmed >= _TRIM_EVERY):
            journal.trim(upto)  # drops the segments that hold only acknowledged messages
            self._trimmed = upto


def _sender_id(journal: Path) -> bytes:
    """The id kept in ``journal`` (made once, when the journal is new)."""
    path = journal / _SENDER_ID_FILE
    try:
        found = path.read_bytes()
    except FileNotFoundError:
        found = b""
    if len(found) == ID_BYTES:
        return found
    sender = os.urandom(ID_BYTES)
    _write_durably(path, sender)
    return sender


def _write_durably(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically, on disk when this returns."""
    LocalStorage(path.parent).write(path.name, data)
