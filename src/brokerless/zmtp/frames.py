"""ZMTP 3 and 2.0 framing, decoded: a flags octet, a 1- or 8-octet size, the body.

Theory of operation
-------------------
The decoder takes whatever bytes the transport read and returns every *whole* message they
complete, in the form pipes carry (``bytes`` for one part, a ``list`` for a multipart message),
plus :class:`~.commands.Command` objects for command frames.  Partial frames and the parts of an
unfinished multipart message wait inside the decoder, so a message is delivered all or nothing.
It never trusts the peer: reserved flag bits or a frame larger than ``max_msg_size`` (or, with
no limit set, than :data:`MAX_FRAME_SIZE`) raise :class:`ProtocolError` before anything is
buffered for it, a MORE flag on a command once the command is in.  A frame within the limits is
buffered as its octets arrive, never allocated from the size its header claims (a transport
reading a large body directly asks for no more than the kernel holds), so a peer costs the
memory of what it has actually sent.

ZMTP 2.0 (RFC 15) frames the same way but has no commands: for a 2.0 peer the decoder is made
with ``command_frames=False`` and the COMMAND bit is one more reserved bit.

While ``handshaking`` the decoder takes only commands, one per ``feed``: a data frame raises
:class:`UnexpectedFrame` from its header (nothing a peer sends before the handshake completes can
become part of a message after it), and stopping after each command lets the connection switch
to traffic at READY before it decodes what follows.

The decoder has a fast path for the common frame -- a short, final data frame -- and falls back
to the general code for everything else; CPython pays per bytecode, so the fast path is written
to run as few as possible per message.  Frames are made by :mod:`.encoder`, from the flags here.
"""

from __future__ import annotations

import sys
from typing import Any

from ..runs import Run, cut
from .commands import Command, parse_command
from .errors import MalformedCommand, MessageTooLarge, ProtocolError, UnexpectedFrame

MORE = 0x01
LONG = 0x02
COMMAND = 0x04
_RESERVED = 0xF8

#: The largest frame accepted when MAXMSGSIZE is unset.  RFC 23 lets a header claim up to 2^63-1
#: octets, but no process can hold a body that large: the user address space of a 64-bit Linux
#: process is 2^47 octets on x86-64 and 2^48 on arm64 (48-bit virtual addresses), and a Python
#: bytes object holds at most ``sys.maxsize`` octets (2^31-1 on a 32-bit build).  A header that
#: claims more is refused as soon as it arrives: it can only be a broken or a hostile peer, and
#: libzmq drops it too (its allocation of the claimed size fails).  Frames within the ceiling are
#: accepted as libzmq accepts them; MAXMSGSIZE is what bounds the memory a peer may use.
MAX_FRAME_SIZE = min(1 << 48, sys.maxsize)


class FrameDecoder:
    """Byte stream in, whole messages and commands out."""

    __slots__ = (
        "_held",
        "_held_len",
        "_limit",
        "_max_msg_size",
        "_missing",
        "_parts",
        "_reserved",
        "_runs",
        "commands",
        "handshaking",
        "large",
        "read_limit",
        "runs",
    )

    def __init__(
        self,
        max_msg_size: int = -1,
        *,
        handshaking: bool = False,
        command_frames: bool = True,
        runs: bool = False,
    ) -> None:
        #: An unfinished frame, as the pieces of it the reads brought (see "Held input" in
        #: ``feed``), their octets, and how many more it needs (-1: not known -- its header is
        #: not whole or not checked yet, or the octets are held for ZAP).
        self._held: list[bytes] = []
        self._held_len = 0
        self._missing = -1
        self._parts: list[Any] | None = None
        self.max_msg_size = max_msg_size
        #: Flag bits that must be clear (COMMAND too without ``command_frames``: ZMTP 2.0).
        self._reserved = _RESERVED if command_frames else _RESERVED | COMMAND
        self.commands = False  # whether the last ``feed`` returned a command
        #: Whether the last ``feed``'s first long frame, or the frame it began in, is one of
        #: LARGE octets or more (of ``bytes`` input that began no held frame: its first frame).
        self.large = False
        #: The most octets the next read into the transport's buffer should take (0: as many as
        #: it holds): a long frame header's, after a ``feed`` that completed a held data frame of
        #: DIRECT_MIN octets or more and ended with it (see "Large bodies" in ``feed``).
        self.read_limit = 0
        #: Hand runs of RUN_MIN or more equal-size single-frame messages on as :class:`Run`
        #: items, for their reader to cut (see :mod:`brokerless.runs`).
        self._runs = runs
        self.runs = False  # whether the last ``feed`` returned a Run
        #: Commands only, one per ``feed`` (see the module docstring).
        self.handshaking = handshaking

    @property
    def max_msg_size(self) -> int:
        """MAXMSGSIZE (-1: none); frames larger are refused."""
        return self._max_msg_size

    @max_msg_size.setter
    def max_msg_size(self, value: int) -> None:
        self._max_msg_size = value
        self._limit = frame_limit(value)  # (what every feed looks up)

    @property
    def buffered(self) -> int:
        """Octets held for an unfinished frame."""
        return self._held_len

    @property
    def direct_read(self) -> int:
        """How many octets the next read should take as a ``bytes`` of their own (see "Large
        bodies" in ``feed``): the rest of a held data frame of DIRECT_MIN octets or more, at
        most DIRECT_READ_MAX; 0 for a read into the transport's buffer."""
        missing = self._missing
        if missing <= 0:
            return 0
        first = self._held[0]
        if self._held_len + missing - _header_length(first) < DIRECT_MIN or not self._plain(first):
            return 0
        return min(missing, DIRECT_READ_MAX)

    @property
    def wait_read(self) -> int:
        """How many octets a reader that may block should wait for in one read (see "Large
        bodies" in ``feed``): the whole rest of a held data frame, at most WAIT_READ_MAX, when it
        is more than DIRECT_READ_MAX and no read has added to the frame since the one that began
        it (one piece held: the first is never merged with another); else 0."""
        missing = self._missing
        if missing <= DIRECT_READ_MAX or len(self._held) != 1 or not self._plain(self._held[0]):
            return 0
        return min(missing, WAIT_READ_MAX)

    def cut_runs(self) -> None:
        """From now on hand no :class:`Run` on: every frame comes out on its own (an encrypting
        connection's frames are boxes that it opens one by one, not messages)."""
        self._runs = False

    def hold(self, data: bytes | bytearray | memoryview) -> None:
        """Keep ``data`` for a later ``feed`` without decoding it (a handshake paused for
        ZAP: the transport stops reading then, so this is at most one read)."""
        if data:
            self._held.append(bytes(data))
            self._held_len += len(data)
            self._missing = -1  # (decoded with what follows, as one buffer)

    def release(self) -> None:
        """Drop what waits for more input (a partial frame, an unfinished message) at once: the
        connection is over, and a large partial body must not outlive it."""
        self._held = []
        self._held_len = 0
        self._missing = -1
        self._parts = None

    def save(self) -> Any:
        """What :meth:`restore` needs to undo the ``feed`` that follows, however far it got (a
        reader interrupted by a signal: see :mod:`brokerless.transport.engine_state`): None
        while nothing is held, else the lists of held pieces and of an unfinished message's
        parts, each with its length, and the last piece.  A feed only appends to these lists or
        replaces that last piece (else it makes new lists), so saving costs the same however
        much is held -- a reader saves before every read, and a large frame may come in
        thousands of them (copying the list of pieces each time made that quadratic)."""
        held = self._held
        parts = self._parts
        if not held and parts is None:
            return None
        return (
            held,
            len(held),
            held[-1] if held else b"",
            self._held_len,
            self._missing,
            parts,
            0 if parts is None else len(parts),
        )

    def restore(self, saved: Any) -> None:
        """Back to the state :meth:`save` returned (the undone feed's appends cut off, its last
        piece put back: so also when called again with the same state)."""
        if saved is None:
            self.release()
        else:
            held, count, last, self._held_len, self._missing, parts, part_count = saved
            del held[count:]
            if count:
                held[-1] = last
            if parts is not None:
                del parts[part_count:]
            self._held, self._parts = held, parts

    def feed(self, data: bytes | bytearray | memoryview) -> list[Any]:
        """Decode ``data``; returns the messages and commands it completes, in order.

        ``commands`` is set to whether the result holds any command, ``runs`` to whether it
        holds a :class:`Run` (only when made with ``runs=True``).

        Held input.  The octets of a frame a read ended in are kept as ``bytes`` pieces, one
        per read (short ones merged: see PIECE_MIN).  Once the frame's header is whole and
        checked (its flags and size), how many octets it still lacks is known (``_missing``):
        a read that brings fewer is only added as one more piece, and the one that completes
        it joins the pieces and its own first octets straight into the body of a data frame
        (``_complete``; any other frame -- a command, a ZMTP 1.0 frame -- is joined whole and
        decoded once), then decodes the rest of itself where it lies.  So a data frame's body
        that spans reads is copied once more than one that does not (its first pieces; another
        frame's, twice), never a whole read, and a frame sent in n reads costs n reads' worth
        of copying, not n² / 2; with 64 KiB messages read 256 KiB at a time, appending each
        read to the held octets had doubled the copying.  A frame
        whose header is not whole or not checked yet (the input a handshake's command left
        behind, or what was held for ZAP) is decoded from one buffer of the pieces and the read:
        a few octets, or a handshake's commands.

        Large bodies.  For a held data frame of DIRECT_MIN octets or more the transport reads
        the rest of the body as ``bytes`` of its own (``direct_read``, at most DIRECT_READ_MAX
        at a time, and no more than the kernel holds), each one piece as it is (short ones
        merged), and after the read that completes it only the next frame's header
        (``read_limit``): so a large body read whole after its header is handed on as the very
        object the read made, with no copy and no piece made and freed.  A body whose rest is
        more than DIRECT_READ_MAX would come in pieces, joined in one more copy of all of it; a
        reader that may block instead waits for all of that rest in one read (``wait_read``,
        offered once a frame: a read of it that came short leaves the rest to direct reads).
        """
        out: list[Any] = []
        self.commands = self.runs = self.large = False
        self.read_limit = 0
        view: bytes | bytearray | memoryview = data
        if self._held:
            missing = self._missing
            if missing < 0:
                view = b"".join((*self._held, data))
                self._held, self._held_len = [], 0
            elif len(data) < missing:
                held = self._held
                # (small pieces merged, see PIECE_MIN -- but never into the first, so that
                # one piece held means no read since the one that began it: see wait_read)
                if len(held) > 1 and len(data) < PIECE_MIN and len(held[-1]) < PIECE_MIN:
                    held[-1] += data
                else:
                    held.append(bytes(data))
                self._held_len += len(data)
                self._missing = missing - len(data)
                self.large = self._held_len + self._missing - _header_length(self._held[0]) >= LARGE
                return out
            else:
                try:
                    self._complete(data, missing, out)
                except ProtocolError as exc:
                    exc.messages = out
                    raise
                view = memoryview(data)[missing:]
                if self.handshaking and self.commands:  # one command a feed: the rest waits
                    if view:
                        self._held, self._held_len = [bytes(view)], len(view)
                    return out
        try:
            if isinstance(view, bytes):
                self.large = _large_first(view, 0, len(view))
                pos = self._decode(view, out)
            else:
                pos = self._decode_copies(view, out)
        except ProtocolError as exc:
            exc.messages = out
            raise
        if pos < len(view):
            tail = bytes(view[pos:])
            self._held, self._held_len = [tail], len(tail)
            # (its header was checked as it was decoded up to -- unless a handshake's command
            # ended the decoding before it)
            checked = not (self.handshaking and self.commands)
            self._missing = self._frame_missing(tail) if checked else -1
        return out

    def _frame_missing(self, tail: bytes) -> int:
        """How many octets the frame that ``tail`` begins lacks, when its (checked) header is
        whole; else -1."""
        head = _header_length(tail)
        if len(tail) < head:
            return -1
        size = tail[1] if head == 2 else int.from_bytes(tail[1:9], "big")
        return head + size - len(tail)

    def _plain(self, first: bytes) -> bool:
        """Whether the held frame, whose first piece is ``first``, is a data frame (MORE or
        not): what ``_complete`` hands on itself, and what may be read directly."""
        return not first[0] & ~(MORE | LONG)

    def _complete(self, data: bytes | bytearray | memoryview, missing: int, out: list[Any]) -> None:
        """The held frame, completed by the first ``missing`` octets of ``data``.  A data
        frame's body is joined in one copy -- or is ``data`` itself, a direct read of all of
        it -- and handed on as ``_decode`` hands a frame on; any other frame is joined whole and
        decoded by ``_decode`` (see ``feed``)."""
        held = self._held
        first = held[0]
        flags = first[0]
        head = _header_length(first)
        size = self._held_len + missing - head
        self.large = size >= LARGE
        if not self._plain(first):  # a command, a ZMTP 1.0 frame: decoded the general way
            frame = b"".join((*held, memoryview(data)[:missing]))
            self._held, self._held_len, self._missing = [], 0, -1
            self._decode(frame, out)
            return
        if len(first) == head and len(held) == 1 and len(data) == missing and type(data) is bytes:
            body = data
        else:
            body = b"".join((memoryview(first)[head:], *held[1:], memoryview(data)[:missing]))
        if size >= DIRECT_MIN and len(data) == missing:
            self.read_limit = 9
        self._held, self._held_len, self._missing = [], 0, -1
        self._parts = add_part(out, self._parts, body, flags & MORE)

    def _decode_copies(self, view: bytearray | memoryview, out: list[Any]) -> int:
        """``_decode`` for a buffer that is not ``bytes`` (a read buffer).  Slicing ``bytes``
        makes each body in one step, so frames are decoded from ``bytes`` copies of the buffer:
        of at most WINDOW octets while short frames come (see WINDOW), then of all the rest;
        from a large frame on, from the buffer itself, so its body is copied only once."""
        with memoryview(view) as whole:  # (released at once, not when collected)
            pos, end = 0, len(whole)
            while end - pos > 1 and not whole[pos] & LONG:
                stop = pos + WINDOW
                used = self._decode(bytes(whole[pos:stop]), out)
                pos += used
                if stop >= end or self.handshaking or not used:
                    return pos
            if _large_first(whole, pos, end):
                self.large = True
                return pos + self._decode(whole[pos:], out)
            return pos + self._decode(bytes(whole[pos:]), out)

    def _decode(self, view: Any, out: list[Any]) -> int:
        """Decode every whole frame of ``view`` into ``out``; returns the octets consumed."""
        parts = self._parts
        limit = self._limit
        handshaking = self.handshaking
        reserved = self._reserved
        copy = view.__class__ is not bytes  # a slice of bytes is already bytes
        # The fast path takes frames whose flags octet is 0 (short, final, data); with a
        # MAXMSGSIZE below 255 short frames need the size check, and while handshaking data
        # frames are refused, so it takes none.  Its tail repeats the general path's on
        # purpose: a shared helper would cost a call a message.
        fast = 0 if limit >= 255 and not handshaking else -1
        append = out.append
        runs = self._runs
        pos, end = 0, len(view)
        while end - pos >= 2:
            flags = view[pos]
            if flags == fast:
                if parts is None and not copy:
                    # Short single-frame messages from ``bytes``, the common case.  Runs of
                    # equal size are cut at their fixed strides (see _uniform_run); the rest,
                    # one by one, in as few bytecodes a message as the loop can have.
                    n = _uniform_run(view, pos, end, 2)
                    while n:
                        size = view[pos + 1]
                        span = n * (size + 2)
                        if runs and n >= LAZY_RUN_MIN:
                            append(Run(view, pos + 2, size + 2, size, n))
                            self.runs = True
                        else:
                            out += cut(view, pos + 2, size + 2, size, n)
                        pos += span
                        n = (
                            _uniform_run(view, pos, end, 2)
                            if end - pos >= 2 and not view[pos]
                            else 0
                        )
                    if end - pos < 2 or view[pos]:
                        continue
                    while True:
                        stop = pos + 2 + view[pos + 1]
                        if stop > end:
                            break
                        append(view[pos + 2 : stop])
                        pos = stop
                        if end - pos < 2 or view[pos]:
                            break
                    if stop > end:
                        break
                    continue
                stop = pos + 2 + view[pos + 1]
                if stop > end:
                    break
                body = view[pos + 2 : stop]
                if copy:
                    body = bytes(body)
                pos = stop
                if parts is None:
                    append(body)
                else:
                    parts.append(body)
                    append(parts)
                    parts = None
                continue
            if flags == LONG and parts is None and not copy and not handshaking:
                # Runs of equal-size long single-frame messages: cut as short ones are.
                n = _uniform_run(view, pos, end, 9)
                if n and int.from_bytes(view[pos + 1 : pos + 9], "big") <= limit:
                    size = int.from_bytes(view[pos + 1 : pos + 9], "big")
                    span = n * (size + 9)
                    if runs and n >= LAZY_RUN_MIN:
                        append(Run(view, pos + 9, size + 9, size, n))
                        self.runs = True
                    else:
                        out += cut(view, pos + 9, size + 9, size, n)
                    pos += span
                    continue
            if flags & reserved:
                raise ProtocolError(f"frame with reserved flag bits set (flags {flags:#04x})")
            if handshaking and not flags & COMMAND:
                raise UnexpectedFrame("data frame received before the handshake completed")
            if flags & LONG:
                if end - pos < 9:
                    break
                size = int.from_bytes(view[pos + 1 : pos + 9], "big")
                start = pos + 9
            else:
                size = view[pos + 1]
                start = pos + 2
            if size > limit:
                raise _too_large(size, self.max_msg_size)
            stop = start + size
            if stop > end:
                break
            body = bytes(view[start:stop])
            pos = stop
            if flags & COMMAND:
                if flags & MORE:
                    raise MalformedCommand("command frame with the MORE flag set")
                self.commands = True
                append(parse_command(body))
                if handshaking:
                    break
            elif flags & MORE:
                if parts is None:
                    parts = [body]
                else:
                    parts.append(body)
            elif parts is None:
                append(body)
            else:
                parts.append(body)
                append(parts)
                parts = None
        self._parts = parts
        return pos


#: The shortest run of equal-size frames worth cutting by slicing (below it, one by one).
RUN_MIN = 16
#: The shortest run a decoder made with ``runs=True`` hands on as a :class:`Run`; shorter ones
#: are cut here, as without.  Below it a run's own costs (an item, its count in the pipe, the
#: reader's cut) outweighed what it saved: with 16, 1 KiB messages between two processes came
#: at 0.70-0.76 of the rate without runs, with 256 at 1.00-1.18 (interleaved A/B, 5-7 rounds).
#: A read holds at most 256 KiB, so messages of about 1 KiB or more never make a Run.
LAZY_RUN_MIN = 256
#: A read that starts with a frame this large is decoded from a view of the read buffer, so
#: the large body is copied once (smaller frames: the read is copied to ``bytes`` first).  A
#: PULL reads such frames in its own thread (see :mod:`brokerless.transport.engine_lent`).
LARGE = 64 * 1024
#: A data frame at least this large has the rest of its body read straight into ``bytes`` of
#: its own (see "Large bodies" in ``FrameDecoder.feed``).  Such a body copied out of the read
#: buffer, with the pieces a read ending in it leaves, churned the allocator: glibc gave the
#: memory back and took it again (7-8 page faults a 128 KiB message), and direct reads made
#: 128 KiB messages 1.5x as fast.  Below it the read per message costs more than the copy: at
#: 64 KiB direct reads ran at 0.5-0.7 (BENCHMARKS.md, *Wire throughput*, 21st session).
DIRECT_MIN = 2 * LARGE
#: A held piece shorter than this takes the next read in too when that is as short, so a peer
#: that trickles a frame in tiny reads costs about its octets, not an object per read (at most
#: a copy of this much a read).
PIECE_MIN = 4096
#: The most one direct read asks for.  A transport also asks for no more than the kernel holds
#: (``recv`` makes its ``bytes`` at the size asked for, before the octets come), so a header's
#: claim costs nothing ahead of what the peer actually sends.
DIRECT_READ_MAX = 1 << 20
#: The most a read that waits for a large body asks for (``wait_read``).  Its ``bytes`` is made
#: at that size before the octets come -- address space the kernel backs with memory only as
#: they are written -- and shrunk to what came.
WAIT_READ_MAX = 1 << 26


def _uniform_run(view: bytes, pos: int, end: int, head: int) -> int:
    """How many whole frames from ``pos`` on are final data frames with the same ``head``
    octets of header (2: flags 0 and a size octet; 9: the LONG flag and an 8-octet size), so of
    one size, when they are at least RUN_MIN; else 0.

    Such a run's bodies sit at fixed strides, so the decoder cuts them all at once, in C
    (:func:`~brokerless.runs.cut`), instead of frame by frame (a stream of fixed-size messages
    is common).  The check is strided slices compared in C,
    one per header octet: RUN_MIN frames first, doubling while the run holds, so a stream that
    is not uniform costs one short check per read."""
    if end - pos < head:
        return 0
    header = view[pos : pos + head]
    size = header[1] if head == 2 else int.from_bytes(header[1:], "big")
    stride = head + size
    whole = (end - pos) // stride
    if whole < RUN_MIN:
        return 0
    n, probe = 0, RUN_MIN
    while n < whole:
        probe = min(probe, whole - n)
        start = pos + n * stride
        stop = start + probe * stride
        for i, octet in enumerate(header):
            if view[start + i : stop : stride].count(octet) != probe:
                return n if n >= RUN_MIN else 0
        n += probe
        probe *= 2
    return n


#: The most octets of a read of short frames copied to ``bytes`` at once.  A copy of a whole
#: 256 KiB read of 100 B messages, made and freed every read, cost a page fault every 4 KiB
#: (80,000 for 2 million messages: glibc gave the memory back to the system and took it again
#: each read; MALLOC_TRIM_THRESHOLD_ set high removed them too), a tenth of the receive side's
#: time.  Copies of 64 KiB make none.  Reads of longer frames are still copied whole: cut in
#: windows, 1 KiB messages decoded 30 % slower.
WINDOW = 64 * 1024


def _large_first(view: bytes | memoryview, pos: int, end: int) -> bool:
    """Whether ``view[pos:end]`` starts with a frame of LARGE octets or more, or with a long
    frame's incomplete header (decoded from the view)."""
    if end - pos < 2 or not view[pos] & LONG:
        return False
    return end - pos < 9 or int.from_bytes(view[pos + 1 : pos + 9], "big") >= LARGE


def add_part(out: list[Any], parts: list[Any] | None, body: Any, more: int) -> list[Any] | None:
    """Add the frame ``body`` to the message being put together in ``parts`` (None: no frame
    of it yet); a last frame (not ``more``) hands the whole message to ``out``, a single part
    as itself.  Returns the parts still waiting for their message's last frame."""
    if more:
        if parts is None:
            return [body]
        parts.append(body)
        return parts
    if parts is None:
        out.append(body)
    else:
        parts.append(body)
        out.append(parts)
    return None


def _header_length(frame: bytes) -> int:
    """The octets of the ZMTP 3 / 2.0 frame header ``frame`` begins with."""
    return 9 if frame[0] & LONG else 2


def frame_limit(max_msg_size: int) -> int:
    """The largest frame body accepted: MAXMSGSIZE when set, else :data:`MAX_FRAME_SIZE`."""
    return max_msg_size if 0 <= max_msg_size < MAX_FRAME_SIZE else MAX_FRAME_SIZE


def _too_large(size: int, max_msg_size: int) -> MessageTooLarge:
    if 0 <= max_msg_size < size:
        return MessageTooLarge(f"frame of {size} octets exceeds MAXMSGSIZE {max_msg_size}")
    return MessageTooLarge(
        f"frame of {size} octets exceeds {MAX_FRAME_SIZE}, more than any process can hold"
    )


__all__ = [
    "COMMAND",
    "LONG",
    "MAX_FRAME_SIZE",
    "MORE",
    "Command",
    "FrameDecoder",
    "frame_limit",
]
