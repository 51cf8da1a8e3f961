"""The source's receiver: its socket, the thread that moves what the socket takes into the
write-ahead log (one ``write`` + ``fsync`` per drained batch), and the log (see ``source.py``
for what Spark asks of it).

Theory of operation
-------------------
*Stopping.*  The receiver first stops taking messages from the network
(``Socket.stop_receiving``: its connections read nothing more, its listeners accept nothing
more), then logs everything the socket had taken -- what its pipes hold and what its engines
had decoded -- and fsyncs the log, and only then closes the socket: nothing the source took off
the network is lost.  Spark ends a stopped query's source process with SIGTERM, without
waiting; the receiver catches it (from the process's main thread, where Spark starts it), stops
as above, and then lets SIGTERM end the process.  What ZeroMQ itself cannot promise stays
lost: bytes in the kernels' buffers or on the wire when a connection closes (the source's own
unread ones included: once it stops reading, they are never read), messages a PUB sends while
no subscriber is connected, and what a PUSH had queued for a connection that closed (a bound
PUSH drops it; a PUSH that connected keeps it for the next run).

*The backlog.*  The receiver reads as fast as its peers send, whatever the query's pace; what
Spark has not yet taken into a batch (``latestOffset`` has not offered it) is the backlog.  Past
``maxBacklogBytes`` of it the receiver reads nothing until the reader reports that Spark took
more (:meth:`Receiver.taken`): the socket then fills to its RCVHWM and pushes back, so a peer
faster than the query waits (PUSH, a ReliableSender) or drops at its own SNDHWM (PUB), and the
log does not grow without bound.  The bytes counted are the log's records (what its writer
flushed, ``flushed_bytes``), marked at each flush, so the backlog is known to within one
drained batch.

*Acknowledged ingestion* (``ack=true``, :mod:`brokerless.spark.ingest`) closes that gap: the
socket is a ROUTER; each message carries its sender's id and number, the receiver logs only a
sender's next message (duplicates and out-of-order ones are dropped: see ``AckTable``), and
after each drained batch is fsynced it acknowledges, per sender, the highest number it has
logged.  A :class:`~brokerless.spark.ingest.ReliableSender` keeps every message until it is
acknowledged and sends it again after a reconnection or a timeout, so a sender and a query can
both be killed and restarted at any moment and every message lands in the log once.  The
records of this mode hold ``[sender id, number, payload frames...]``; the columns show the
payload frames only.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import deque
from typing import Any

import brokerless as zmq
from brokerless.auth.thread import ThreadAuthenticator
from brokerless.stream.wal import WriteAheadLog

from .endpoints import attach
from .ingest import AckTable, Admit, decode_message, encode_ack, record_frames
from .source_config import SourceConfig, SourceError

__all__ = ["Receiver"]

_POLL_MS = 100  # how often the receiver looks at its stop flag while no message comes
_ACK_LINGER_MS = 200  # how long the last acknowledgements may take to leave at stop
_NOT_WATCHING = object()  # the receiver has no SIGTERM handler of its own (any more)
_MAX_DRAIN = 8192  # messages per log flush at most (bounds the memory of one group commit)


class Receiver:
    """The socket, the thread that moves its messages into the log, and the log."""

    def __init__(self, config: SourceConfig) -> None:
        self.wal = WriteAheadLog(config.wal_path, fsync=config.fsync)
        #: The last record the log held when it opened: an offset from an earlier run (Spark's
        #: checkpoint) can name no record past it.
        self.recovered_seq = self.wal.durable_seq
        self.error: BaseException | None = None
        self._acks: AckTable | None = None
        self._authenticator: ThreadAuthenticator | None = None
        self._context = zmq.Context()
        self._stopping = threading.Event()
        self._stop_lock = threading.Lock()
        self._stopped = self._terminating = False
        self._max_backlog = config.max_backlog_bytes
        self._logged_bytes = 0  # the log's records this receiver flushed, in bytes
        self._taken_bytes = 0  # ... of which Spark has taken into batches
        self._marks: deque[tuple[int, int]] = deque()  # (a flush's last seq, _logged_bytes)
        self._room = threading.Event()  # Spark took more: the backlog may have room again
        try:
            if config.ack:
                self._acks = AckTable(config.wal_path)
                self._acks.load(self.wal.first_seq, self.wal.durable_seq)
            self._socket = self._open(config)
        except BaseException:
            self._context.destroy(linger=0)
            self.wal.close()
            raise
        self._previous_sigterm: Any = _NOT_WATCHING
        if threading.current_thread() is threading.main_thread():
            self._previous_sigterm = signal.signal(signal.SIGTERM, self._on_sigterm)
        self._thread = threading.Thread(
            target=self._run, name=f"brokerless-source {config.wal_path}", daemon=True
        )
        self._thread.start()

    def _open(self, config: SourceConfig) -> zmq.SyncSocket:
        kind = {"SUB": zmq.SUB, "PULL": zmq.PULL, "ROUTER": zmq.ROUTER}[config.socket_type]
        sock = self._context.socket(kind)
        sock.setsockopt(zmq.LINGER, _ACK_LINGER_MS if config.ack else 0)
        sock.setsockopt(zmq.MAXMSGSIZE, config.max_message_size)
        sock.setsockopt(zmq.RCVHWM, config.rcvhwm)
        if config.socket_type == "SUB":
            for topic in config.topics:
                sock.setsockopt(zmq.SUBSCRIBE, topic)
        self._authenticator = config.security.apply(sock, self._context)
        try:
            attach(
                sock,
                config.endpoints,
                config.bind,
                lambda verb, endpoint, exc: SourceError(
                    f"brokerless source: cannot {verb} {endpoint}: {exc}"
                ),
            )
        except BaseException:
            self._stop_authenticator()
            raise
        return sock

    def _stop_authenticator(self) -> None:
        """End the ZAP handler (a PLAIN server's), before the context ends."""
        if self._authenticator is not None:
            self._authenticator.stop()
            self._authenticator = None

    def _run(self) -> None:
        drain = self._drain if self._acks is None else self._drain_acknowledged
        try:
            while not self._stopping.is_set():
                if self._logged_bytes - self._taken_bytes >= self._max_backlog:
                    self._room.wait(_POLL_MS / 1000)  # read nothing until Spark takes more
                    self._room.clear()
                elif self._socket.poll(_POLL_MS):
                    drain()
            # Stopping: nothing more from the network; everything the socket took goes to the
            # log (and, with acks, is acknowledged) before it closes.
            self._socket.stop_receiving()
            while drain() == _MAX_DRAIN:
                pass
        except BaseException as exc:  # reported to Spark by the next driver-side call
            self.error = exc

    def _drain(self) -> int:
        """Log (and flush) up to ``_MAX_DRAIN`` messages the socket holds; returns how many."""
        recv, append, now_ns = self._socket.recv_multipart, self.wal.append, time.time_ns
        taken = 0
        while taken < _MAX_DRAIN:
            try:
                frames = recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            append(frames, now_ns() // 1000)
            taken += 1
        self._flush()
        return taken

    def _drain_acknowledged(self) -> int:
        """``_drain`` for ``ack=true``: log each sender's next messages, drop what it sent
        twice or out of order, flush, then acknowledge (see ``ingest.py``)."""
        acks = self._acks
        assert acks is not None
        sock, now = self._socket, time.time_ns() // 1000
        answer: dict[bytes, bytes] = {}  # sender -> the routing id its messages came from
        taken = 0
        while taken < _MAX_DRAIN:
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            taken += 1
            message = decode_message(frames[1:])
            if message is None:
                continue  # not a ReliableSender's: dropped
            sender, seq, base, payload = message
            admitted = acks.admit(sender, seq, base)
            if admitted is Admit.LOG:
                self.wal.append(record_frames(sender, seq, payload), now)
            if admitted is not Admit.REFUSED:
                answer[sender] = frames[0]
        self._flush()
        acks.flushed()
        for sender, route in answer.items():
            reply = [route, *encode_ack(sender, acks.durable_upto(sender))]
            try:
                sock.send_multipart(reply, zmq.NOBLOCK)
            except zmq.ZMQError:  # that connection is gone: the sender asks again
                pass
        return taken

    def _flush(self) -> None:
        """Make what was appended durable; what it wrote joins the backlog."""
        wal = self.wal
        wal.flush()
        if wal.flushed_bytes != self._logged_bytes:
            self._logged_bytes = wal.flushed_bytes
            self._marks.append((wal.durable_seq, self._logged_bytes))

    def taken(self, seq: int) -> None:
        """Spark has taken every record up to ``seq`` into a batch: they leave the backlog."""
        marks = self._marks
        while marks and marks[0][0] <= seq:
            self._taken_bytes = marks.popleft()[1]
        self._room.set()

    def settle(self, quiet: float, most: float) -> int:
        """The log's last record once no message has come for ``quiet`` seconds (or ``most``
        have passed, or the receiver stops): what the peers had queued is in by then."""
        deadline = time.monotonic() + most
        seen = self.wal.durable_seq
        while not self._stopping.wait(min(quiet, max(0.0, deadline - time.monotonic()))):
            now_seen = self.wal.durable_seq
            if now_seen == seen or time.monotonic() >= deadline:
                return now_seen
            seen = now_seen
        return self.wal.durable_seq

    def check(self) -> WriteAheadLog:
        if self.error is not None:
            raise SourceError(f"brokerless source: the receiver failed: {self.error!r}") from (
                self.error
            )
        return self.wal

    def commit(self, upto: int) -> None:
        """Spark has processed every record up to ``upto``: drop them from the log (after
        saving the senders' table, which the log can no longer rebuild them from)."""
        if self._acks is not None:
            self._acks.save()
        self.wal.trim(upto)

    def stop(self) -> None:
        """Stop taking messages, log (and fsync) everything the socket took, close.  A second
        caller waits until the first is done."""
        with self._stop_lock:
            if not self._stopped:
                try:
                    self._stopping.set()
                    self._thread.join()
                    self._socket.close()
                    self._stop_authenticator()
                    self._context.term()
                    self.wal.close()
                finally:
                    self._stopped = True
        self._end_sigterm_watch()

    # -- SIGTERM -------------------------------------------------------------------------------
    # Spark ends a stopped query's source process with SIGTERM, without waiting: the default
    # action would kill it with messages taken off the network but not yet in the log.  So the
    # receiver stops first (everything it took goes to the log, fsynced), then the process ends
    # as SIGTERM asked.  The stop runs in a thread of its own: the handler runs in the main
    # thread between any two bytecodes, and the code it interrupted may hold a lock the stop
    # needs (the log's, during a commit).  The runner's own call to stop() waits for that
    # thread, and so does the interpreter before it exits (not a daemon).

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        self._terminating = True
        if self._stopped:
            self._end_sigterm_watch()  # the process ends now
        else:
            threading.Thread(target=self.stop, name="brokerless-source stop").start()

    def _end_sigterm_watch(self) -> None:
        """Put the previous SIGTERM handler back -- and end the process if SIGTERM came: from
        the main thread at once, from another by sending SIGTERM again (the main thread's
        handler then finds the receiver stopped)."""
        if self._previous_sigterm is _NOT_WATCHING:
            return
        if threading.current_thread() is not threading.main_thread():
            if self._terminating:
                os.kill(os.getpid(), signal.SIGTERM)
            return
        signal.signal(signal.SIGTERM, self._previous_sigterm)
        self._previous_sigterm = _NOT_WATCHING
        if self._terminating:
            signal.raise_signal(signal.SIGTERM)
