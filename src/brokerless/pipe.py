"""Pipes: the queues between a socket and its peers.

Theory of operation
-------------------
A pipe connects two *owners* (two sockets on inproc; a socket and a session for a network
connection).  ``pipepair()`` makes two :class:`Pipe` ends sharing two :class:`Lane` objects, one
per direction; each end reads from one lane and writes to the other.

A lane is a ``deque`` of whole messages (a ``bytes``/``Frame`` for one part, a ``list`` for a
multipart message), so a reader can never see part of a message and HWM counts messages, as in
libzmq.  There is exactly one writer thread and one reader thread per lane; ``deque.append`` and
``deque.popleft`` are atomic under the GIL, so the data path takes no lock.

A session may also queue a :class:`~brokerless.runs.Run` of single-part messages its connection
decoded: one item for many messages, which the reader cuts into ``bytes`` when it reaches it
(``Lane.cut_head``), so that each message is made by the thread that receives it.  The lane
counts a run's messages with two counters, each written by one side only (``run_in`` by the
writer, ``run_out`` by the reader): its depth is ``len(q) + run_in - run_out``.  A batch is
admitted by items, as room under the HWM allows, so a run may take the lane past its HWM by at
most its own length (at most one read of the connection); then the writer waits as usual.

Wake-ups are sent only on transitions, with three flags on the lane:

* ``reader_asleep`` -- the reader found the lane empty and stopped looking at it.  A writer that
  sees the flag after appending clears it and sends ``activate_read`` to the reader's mailbox.
* ``reader_waiting`` -- the reader is asleep waiting for this lane alone and has already taken
  it in (a REQ or REP waiting for its reply on its one pipe): instead of ``activate_read`` the
  writer only wakes it (its mailbox's ``poke``), and it reads the message at its first look,
  with no command to handle first.
* ``writer_blocked`` -- the writer found the lane at its high-water mark.  A reader that pops
  the lane down to the low-water mark clears it and sends ``activate_write`` to the writer.

Each side sets its flag *before* re-checking the deque, and the other side checks the flag
*after* touching the deque, so one of the two always sees the other (a spurious activation is
possible and harmless: owners treat activation as idempotent).

Termination: closing an end appends :data:`DELIMITER` to its outbound lane and sends
``pipe_term`` to the peer's owner.  The peer stops writing at once and reads what is still
queued up to the delimiter (pending messages are delivered, as libzmq does), then drops the pipe.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Iterator
from itertools import islice, repeat, starmap
from typing import Any, Protocol

from .mailbox import Command
from .runs import Run


class PipeOwner(Protocol):
    """What a pipe needs from the object at each of its ends (a socket, a session, a ZAP
    client)."""

    def send_command(self, command: Command, arg: Any) -> None:
        """Queue ``command`` about pipe ``arg`` for the owner (any thread)."""

    def pipe_terminated(self, pipe: Pipe) -> None:
        """``pipe`` ended: its peer's delimiter was read (the owner's thread)."""


class InputLoan(Protocol):
    """A connection's input lent to the thread of the socket it feeds (see
    :mod:`brokerless.transport.engine_lent`): that thread polls ``fileno`` and reads and
    decodes what comes (into the pipe) itself, then gives it back -- or keeps it for its next
    wait, until it waits otherwise (``give_back``)."""

    @property
    def fileno(self) -> int: ...

    def read_lent(self, wait_ms: int = 0) -> bool:
        """Read and decode what the descriptor holds, into the pipe, the rest of a large body
        waited for up to ``wait_ms`` (-1: no limit of the caller's, only the transport's own
        bound on one wait; 0: not at all); whether anything came."""

    def await_lent(self, wait_ms: int) -> bool:
        """``read_lent``, waiting in the read itself up to ``wait_ms`` for something to
        come; whether anything did."""

    def return_input(self, keep: bool = False) -> None:
        """Done reading: give the input back to its I/O thread, or with ``keep`` hold on to
        it (nobody reading it) for the next wait."""

    def give_back(self) -> None:
        """A loan kept goes back to its I/O thread now."""

    def return_if_held(self) -> None:
        """A call on the loan was cut short by an exception from a signal handler: the input
        goes back to its I/O thread if this thread holds it still."""


class InputSource(Protocol):
    """What feeds a pipe from a network connection (``Pipe.source``)."""

    def lend_input(self, large_only: bool = False) -> InputLoan | None:
        """The connection's input for the calling socket thread; None when it cannot be lent
        now (no connection, not in traffic, the I/O thread busy with it; ``large_only``: its
        last read began with no large frame)."""


class _Delimiter:
    __slots__ = ()

    def __repr__(self) -> str:
        return "DELIMITER"


#: Last item a closing end writes: "no more messages will follow".
DELIMITER = _Delimiter()

# Commands a pipe sends to its owners (dispatched by the owner's mailbox).
ACTIVATE_READ = Command.ACTIVATE_READ
ACTIVATE_WRITE = Command.ACTIVATE_WRITE
PIPE_TERM = Command.PIPE_TERM
HICCUP = Command.HICCUP

_MAX_WM_DELTA = 1024


def low_water_mark(hwm: int) -> int:
    """Queue depth at which a blocked writer is woken again (libzmq's compute_lwm)."""
    return hwm - _MAX_WM_DELTA if hwm > 2 * _MAX_WM_DELTA else (hwm + 1) // 2


class Lane:
    """One direction of a pipe: the message queue and the flags of the wake-up protocol."""

    __slots__ = (
        "conflate",
        "hwm",
        "lwm",
        "q",
        "queued",
        "reader",
        "reader_asleep",
        "reader_hwm",
        "reader_waiting",
        "run_in",
        "run_out",
        "writer",
        "writer_blocked",
        "writer_hwm",
    )

    def __init__(self, writer_hwm: int | None, reader_hwm: int | None, conflate: bool) -> None:
        self.q: deque[Any] = deque()
        self.writer_hwm = writer_hwm
        self.reader_hwm = reader_hwm
        self._update_hwm()
        self.conflate = conflate
        # Nobody reads a lane before its end is attached, and attaching activates the end, so
        # a writer need not signal until the reader has looked and found the lane empty.
        self.reader_asleep = False
        self.reader_waiting = False
        self.writer_blocked = False
        self.reader: Pipe | None = None
        self.writer: Pipe | None = None
        #: Messages in runs beyond one an item: queued (writer) and cut (reader) so far.
        self.run_in = 0
        self.run_out = 0
        #: Messages ``Pipe.write`` has queued, counted just before each goes in, with no point
        #: between where a signal handler runs: a writer whose ``write`` was cut short by one
        #: tells from it whether its message went in (a REP's reply, ``Rep.xsend``; a PUB's
        #: fan-out, ``Distributor.send_to``).
        self.queued = 0

    def depth(self) -> int:
        """Messages queued (the delimiter counted as one)."""
        return len(self.q) + self.run_in - self.run_out

    def cut_head(self) -> None:
        """The reader found a :class:`Run` at the head: its messages take its place (reader
        only).  Between taking the run off and putting its messages in, the depth reads low
        by the run's length: a writer that looks then may admit one batch more, as the pipe's
        admission by items already allows (see the module docstring)."""
        q = self.q
        run = q.popleft()
        q.extendleft(reversed(run.messages()))
        self.run_out += run.n - 1

    def _update_hwm(self) -> None:
        """Capacity is the writer's SNDHWM plus the reader's RCVHWM; 0 on either side = none.

        Either is None while that owner is unknown (inproc connect before bind).
        """
        w, r = self.writer_hwm, self.reader_hwm
        hwm = 0 if w == 0 or r == 0 else (w or 0) + (r or 0)
        self.hwm = hwm
        self.lwm = low_water_mark(hwm) if hwm else 0

    def wake_reader(self) -> None:
        """The writer queued into a lane its reader had found empty: the reader gets
        ``activate_read``, or only a wake-up while it waits for this lane (``reader_waiting``)."""
        self.reader_asleep = False
        # (the writer's _notify_peer, inline: this runs once a message on a sparse flow, and a
        # REQ's or REP's every send; the lane's reader is the writer's peer)
        reader = self.reader
        if reader is not None:
            ref = reader._owner_ref
            owner = None if ref is None else ref()
            if owner is not None:
                if self.reader_waiting:  # (only a socket sets it: Socket.poke)
                    owner.poke()
                    return
                try:
                    owner.send_command(ACTIVATE_READ, reader)
                except BaseException:
                    # An exception from a signal handler (see "Interruptions" in
                    # brokerless.transport.engine_state): the wake-up is made again --
                    # activation is idempotent, and a queued message must not go unannounced.
                    # (A socket's single sends do the same when it comes as this begins.)
                    owner.send_command(ACTIVATE_READ, reader)
                    raise

    def wake_writer(self) -> None:
        """The reader drained the lane to the low-water mark: the writer blocked at the HWM
        may go on (it gets ``activate_write``)."""
        self.writer_blocked = False
        reader = self.reader
        if reader is not None:
            try:
                reader._notify_peer(ACTIVATE_WRITE)
            except BaseException:  # (as in wake_reader: a blocked writer must hear of it)
                reader._notify_peer(ACTIVATE_WRITE)
                raise

    def set_hwms(self, writer_hwm: int | None = None, reader_hwm: int | None = None) -> None:
        if writer_hwm is not None:
            self.writer_hwm = writer_hwm
        if reader_hwm is not None:
            self.reader_hwm = reader_hwm
        self._update_hwm()


class Pipe:
    """One end of a pipe pair, used by exactly one owner."""

    __slots__ = (
        "_owner_ref",
        "_source_ref",
        "data",
        "endpoint",
        "greeted",
        "inbound",
        "metadata",
        "outbound",
        "peer",
        "peer_routing_id",
        "routing_id",
        "terminating",
    )

    def __init__(self, inbound: Lane, outbound: Lane) -> None:
        #: The lane this end reads (for a reader that takes messages itself: ``Socket.recv``).
        self.inbound = inbound
        #: The lane this end writes (for a writer that queues messages itself: ``Socket.send``;
        #: it must not while ``terminating``, nor past the HWM, nor on a conflating lane).
        self.outbound = outbound
        self._owner_ref: Any = None
        self.peer: Pipe | None = None
        #: The routing id the peer announced (its ROUTING_ID option), b"" when it set none.
        self.peer_routing_id = b""
        #: The id a ROUTER uses for this pipe (assigned when the ROUTER attaches it).
        self.routing_id = b""
        #: Set once this end stopped writing (closed by us, or the peer went away).
        self.terminating = False
        self.endpoint = ""
        self.data: Any = None  # per-pattern state
        #: The greeting the peer's side already wrote for this end's owner (None: not yet).
        self.greeted: tuple[Any, ...] | None = None
        #: The properties of the connection feeding this end (``Frame.get``); None on inproc.
        self.metadata: dict[str, bytes] | None = None
        self._source_ref: weakref.ref[InputSource] | None = None

    def __repr__(self) -> str:
        return f"<Pipe {self.endpoint or '?'} in={len(self.inbound.q)} out={len(self.outbound.q)}>"

    @property
    def owner(self) -> Any:
        """The socket or session at this end (held weakly: a dropped socket can be collected
        and closed even though its peers' pipes still point at it); None before attaching."""
        ref = self._owner_ref
        return None if ref is None else ref()

    @owner.setter
    def owner(self, owner: Any) -> None:
        self._owner_ref = None if owner is None else weakref.ref(owner)

    @property
    def source(self) -> InputSource | None:
        """The connection feeding this end (tcp, ipc), held weakly as the owner is; None on
        inproc."""
        ref = self._source_ref
        return None if ref is None else ref()

    @source.setter
    def source(self, source: InputSource | None) -> None:
        self._source_ref = None if source is None else weakref.ref(source)

    def peer_gone(self) -> bool:
        """The peer closed its end (its delimiter is queued), e.g. before we attached."""
        q = self.inbound.q
        return bool(q) and q[-1] is DELIMITER

    # -- reading ---------------------------------------------------------------------------

    def read(self) -> Any:
        """The next whole message, or None when the pipe is empty (or just terminated)."""
        lane = self.inbound
        q = lane.q
        try:
            msg = q.popleft()
        except IndexError:
            lane.reader_asleep = True
            if not q:
                return None
            lane.reader_asleep = False
            msg = q.popleft()
        if msg is DELIMITER:
            self._peer_finished()
            return None
        if msg.__class__ is Run:
            q.appendleft(msg)
            lane.cut_head()
            msg = q.popleft()
        if lane.writer_blocked and len(q) + lane.run_in - lane.run_out <= lane.lwm:
            try:
                lane.wake_writer()
            except BaseException:  # interrupted (see Lane.wake_writer): the message is the
                q.appendleft(msg)  # next read's
                raise
        return msg

    def read_many(self, limit: int) -> list[Any]:
        """Up to ``limit`` whole messages; like :meth:`read`, an empty result (or one that
        emptied the pipe) marks the reader asleep, and the end of the stream is reported."""
        lane = self.inbound
        q = lane.q
        popleft = q.popleft
        out: list[Any] = []
        while True:
            # (popped in C: starmap calls popleft that many times, ~20 ns a message where a
            # comprehension took ~55; the writer only appends, so each finds an item)
            out += starmap(popleft, repeat((), min(limit - len(out), len(q))))
            if len(out) == limit:
                break
            lane.reader_asleep = True
            if not q:
                break
            lane.reader_asleep = False
        if DELIMITER in out:  # always the last item: nothing is written after it
            del out[out.index(DELIMITER) :]
            self._peer_finished()
        else:
            self._wake_writer_if_drained()
        return out

    def read_queued(self, into: deque[Any], limit: int, settle: bool) -> bool:
        """Move up to ``limit`` messages queued now into ``into`` in one step -- each is in one
        of the two, whatever happens -- for a reader that is not the end's owner (the socket's
        thread writing directly for its I/O thread); the delimiter stays for the owner.  With
        ``settle``, emptying the lane marks the reader asleep (as :meth:`read` does) so the
        next message is signalled; without, the reader stays awake and writers keep not
        signalling.  Returns whether the reader is now asleep (else the caller arranges the
        next read)."""
        lane = self.inbound
        q = lane.q
        n = min(limit, len(q))
        if n and n == len(q) and q[-1] is DELIMITER:  # (nothing is written after it)
            n -= 1
        into.extend(starmap(q.popleft, repeat((), n)))
        if lane.writer_blocked:  # (the common case, not: no call)
            self._wake_writer_if_drained()
        if q or not settle:
            return False
        lane.reader_asleep = True
        if q:
            lane.reader_asleep = False
            return False
        return True

    def hold_reader_awake(self) -> None:
        """The reader is about to look at this end by its own means (it reads the connection
        that feeds it): writers need not signal it until it next finds the end empty."""
        self.inbound.reader_asleep = False

    def _wake_writer_if_drained(self) -> None:
        """After a batch read: wake a writer blocked at the HWM once down to the low-water
        mark (``read`` does the same inline: it runs once per message)."""
        lane = self.inbound
        if lane.writer_blocked and lane.depth() <= lane.lwm:
            lane.wake_writer()

    def check_read(self) -> bool:
        """Whether a message is ready; marks the reader asleep when there is none."""
        lane = self.inbound
        q = lane.q
        if q:
            if q[0] is DELIMITER:
                q.popleft()
                self._peer_finished()
                return False
            return True
        lane.reader_asleep = True
        if q:
            lane.reader_asleep = False
            return self.check_read()
        return False

    def _peer_finished(self) -> None:
        self.terminating = True
        owner = self.owner
        if owner is not None:
            owner.pipe_terminated(self)

    def _notify_peer(self, command: Command) -> None:
        peer = self.peer
        assert peer is not None  # set by pipepair before either end is used
        owner = peer.owner
        if owner is not None:
            owner.send_command(command, peer)

    # -- writing ---------------------------------------------------------------------------

    def check_write(self) -> bool:
        """Whether a message can be written now (under HWM and peer still there)."""
        if self.terminating:
            return False
        lane = self.outbound
        if lane.hwm and lane.depth() >= lane.hwm and not lane.conflate:
            lane.writer_blocked = True
            if lane.depth() >= lane.hwm:
                return False
            lane.writer_blocked = False
        return True

    def write(self, msg: Any) -> bool:
        """Queue one whole message if the peer is there and the HWM allows; wake the reader."""
        lane = self.outbound
        full = lane.hwm and len(lane.q) + lane.run_in - lane.run_out >= lane.hwm
        if self.terminating or (full and not self.check_write()):
            return False
        if msg.__class__ is Run:
            if lane.conflate:
                msg = msg.messages()[-1]
            else:
                lane.run_in += msg.n - 1
        if lane.conflate:
            lane.q.clear()
            if msg.__class__ is list:
                msg = msg[-1]  # libzmq keeps one part only: conflation is for single parts
        lane.queued += 1
        try:
            lane.q.append(msg)
            if lane.reader_asleep:
                lane.wake_reader()
        except BaseException:  # interrupted once the message went in, or as the wake-up
            lane.wake_reader()  # began (see Lane.wake_reader): woken all the same (a spare
            raise  # activation is harmless)
        return True

    def write_many(self, msgs: list[Any], runs: bool = False) -> int:
        """Queue whole messages in order, as many as the HWM allows; returns how many items
        were taken.  ``runs``: :class:`Run` items may be among them (each admitted as one
        item, counted as its messages)."""
        lane = self.outbound
        n = 0
        if not (self.terminating or lane.conflate):
            n = len(msgs)
            if lane.hwm:  # room up to the HWM (lane.depth(), inline: once a batch read)
                n = max(0, min(n, lane.hwm - len(lane.q) - lane.run_in + lane.run_out))
        if n:
            whole = n == len(msgs)
            if runs:
                lane.run_in += sum(m.n - 1 for m in msgs[:n] if m.__class__ is Run)
            lane.q.extend(msgs if whole else msgs[:n])
            if lane.reader_asleep:
                lane.wake_reader()
            if whole:
                return n
        for i in range(n, len(msgs)):  # at the HWM: the single-message path marks us blocked
            if not self.write(msgs[i]):
                return i
        return len(msgs)

    def write_from(self, source: Iterator[Any], count: int) -> bool:
        """``write_many`` for a writer a signal handler may interrupt (the socket's thread
        delivering a lent read: see :mod:`brokerless.transport.engine_lent`): takes up to
        ``count`` whole messages (no runs) from the iterator ``source`` in one step, so that
        what it did not take is still there, whatever happens.  False when some are left there
        (the HWM: the writer is then marked blocked, as ``write`` does; or the pipe ended).
        For pipes without conflation (a session lends no input into one)."""
        lane = self.outbound
        while not self.terminating:
            room = count if not lane.hwm else min(count, lane.hwm - lane.depth())
            if room > 0:
                lane.q.extend(islice(source, room))
                if lane.reader_asleep:
                    lane.wake_reader()
                count -= room
            if not count:
                return True
            if not self.check_write():
                return False
        return False

    def force_write(self, msg: Any) -> None:
        """Queue a message past the HWM (subscriptions, greetings, probes; the rest of a fan-out
        cut short, ``write_all``)."""
        lane = self.outbound
        try:
            lane.q.append(msg)
            if lane.reader_asleep:
                lane.wake_reader()
        except BaseException:  # interrupted once it went in (see write)
            lane.wake_reader()
            raise

    def pending_in(self) -> int:
        """Messages waiting to be read (the delimiter not counted)."""
        lane = self.inbound
        n = lane.depth()
        return n - 1 if lane.q and lane.q[-1] is DELIMITER else n

    def pending_out(self) -> int:
        return len(self.outbound.q)

    def drop_inbound(self) -> None:
        """Discard everything queued for this end (used when it is dropped unread)."""
        lane = self.inbound
        q = lane.q
        while q:
            item = q.popleft()
            if item.__class__ is Run:
                lane.run_out += item.n - 1

    def hiccup(self) -> None:
        """The connection behind this end was lost and is being re-established (libzmq's pipe
        hiccup): the peer's owner gets ``hiccup`` and may resend what the lost connection
        carried (a subscriber, its subscriptions)."""
        self._notify_peer(HICCUP)

    # -- termination -----------------------------------------------------------------------

    def terminate(self) -> None:
        """Close this end: the peer gets what is queued, then the end of the stream."""
        if self.terminating:
            return
        self.terminating = True
        self.outbound.conflate = False
        # The delimiter goes in first: a peer attached later finds it (``peer_gone``); one
        # already attached is told.  An owner that attaches concurrently sees one or the other.
        self.outbound.q.append(DELIMITER)
        self.outbound.reader_asleep = False
        self._notify_peer(PIPE_TERM)

    def process_pipe_term(self) -> bool:
        """The peer closed its end.  Returns True when nothing is left to read."""
        self.terminating = True
        q = self.inbound.q
        if (len(q) == 1 and q[0] is DELIMITER) or not q:
            q.clear()
            return True
        return False

    def set_writer_hwm(self, hwm: int) -> None:
        """This end's owner changed its SNDHWM."""
        self.outbound.set_hwms(writer_hwm=hwm)

    def set_reader_hwm(self, hwm: int) -> None:
        """This end's owner changed its RCVHWM."""
        self.inbound.set_hwms(reader_hwm=hwm)


def write_all(ends: tuple[tuple[Pipe, Lane], ...], msg: Any) -> bool:
    """Queue one single-part message in every end's outbound lane -- when each has room under
    its HWM and none is terminating; else queue nothing and return False (the caller then
    writes end by end, as :meth:`Pipe.write` decides for each).  ``ends`` pairs each pipe with
    its outbound lane, none of them conflating (a PUB's fan-out: ``Pattern.broadcast``).

    All or nothing, as libzmq's send: an exception from a signal handler once the message went
    into one lane (see "Interruptions" in :mod:`brokerless.transport.engine_state`) lets it go
    into the others too before it propagates -- once in one subscriber's pipe it is sent, and a
    retried send would give that one a second copy.  (Each had room when the fan-out began.  A
    second interruption while the rest go in is not covered: the ends after it miss the
    message.)"""
    for pipe, lane in ends:
        hwm = lane.hwm
        if pipe.terminating or (hwm and len(lane.q) + lane.run_in - lane.run_out >= hwm):
            return False
    taken = 0  # the lanes the message went into
    try:
        for _, lane in ends:
            taken += 1  # (with the append: no point between where a handler runs)
            lane.q.append(msg)
            if lane.reader_asleep:
                lane.wake_reader()
    except BaseException:
        if taken:  # it went in: the reader of the lane it was at is woken (a spare wake-up is
            ends[taken - 1][1].wake_reader()  # harmless), and the rest get it too
            for pipe, _ in ends[taken:]:
                pipe.force_write(msg)
        raise
    return True


def pipepair(
    a_hwms: tuple[int, int], b_hwms: tuple[int | None, int | None], conflate: bool = False
) -> tuple[Pipe, Pipe]:
    """Two connected ends ``a`` and ``b``.

    ``a_hwms``/``b_hwms`` are each owner's (SNDHWM, RCVHWM); None for an owner not known yet,
    whose values come later through ``set_writer_hwm``/``set_reader_hwm``.
    """
    ab = Lane(a_hwms[0], b_hwms[1], conflate)
    ba = Lane(b_hwms[0], a_hwms[1], conflate)
    a = Pipe(inbound=ba, outbound=ab)
    b = Pipe(inbound=ab, outbound=ba)
    a.peer, b.peer = b, a
    ab.writer, ab.reader = a, b
    ba.writer, ba.reader = b, a
    return a, b
