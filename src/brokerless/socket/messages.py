"""Sending and receiving: ``send``/``recv`` and their multipart forms, the socket's hot path.

Theory of operation
-------------------
Every call first runs any queued commands (a deque's truthiness when there are none), then asks
the pattern to move one whole message: the common case is one pattern call and one deque
operation, no lock and no system call.  Only when the pattern cannot (no message; every pipe at
its HWM) does the call wait (:mod:`.waiting`).

Multipart messages are assembled here and handed to the pattern whole (a list), which makes them
atomic across HWM and disconnects; the first part of a ``SNDMORE`` sequence is where the socket
checks that it may send (and waits, or raises ``Again``), as libzmq does.  A received multipart
message is handed out part by part from ``_rx_parts``.  ``bytes`` travel as they are; anything
else goes through :mod:`.parts`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, overload

from ..constants import Flag, SocketOption
from ..errno import EFSM
from ..error import ZMQError
from ..frame import _FINISHED_TRACKER, Frame, MessageTracker
from ..pipe import write_all
from ..runs import Run
from .parts import as_frame, frame_bytes, to_part, tracked_parts, wired_frame
from .waiting import WaitingMixin

_O = SocketOption
SNDMORE = int(Flag.SNDMORE)


class MessagesMixin(WaitingMixin):
    """``send``/``recv`` and their multipart forms (see the module docstring)."""

    __slots__ = ()

    # -- sending --------------------------------------------------------------------------------

    def send(
        self,
        data: Any,
        flags: int = 0,
        copy: bool = True,
        track: bool = False,
        routing_id: int | None = None,
        group: str | None = None,
    ) -> MessageTracker | None:
        """Send one message part (``SNDMORE`` in ``flags`` for more parts to follow).

        ``track=True`` returns a :class:`MessageTracker`, done once brokerless holds the data
        no more; a copied part (``copy=True``, or fewer bytes than ``copy_threshold``) is done
        at once.  A Frame made with ``track=True`` returns its tracker whatever ``track`` says.
        """
        if (
            data.__class__ is bytes
            and not flags
            and not track
            and not self._commands
            and self._tx_parts is None
        ):
            # The fast paths, for a single part: one pipe and a pattern that sends messages
            # through, or a pattern that sends each message to every pipe (a PUB's fan-out)
            # -- queued here, as the pattern and the pipes would queue it, when it fits.
            lane = self._outlane
            if lane is not None:
                q = lane.q
                hwm = lane.hwm
                if (not hwm or len(q) < hwm) and not self._outpipe.terminating:  # type: ignore[union-attr]
                    try:
                        q.append(data)
                        if lane.reader_asleep:
                            lane.wake_reader()
                    except BaseException:  # interrupted once it went in (see Pipe.write)
                        lane.wake_reader()
                        raise
                    return None
            else:
                ends = self._pattern.broadcast
                if ends is not None and self._fault is None and write_all(ends, data):
                    return None
        if self._fault is not None:
            raise self._fault()
        if data.__class__ is not bytes or track:
            data = to_part(data, copy, track, self.copy_threshold)
            track = track or (data.__class__ is Frame and data.tracker is not None)
        if self._rx_parts is not None and self._tx_parts is None:
            self._check_turn()
        if flags & SNDMORE:
            self._send_more(data, flags)
        else:
            msg = data
            if self._tx_parts is not None:
                msg = self._tx_parts
                msg.append(data)
                self._tx_parts = None
                if self._commands:
                    self._process_commands()
                # Room was checked at the first part; if the peer left since, the message is
                # dropped (libzmq never fails the later parts of a message).
                self._xsend(msg)
            else:
                if self._commands:
                    self._process_commands()
                if not self._xsend(msg):
                    self._send_blocking(msg, flags)
        if track:
            return data.tracker if data.__class__ is Frame else _FINISHED_TRACKER
        return None

    def _check_turn(self) -> None:
        """A new message is sent while parts of the one received are unread: EFSM for a REQ or
        REP (see ``Pattern.turn_ends_with_last_part``)."""
        if self._pattern.turn_ends_with_last_part():
            raise ZMQError(
                EFSM,
                "Operation cannot be accomplished in current state: read the rest of the "
                f"message received (RCVMORE) before a {self._type.name} socket sends",
            )

    def _send_more(self, part: Any, flags: int) -> None:
        parts = self._tx_parts
        if parts is not None:
            parts.append(part)
            return
        if self._commands:
            self._process_commands()
        pattern = self._pattern
        if not pattern.xprepare_send(part):
            self._wait_for(lambda: pattern.xprepare_send(part) or None, flags, _O.SNDTIMEO)
        self._tx_parts = [part]

    def _send_blocking(self, msg: Any, flags: int) -> None:
        xsend = self._xsend
        self._wait_for(lambda: xsend(msg) or None, flags, _O.SNDTIMEO)

    def send_multipart(
        self, msg_parts: Sequence[Any], flags: int = 0, copy: bool = True, track: bool = False
    ) -> MessageTracker | None:
        """Send a whole multipart message at once (one hand-over, however many parts).

        ``track=True``: one tracker for the message (see :meth:`send`)."""
        if self._fault is not None:
            raise self._fault()
        if track:
            parts, tracker = tracked_parts(msg_parts, copy, self.copy_threshold)
        else:
            threshold = self.copy_threshold
            parts = [
                p if p.__class__ is bytes else to_part(p, copy, False, threshold)
                for p in msg_parts
            ]
        if not parts:
            raise ValueError("send_multipart needs at least one part")
        if flags & SNDMORE:
            for part in parts:
                self.send(part, flags)
            return None
        if self._tx_parts is not None:
            parts = self._tx_parts + parts
            self._tx_parts = None
        elif self._rx_parts is not None:
            self._check_turn()
        msg = parts[0] if len(parts) == 1 else parts
        if self._commands:
            self._process_commands()
        if not self._xsend(msg):
            self._send_blocking(msg, flags)
        return tracker if track else None

    # -- receiving ------------------------------------------------------------------------------

    def _recv_msg(self, flags: int) -> Any:
        """The next whole message from the pattern, waiting as flags and RCVTIMEO allow."""
        if self._commands:
            self._process_commands()
        msg = self._xrecv()
        if msg is None:
            msg = self._wait_for(self._xrecv, flags, _O.RCVTIMEO, reading=True, tried=True)
        return msg

    @overload
    def recv(self, flags: int = 0, copy: Literal[True] = True, track: bool = False) -> bytes: ...
    @overload
    def recv(self, flags: int = 0, *, copy: Literal[False], track: bool = False) -> Frame: ...
    @overload
    def recv(self, flags: int, copy: Literal[False], track: bool = False) -> Frame: ...
    @overload
    def recv(self, flags: int = 0, copy: bool = True, track: bool = False) -> bytes | Frame: ...
    def recv(self, flags: int = 0, copy: bool = True, track: bool = False) -> Any:
        """Receive one message part (``bytes``, or a :class:`Frame` with ``copy=False``)."""
        lane = self._inlane
        if lane is not None and copy and not self._commands and self._rx_parts is None:
            # The fast path: one pipe, a pattern that passes messages through, a single-part
            # message waiting -- taken here, as the pattern and the pipe would take it.
            q = lane.q
            if q:
                head = q[0]
                if head.__class__ is bytes:
                    q.popleft()
                    if lane.writer_blocked and len(q) + lane.run_in - lane.run_out <= lane.lwm:
                        try:
                            lane.wake_writer()
                        except BaseException:  # interrupted (see Pipe.read): the next recv's
                            q.appendleft(head)
                            raise
                    return head
                if head.__class__ is Run:  # many messages in one item: this thread cuts them
                    lane.cut_head()
                    return self.recv(flags, copy, track)
        if self._fault is not None:
            raise self._fault()
        if self._rx_parts is not None:
            part, more = self._next_part()
        else:
            if self._commands:
                self._process_commands()
            msg = self._xrecv()
            if msg is None:
                msg = self._wait_for(self._xrecv, flags, _O.RCVTIMEO, reading=True, tried=True)
            if msg.__class__ is list:
                self._rx_parts = msg
                self._rx_pos = 1
                part, more = msg[0], True
            else:
                part, more = msg, False
        if copy:
            if part.__class__ is bytes:
                return part
            return frame_bytes(part)
        if self._wired:
            frame = wired_frame(part, more, self._pattern.received_from())
        else:
            frame = as_frame(part, more)
        if track:  # (pyzmq's received frame has one; nothing of the sender's is held here)
            frame.tracker = _FINISHED_TRACKER
        return frame

    def _next_part(self) -> tuple[Any, bool]:
        parts = self._rx_parts
        assert parts is not None  # only called while a multipart message is being received
        part = parts[self._rx_pos]
        self._rx_pos += 1
        if self._rx_pos == len(parts):
            self._rx_parts = None
            return part, False
        return part, True

    @overload
    def recv_multipart(
        self, flags: int = 0, copy: Literal[True] = True, track: bool = False
    ) -> list[bytes]: ...
    @overload
    def recv_multipart(
        self, flags: int = 0, *, copy: Literal[False], track: bool = False
    ) -> list[Frame]: ...
    @overload
    def recv_multipart(
        self, flags: int, copy: Literal[False], track: bool = False
    ) -> list[Frame]: ...
    @overload
    def recv_multipart(
        self, flags: int = 0, copy: bool = True, track: bool = False
    ) -> list[bytes] | list[Frame]: ...
    def recv_multipart(self, flags: int = 0, copy: bool = True, track: bool = False) -> Any:
        """Receive all parts of the next message."""
        if self._fault is not None:
            raise self._fault()
        if self._rx_parts is not None:
            parts = self._rx_parts[self._rx_pos :]
            self._rx_parts = None
        else:
            msg = self._recv_msg(flags)
            parts = msg if msg.__class__ is list else [msg]
        if copy:
            return [p if p.__class__ is bytes else frame_bytes(p) for p in parts]
        last = len(parts) - 1
        if self._wired:
            source = self._pattern.received_from()
            frames = [wired_frame(p, i < last, source) for i, p in enumerate(parts)]
        else:
            frames = [as_frame(p, i < last) for i, p in enumerate(parts)]
        if track:
            for frame in frames:
                frame.tracker = _FINISHED_TRACKER
        return frames

    def recv_into(self, buffer: Any, /, *, nbytes: int = 0, flags: int = 0) -> int:
        """Receive one part into ``buffer``; returns the part's full size (the rest is cut).

        ``nbytes`` (0: the whole buffer) limits how much is written.
        """
        view = memoryview(buffer)
        if view.readonly:
            raise BufferError("recv_into needs a writable buffer")
        if not view.c_contiguous:
            raise BufferError("recv_into needs one contiguous block of memory")
        view = view.cast("B")
        if nbytes < 0 or nbytes > len(view):
            raise ValueError(f"nbytes={nbytes} must be between 0 and the buffer size {len(view)}")
        room = nbytes or len(view)
        part = self.recv(flags, copy=False)
        data = part.buffer.cast("B")
        n = min(room, len(data))
        view[:n] = data[:n]
        return len(data)
