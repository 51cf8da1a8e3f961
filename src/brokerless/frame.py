"""Message parts handed to users with ``copy=False``, and send trackers.

Small messages travel as ``bytes``; a :class:`Frame` wraps any buffer so it can be passed by
reference (zero-copy) and carries ``more`` on receive, as pyzmq's does.  A frame received over
tcp or ipc also carries its connection's properties (``frame.get("User-Id")``, ``"Socket-Type"``,
``"Peer-Address"``, the peer's ``X-`` metadata): the dict every message of that connection
shares, not a copy per message.
"""

from __future__ import annotations

import builtins
import threading
import time
from typing import Any, Final

from .constants import MessageOption
from .errno import EINVAL
from .error import NotDone, ZMQError


class MessageTracker:
    """Tells when brokerless no longer holds a message sent with ``track=True``.

    A tracker made by a :class:`Frame` (``track=True``) or a tracked send is done once every
    holder of the message is gone: the frame itself and each copy brokerless queued (delivered,
    written out, or discarded at HWM or on close).  ``MessageTracker(*towatch)`` combines
    frames, trackers and ``threading.Event`` objects: done when all of them are.
    """

    __slots__ = ("_event", "_holders", "_lock", "_watched")

    def __init__(self, *towatch: MessageTracker | Frame | threading.Event) -> None:
        self._event = threading.Event()
        self._event.set()  # done, until it has a holder (``_hold``) or something to watch
        self._holders = 0
        self._lock = threading.Lock()
        self._watched: list[MessageTracker | threading.Event] = []
        for obj in towatch:
            if isinstance(obj, Frame):
                if obj.tracker is None:
                    raise ValueError("Not a tracked message: make the Frame with track=True")
                obj = obj.tracker
            elif not isinstance(obj, MessageTracker | threading.Event):
                raise TypeError(
                    f"MessageTracker watches Frames, MessageTrackers and threading.Events, "
                    f"not {type(obj).__name__}"
                )
            self._watched.append(obj)

    @property
    def done(self) -> bool:
        if not self._event.is_set():
            return False
        return all(w.is_set() if isinstance(w, threading.Event) else w.done for w in self._watched)

    def wait(self, timeout: float | None = -1) -> None:
        """Wait until done, at most ``timeout`` seconds (negative or None: no limit); NotDone
        when time runs out."""
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        for event in (self._event, *self._watched):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if isinstance(event, MessageTracker):
                event.wait(-1 if left is None else left)
            elif not event.wait(left):
                raise NotDone()

    def _hold(self) -> None:
        """One more holder of the tracked message."""
        with self._lock:
            self._holders += 1
            self._event.clear()

    def _release(self) -> None:
        """A holder let go; the last one makes the tracker done."""
        with self._lock:
            self._holders -= 1
            if self._holders <= 0:
                self._event.set()


#: What a tracked send returns when nothing is left to track (the message was copied).
_FINISHED_TRACKER: Final[MessageTracker] = MessageTracker()

#: ``copy=False`` sends of fewer bytes than this are copied anyway (pyzmq's default threshold).
COPY_THRESHOLD = 65536


class Frame:
    """One message part: ``bytes``, ``buffer`` (a memoryview) and ``more``.

    ``data`` is anything with the buffer protocol (one contiguous block; None: empty).  As in
    pyzmq, ``copy=True`` copies it, ``copy=False`` keeps it by reference (zero-copy), and the
    default copies a buffer of fewer than ``copy_threshold`` bytes (default
    :data:`COPY_THRESHOLD`) and keeps a larger one, so a small buffer changed afterwards does
    not change the frame.  ``bytes`` is immutable: it is always kept, never copied.  With
    ``track=True`` the frame has a :class:`MessageTracker`, done once the frame and every copy
    of it brokerless queued are gone.
    """

    # _properties: the properties of the connection the frame came from, set only on frames
    # received over tcp/ipc (unset costs nothing on the others: ``properties`` reads it).
    __slots__ = ("_buffer", "_bytes", "_data", "_properties", "_releases", "more", "tracker")
    _properties: dict[str, bytes] | None

    def __init__(
        self,
        data: Any = b"",
        track: bool = False,
        copy: bool | None = None,
        copy_threshold: int | None = None,
    ) -> None:
        self._releases = False  # first: __del__ runs even when the checks below fail
        if data.__class__ is not bytes:
            data = _frame_data(data)
            if data.__class__ is not bytes and copy is not False:
                view = memoryview(data)
                if copy or view.nbytes < (
                    COPY_THRESHOLD if copy_threshold is None else copy_threshold
                ):
                    data = view.tobytes()
        self._data = data
        self._bytes: bytes | None = data if data.__class__ is bytes else None
        self._buffer: memoryview | None = None
        self.more = False
        self.tracker: MessageTracker | None = None
        if track:
            self._track(copy, copy_threshold)

    def _track(self, copy: bool | None, copy_threshold: int | None) -> None:
        """pyzmq's tracker: done at once when the data was copied, or is small enough to be
        (``bytes`` are kept, never copied: nothing of the caller's is held either way); else
        done once the frame and every copy of it brokerless queued are gone."""
        if copy is None:
            copy = len(self) < (COPY_THRESHOLD if copy_threshold is None else copy_threshold)
        if copy:
            self.tracker = _FINISHED_TRACKER
        else:
            self._hold(MessageTracker())

    def _hold(self, tracker: MessageTracker) -> None:
        """Be one of ``tracker``'s holders (released when this frame goes); the finished
        tracker (a copied message's) stays done."""
        self.tracker = tracker
        if tracker is not _FINISHED_TRACKER:
            tracker._hold()
            self._releases = True

    @classmethod
    def _carrier(cls, data: Any, tracker: MessageTracker) -> Frame:
        """The frame that travels for a tracked message: when brokerless drops its last
        reference (delivered, written out, or discarded at HWM or on close), it lets go of the
        tracker -- however the message ended, ``tracker.wait()`` returns."""
        frame = cls(data, copy=False)
        frame._hold(tracker)
        return frame

    @property
    def properties(self) -> dict[str, bytes] | None:
        """The properties of the connection the frame came from (None: none, e.g. inproc)."""
        return getattr(self, "_properties", None)

    def __del__(self) -> None:
        if self._releases and self.tracker is not None:
            self.tracker._release()

    def __copy__(self) -> Frame:
        """Another frame on the same data (and tracker: it holds the message too)."""
        frame = type(self)(self._data, copy=False)
        frame.more = self.more
        if self.tracker is not None:
            frame._hold(self.tracker)
        return frame

    @property
    def bytes(self) -> bytes:
        """The content as ``bytes`` (copied once, then cached)."""
        b = self._bytes
        if b is None:
            b = self._bytes = memoryview(self._data).tobytes()
        return b

    @property
    def buffer(self) -> memoryview:
        """A memoryview of the content, without copying (made once, then cached)."""
        view = self._buffer
        if view is None:
            view = self._buffer = memoryview(self._data)
        return view

    def __bytes__(self) -> builtins.bytes:
        return self.bytes

    def __buffer__(self, flags: int) -> memoryview:  # Python >= 3.12 buffer protocol
        return memoryview(self._data)

    def __len__(self) -> int:
        data = self._data
        return len(data) if data.__class__ is bytes else memoryview(data).nbytes

    def set(self, option: int, value: int) -> None:
        if option == MessageOption.MORE:
            self.more = bool(value)
            return
        raise ValueError(f"Frame option {option} cannot be set")

    def get(self, option: int | str | builtins.bytes) -> int | str:
        """A frame option (``zmq.MORE``) or, by name, a property of the connection the frame
        came from, as text (``"User-Id"``, ``"Socket-Type"``, ``"Peer-Address"``, ``"X-..."``;
        names as spelled, as libzmq looks them up).  An unknown property is EINVAL."""
        if isinstance(option, int):
            if option == MessageOption.MORE:
                return int(self.more)
            if option == MessageOption.SHARED:
                return 0
            raise ValueError(f"unknown Frame option {option}")
        name = option.decode("utf8") if isinstance(option, bytes) else option
        if not isinstance(name, str):
            raise TypeError(f"expected str, got: {option!r}")
        props = self.properties
        value = None if props is None else props.get(name)
        if value is None:
            raise ZMQError(EINVAL, f"Invalid argument: the frame has no property {name!r}")
        return value.decode("utf8", "replace")

    def __getitem__(self, key: int | str | builtins.bytes) -> int | str:
        """``frame["User-Id"]`` is ``frame.get("User-Id")`` (pyzmq's spelling)."""
        return self.get(key)

    def __repr__(self) -> str:
        """pyzmq's form: ``<zmq.Frame(b'abc')>``, long content cut to 12 bytes and a size."""
        cls = type(self)
        name = "zmq.Frame" if cls is Frame else f"{cls.__module__}.{cls.__qualname__}"
        size = len(self)
        shown = repr(self.bytes) if size <= 16 else f"{bytes(self.buffer[:12])!r}...{_size(size)}"
        return f"<{name}({shown}){' more' if self.more else ''}>"


def _size(nbytes: int) -> str:
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if nbytes >= scale:
            return f"{nbytes // scale}{unit}"
    return f"{nbytes}B"


def _frame_data(data: Any) -> Any:
    """What a Frame keeps of ``data`` (checked now: a bad buffer fails here, not at send)."""
    if isinstance(data, Frame):
        return data._data
    if data is None:
        return b""
    if isinstance(data, str):
        raise TypeError("Frame data must be bytes or a buffer, not str: encode it first")
    view = data if data.__class__ is memoryview else _memoryview(data)
    if not view.contiguous:
        raise BufferError("Frame data must be one contiguous block of memory")
    return data


def _memoryview(data: Any) -> memoryview:
    try:
        return memoryview(data)
    except TypeError:
        raise TypeError(
            f"Frame data must be bytes or support the buffer protocol, not {type(data).__name__}"
        ) from None


Message = Frame
