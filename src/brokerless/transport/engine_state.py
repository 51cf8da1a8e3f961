"""What the parts of an engine share, and what an engine needs of its session and protocol.

:class:`~.engine.Engine` is assembled from parts with one job each -- output
(:mod:`.engine_output`), lent input (:mod:`.engine_lent`), handshake deadline and heartbeats
(:mod:`.engine_liveness`) -- over the state declared here once.

Threads and locks.  An engine lives in its I/O thread, but the socket's thread writes to it
directly (direct output) and reads from it while it waits for a reply (lent input).  Three
locks keep that straight, always taken in this order when nested:

1. ``in_lock`` -- whoever reads the descriptor and decodes (either thread; the other only
   tries it and backs off);
2. ``out_lock`` -- whoever encodes and writes (re-entrant: the I/O thread's paths nest);
3. ``_interest_lock`` -- the poller registration and the hand-over of the descriptor
   (``_lent``, closing).

Interruptions.  Python runs a signal handler in the main thread between two steps of its code
-- on entering a function, right after a built-in returns -- and an exception the handler
raises (Ctrl-C's ``KeyboardInterrupt``) comes out of whatever was running there.  The socket's
thread runs engine code itself (a lent read, a direct write), so each step of it that moves
octets or messages leaves them, whatever comes, in one place the I/O thread looks at:

* what a system call returned goes straight into the engine (``deque.extend(map(call, ...))``
  stores it with no step in between): the octets a lent read received, or the count it read
  into the engine's lent buffer (``_got``), the count a direct write wrote (``_sent``);
* messages move between containers in one step -- from the pipe into ``_taken``
  (``Pipe.read_queued``), from an iterator of decoded messages into the pipe
  (``Pipe.write_from``) or into ``_pending_in`` -- so what was not moved is where it was;
* decoding cut short is undone before the same octets are decoded again
  (``Connection.save_input``, a CURVE nonce included);
* the handler (``except BaseException``) puts what it finds in the I/O thread's hands
  (``restart_input``, ``_after_direct``), gives back ``in_lock`` or ``out_lock`` if this thread
  holds it, and re-raises (a lent read's handler does only what can be done twice, and is run
  again if a second interruption cuts it short: a signal that came during the first one's
  handling lands there); a wake-up whose sending was cut short is sent again (a spare one is
  harmless: pipe activations, mailbox signals; a poller change is made whole by the next
  ``watch``).

The socket's own reads and writes of its pipes do the same where they wake the other side: a
wake-up cut short is sent again, and a ``recv`` interrupted as it wakes the connection puts its
message back; a PUB's fan-out cut short once its message went into one subscriber's pipe goes
on to the rest (``write_all``, ``Distributor.send_to``: a send is all or nothing, as libzmq's).
``tests/test_interrupted_io.py`` raises an exception at each such point in turn.
Not covered: the socket's own bookkeeping above its pipes -- an interrupted ``send`` may have
queued its message before the socket's state (a REQ's) shows it; the message a ``recv`` has
just taken to return is the caller's (with pyzmq too the interrupt can come right after
libzmq returned it); of the commands a socket's mailbox brings, only wake-ups and
activations stay queued until handled (a new connection's ATTACH or a pipe's end, cut short,
is lost); and a handler that uses the socket it interrupted meets it half-way through.
"""

from __future__ import annotations

import fcntl
import socket as pysocket
import sys
import termios
import threading
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

from ..constants import Event

if TYPE_CHECKING:
    from ..io import IOThread, Timer
    from ..pipe import Pipe
    from ..zmtp import ProtocolError, Ready, State
    from .port import SocketPort
    from .zap import ZapClient


class EngineOwner(Protocol):
    """What an engine needs of its session (the session implements it)."""

    socket: SocketPort
    endpoint: str
    pipe: Pipe | None

    def push_many(self, msgs: list[Any], runs: bool = False) -> int:
        """Messages from the wire into the pipe; how many it took (``runs``: runs of messages
        may be among them)."""

    def push_from(self, source: Iterator[Any], count: int) -> bool:
        """``count`` messages from ``source`` into the pipe in one step (the socket's thread);
        False when some are left there."""

    def pull_many(self, limit: int) -> list[Any]:
        """Up to ``limit`` messages the socket sent (empty: its next message wakes us)."""

    def take_queued(self, into: deque[Any], limit: int, settle: bool) -> bool:
        """Move what the socket queued now into ``into``, for a direct write from its thread;
        whether its next message will be signalled."""

    def output_flushed(self, engine: Any) -> None: ...

    def engine_ready(self, engine: Any, peer: Ready) -> None: ...

    def engine_failed(
        self, engine: Any, reason: str, code: int = 0, event: int = 0, protocol: bool = False
    ) -> None: ...


class Wire(Protocol):
    """The protocol an engine speaks: ZMTP (:class:`~brokerless.zmtp.Connection`) or raw bytes
    (:class:`~.raw.RawConnection`)."""

    state: State
    peer: Ready | None

    @property
    def heartbeats(self) -> bool: ...

    @property
    def zap_waiting(self) -> bool: ...

    def receive(self, data: bytes | bytearray | memoryview) -> tuple[list[Any], bool]: ...

    def save_input(self) -> Any:
        """What ``restore_input`` needs to undo the next ``receive`` (see
        :mod:`.engine_lent`)."""

    def restore_input(self, saved: Any) -> None: ...

    @property
    def large_frames(self) -> bool:
        """Whether the last input began with a large frame (see ``lend_input``)."""

    @property
    def direct_read(self) -> int:
        """Octets the next read takes as ``bytes`` of their own (0: a read into a buffer)."""

    @property
    def wait_read(self) -> int:
        """Octets a read that may wait takes as ``bytes`` of their own (0: as ``direct_read``
        says)."""

    @property
    def read_limit(self) -> int:
        """The most octets the next read into a buffer takes (0: no limit)."""

    @property
    def has_output(self) -> bool:
        """Whether ``data_to_send`` has something (a PONG, a handshake step)."""

    def data_to_send(self) -> bytes: ...

    def encode_batch(self, msgs: list[Any], zero_copy_min: int, as_buffer: Any = None) -> list[Any]:
        """The wire form of ``msgs`` as few buffers."""

    def zap_reply(self, frames: list[bytes] | None) -> list[Any]: ...

    def send_ping(self, ttl_deciseconds: int, context: bytes = b"") -> None: ...

    def close(self) -> None: ...


class EngineState:
    """The state every part of an engine uses (see the module docstring)."""

    io: IOThread
    session: EngineOwner
    sock: pysocket.socket
    conn: Wire
    fileno: int
    alive: bool
    #: Buffers accepted for writing, not yet taken by the kernel.
    _out: deque[Any]
    #: A direct write's messages taken from the pipe and not yet encoded, and what its
    #: ``sendmsg`` wrote (see "Interruptions").
    _taken: deque[Any]
    _sent: deque[int]
    #: Decoded items the pipe had no room for, and whether events may be among them.
    _pending_in: list[Any]
    _pending_events: bool
    _batch_limit: int
    _reading: bool
    _input_stopped: bool
    _writing: bool
    _events: int
    _timers: dict[str, Timer]
    _last_rx: float
    out_lock: threading.RLock
    in_lock: threading.RLock
    _interest_lock: threading.Lock
    #: The I/O thread does not watch the descriptor: it is lent to the socket's thread, borrowed
    #: now (``_borrowed``) or kept for the next wait (see :mod:`.engine_lent`).
    _lent: bool
    _borrowed: bool
    #: Borrows so far; when the loan was last kept; ``_watch_loan`` queued or due, and the
    #: borrows it counted at its last look.
    _loans: int
    _kept_at: float
    _loan_watched: bool
    _watched_loans: int
    #: restart_input found the input lent: run it again once it is given back.
    _restart_wanted: bool
    #: A lent read met the end of the stream (or a broken connection): never lent again.
    _ended: bool
    _zap: ZapClient | None
    #: What a lent read received and an interruption left undecoded (see "Interruptions"):
    #: octets, or how many it read into ``_lent_buffer``.
    _got: deque[Any]
    #: What a lent read reads large frames into (made on the first such read; see
    #: :mod:`.engine_lent`).
    _lent_buffer: memoryview | None
    #: The SO_RCVTIMEO last set for a lent read that waits (ms; -1: none yet, the descriptor
    #: still non-blocking; see "Waiting in the read" in :mod:`.engine_lent`).
    _rcvtimeo: int
    #: When the last wait for a large body's rest (see :mod:`.engine_lent`) ends at the latest:
    #: until then what the peer sends goes straight into that read, unseen by a peek.
    _read_until: float

    def _direct_size(self, whole: bool = False, wait_ms: int = 0) -> int:
        """How many octets to read next as ``bytes`` of their own: what the connection asks
        for (the rest of a large body; see "Large bodies" in :mod:`brokerless.zmtp.frames`),
        but no more than the kernel holds now (FIONREAD) -- 0 when it reports none (``whole``:
        less than all that is asked), or nothing is asked: then a read into a buffer.  A
        ``recv`` makes its ``bytes`` at the size asked for and shrinks it to what came, and a
        large one shrunk stayed a memory mapping of its own: a peer trickling a large body in
        small writes made the receiver hold 2-3x the octets in as many mappings as reads.
        ``wait_ms`` (a lent read that may wait): the whole rest of a body too large for one
        direct read, more than DIRECT_READ_MAX, when the kernel holds some of it already -- a
        read the caller waits for (see :mod:`.engine_lent`)."""
        conn = self.conn
        wanted = conn.direct_read
        if not wanted:
            return 0
        queued = int.from_bytes(fcntl.ioctl(self.fileno, termios.FIONREAD, _INT), sys.byteorder)
        if wait_ms and queued:
            rest = conn.wait_read
            if rest:
                return rest
        if queued < wanted:
            return 0 if whole else queued
        return wanted

    def connection_lost(self, reason: str, errno: int) -> None:
        """The OS connection ended (closed by the peer: EPIPE; a reset, ...): before the
        handshake completed -- and always on a raw connection, which has none to complete --
        the monitor gets HANDSHAKE_FAILED_NO_DETAIL with the errno, as libzmq's."""
        self.fail(reason, errno, Event.HANDSHAKE_FAILED_NO_DETAIL)

    # Implemented by the engine or one of its parts; declared for the others to call.

    def fail(
        self,
        reason: str,
        code: int = 0,
        event: int = Event.HANDSHAKE_FAILED_PROTOCOL,
        protocol: bool = False,
    ) -> None:
        raise NotImplementedError

    def _update_interest(self) -> None:
        raise NotImplementedError

    def _set_reading(self, reading: bool) -> None:
        raise NotImplementedError

    def _push_run(self, items: list[Any], lo: int, hi: int, events: bool) -> bool:
        raise NotImplementedError

    def _protocol_failed(self, exc: ProtocolError, protocol: bool = True) -> None:
        raise NotImplementedError

    def _send_reply(self, pongs: bool = False) -> None:
        raise NotImplementedError

    def _close_socket(self) -> None:
        raise NotImplementedError

    def restart_input(self, _: Any = None) -> None:
        raise NotImplementedError

    def restart_output(self, _: Any = None) -> None:
        raise NotImplementedError

    def _flush(self) -> None:
        raise NotImplementedError

    def _write_command(self, data: bytes) -> None:
        raise NotImplementedError


_INT = bytes(4)  # (FIONREAD's argument: a C int)
