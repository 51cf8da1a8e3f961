"""An engine's output: the socket's messages, encoded in batches, onto the descriptor.

Theory of operation
-------------------
The I/O thread takes every message waiting in the pipe (up to a batch limit sized by the last
message, about :data:`BATCH_BYTES`), encodes them into one list of buffers (small frames
joined, bodies of :data:`ZERO_COPY_MIN` octets or more passed by reference) and writes it with
one ``sendmsg``.  What the kernel does not take waits for EVENT_WRITE; when the pipe is empty
the engine goes idle until the pipe signals a new message (``restart_output``).  A full batch
means more may wait: the rest is queued behind the I/O thread's other work, so connections
sharing the thread (a PUB's subscribers) take turns.

Direct output: the socket's thread, having just queued into an idle connection, writes it to
the OS socket itself (``try_direct_output``), so a sparse flow costs no hand-over to the I/O
thread.  Whatever the kernel does not take, and any messages queued behind, are left to the
I/O thread (``_after_direct``).  ``out_lock`` is held by whichever thread writes.  Every write
passes MSG_DONTWAIT: a descriptor a lent read has waited in is blocking (see
:mod:`.engine_lent`), and a write must never wait for the peer.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from socket import MSG_DONTWAIT
from typing import Any

from ..zmtp import TRAFFIC
from .engine_state import EngineState

BATCH_BYTES = 256 * 1024
BATCH_MESSAGES = 4096
ZERO_COPY_MIN = 64 * 1024  # bodies at least this large are written without being copied
IOV_MAX = 512
#: ``sendmsg``'s other arguments for a direct write (one call through ``map``: see
#: "Interruptions" in engine_state): no ancillary data; never wait (the descriptor may be
#: blocking: see "Waiting in the read" in engine_lent).
_NO_ANCDATA = ((),)
_DONTWAIT = (MSG_DONTWAIT,)


class OutputMixin(EngineState):
    """Batched and direct output (see the module docstring)."""

    def _queue(self, data: bytes) -> None:
        if data:
            self._out.append(data)

    def try_direct_output(self, settle: bool) -> bool:
        """The socket's thread, having just queued into an idle connection, writes it to the
        OS socket itself: no hand-over to the I/O thread, no wait for the GIL.  For a socket
        whose every send is followed by a wait for a reply (``settle``: REQ, REP) that is all:
        once the pipe is empty its next message is signalled again, and the I/O thread has
        nothing to do.  Otherwise more sends may follow at once: the pipe's reader stays awake,
        so they are not signalled (and written) one by one, and the I/O thread is asked once
        to take them in batches -- as it is to finish a write the kernel took only part of, or
        one that failed (a broken connection, met again there).  Returns False when the I/O
        thread must do it all (busy connection, handshake not done, a PONG waiting).  Each
        step is written so that an exception from a signal handler leaves what was taken to
        the I/O thread, to be written once (see "Interruptions" in :mod:`.engine_state`)."""
        lock = self.out_lock
        taken = self._taken
        sent = self._sent
        wire: list[Any] | None = None
        try:
            if not lock.acquire(False):
                return False
            if (
                not self.alive
                or self.conn.state is not TRAFFIC
                or self._out
                or taken
                or self.conn.has_output  # a PONG a lent read decoded goes first (its nonce)
            ):
                lock.release()
                return False
            sent.clear()
            asleep = self.session.take_queued(taken, BATCH_MESSAGES, settle)
            wire = self.conn.encode_batch(list(taken), ZERO_COPY_MIN, _buffer)
            taken.clear()
            try:
                sent.extend(map(self.sock.sendmsg, (wire[:IOV_MAX],), _NO_ANCDATA, _DONTWAIT))
            except OSError:  # the kernel is full, or the connection broke: the I/O thread's
                pass
            self._queue_unsent(wire)
            if self._out or not asleep:
                self.io.call_soon(self._after_direct)
            lock.release()
        except BaseException:
            if lock._is_owned():  # type: ignore[attr-defined]  # (what Condition uses)
                try:
                    self._direct_cut_short(wire)
                except BaseException:  # a second interruption, in the first one's handling:
                    self._direct_cut_short(wire)  # again (a third still lets the lock go)
                    raise
                finally:
                    lock.release()
            raise
        return True

    def _direct_cut_short(self, wire: list[Any] | None) -> None:
        """An exception from a signal handler cut ``try_direct_output`` short with ``out_lock``
        held: the messages it took, or what of their ``wire`` form it did not write, go to the
        I/O thread, which is asked to write them.  Each step can be done twice: an interruption
        of this is handled by running it again -- and whatever comes, the lock is let go (held,
        it stalled the connection's I/O thread for good)."""
        if wire is not None:
            self._taken.clear()
            self._queue_unsent(wire)
        self.io.call_soon(self._after_direct)

    def _queue_unsent(self, wire: list[Any]) -> None:
        """Queue what of a direct write's ``wire`` its ``sendmsg`` (what it wrote is in
        ``_sent``) did not take -- once: ``_out`` was empty before."""
        if self._out:
            return
        n = self._sent[0] if self._sent else 0
        for i, buf in enumerate(wire):
            size = len(buf)
            if n < size:
                self._out.extend([memoryview(buf)[n:] if n else buf, *wire[i + 1 :]])
                return
            n -= size

    def _write_command(self, data: bytes) -> None:
        """Queue ``data`` (a command: a PONG, a PING, a handshake step) behind what waits and
        write (I/O thread, ``out_lock`` held).  A write that finishes what was waiting for
        EVENT_WRITE no longer waits for it, so it takes the pipe's next batch as the event would
        have: the pipe's reader was left awake, and nothing else would announce those."""
        was_writing = self._writing
        self._queue(data)
        self._flush()
        if was_writing and not self._out:
            self._restart_output()

    def _after_direct(self, _: Any) -> None:
        """The I/O thread's turn after a direct write: finish what the kernel did not take,
        then take what was queued behind it (the pipe's reader was left awake, so nothing else
        will announce those messages)."""
        with self.out_lock:
            if self._out:
                self._flush()
            if not self._out:
                self.restart_output()

    def restart_output(self, _: Any = None) -> None:
        """Write one batch of what waits in the pipe (see the module docstring)."""
        with self.out_lock:
            self._restart_output()

    def _restart_output(self) -> None:
        if not self.alive or self.conn.state is not TRAFFIC or self._out:
            return
        session = self.session
        taken = self._taken
        if taken:  # taken by a direct write an interruption stopped before encoding them
            msgs = list(taken)
            taken.clear()
        else:
            msgs = session.pull_many(self._batch_limit)
        if not self.alive:  # that read met the pipe's end, and LINGER 0 closed us at once
            return
        if len(msgs) == self._batch_limit:
            self.io.call_soon(self.restart_output)  # more may wait: after the others' turns
        elif not msgs:
            session.output_flushed(self)  # the pipe is empty: its next message wakes us
            return
        self._out.extend(self.conn.encode_batch(msgs, ZERO_COPY_MIN, _buffer))
        self._batch_limit = _batch_limit(msgs[-1])
        self._flush()

    def _flush(self) -> None:
        """Write what the kernel takes; wait for EVENT_WRITE for the rest (I/O thread only)."""
        try:
            self._send_out()
        except OSError as exc:
            self.connection_lost(f"connection error: {exc.strerror or exc}", exc.errno or 0)
            return
        writing = bool(self._out)
        if writing != self._writing and self.alive:
            self._writing = writing
            with self._interest_lock:
                self._update_interest()
        if not writing:
            self.session.output_flushed(self)

    def _send_out(self) -> None:
        """``sendmsg`` the queued buffers until done or the kernel pushes back (any thread,
        with ``out_lock`` held); OSError for a broken connection."""
        out = self._out
        sock = self.sock
        while out:
            try:
                n = sock.sendmsg(out if len(out) <= IOV_MAX else list(_head(out)), (), MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return
            while n:
                first = out[0]
                size = len(first)
                if size <= n:
                    out.popleft()
                    n -= size
                else:
                    out[0] = memoryview(first)[n:]
                    n = 0


def _batch_limit(msg: Any) -> int:
    """How many messages like ``msg`` make one batch (about BATCH_BYTES, at most
    BATCH_MESSAGES): the next batch is sized by the last message of this one."""
    size = len(msg) if msg.__class__ is not list else sum(map(len, msg))
    return max(1, min(BATCH_MESSAGES, BATCH_BYTES // (size + 1)))


def _buffer(part: Any) -> Any:
    """The raw buffer of a message part (a Frame is not a buffer on Python 3.11)."""
    buffer = getattr(part, "buffer", None)
    return buffer if buffer is not None else part


def _head(out: deque[Any]) -> Iterator[Any]:
    for i, buf in enumerate(out):
        if i == IOV_MAX:
            return
        yield buf
