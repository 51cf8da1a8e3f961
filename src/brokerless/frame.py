"""Message parts handed to users with ``copy=False``, and send trackers.

Small messages travel as ``bytes``; a :class:`Frame` wraps any buffer so it can be passed by
reference (zero-copy) and carries ``more`` on receive, as pyzmq's does.  A frame received over
tcp or ipc also carries its connection's properties (``frame.get("User-Id")``, ``"Socket-Type"``,
``"Peer-Address"``, the peer's ``X-`` metadata): the dict every message of that connection
shares, not a copy per message.
"""

from __future__ import annotations

import threading
from typing import Any

from .constants import MessageOption
from .errno import EINVAL
from .error import NotDone, ZMQError


class MessageTracker:
    """Tells when brokerless no longer holds a message sent with ``track=True``."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event = threading.Event()

    @property
    def done(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = -1) -> None:
        if timeout is not None and timeout < 0:
            timeout = None
        if not self._event.wait(timeout):
            raise NotDone()

    def _release(self) -> None:
        self._event.set()


class Frame:
    """One message part: ``bytes``, ``buffer`` (a memoryview) and ``more``."""

    # _properties: the properties of the connection the frame came from, set only on frames
    # received over tcp/ipc (unset costs nothing on the others: ``properties`` reads it).
    __slots__ = ("_bytes", "_data", "_properties", "_releases", "more", "tracker")

    def __init__(self, data: Any = b"", track: bool = False, copy: bool | None = None) -> None:
        if isinstance(data, str):
            raise TypeError("Frame data must be bytes or a buffer, not str: encode it first")
        if isinstance(data, Frame):
            data = data._data
        if copy and data.__class__ is not bytes:
            data = memoryview(data).tobytes()
        self._data = data
        self._bytes: bytes | None = data if data.__class__ is bytes else None
        self.more = False
        self.tracker: MessageTracker | None = MessageTracker() if track else None
        self._releases = False

    @classmethod
    def _carrier(cls, data: Any, tracker: MessageTracker) -> Frame:
        """The frame that travels for a tracked message: when brokerless drops its last
        reference (delivered, written out, or discarded at HWM or on close), the tracker is
        done -- however the message ended, ``tracker.wait()`` returns."""
        frame = cls(data)
        frame.tracker = tracker
        frame._releases = True
        return frame

    @property
    def properties(self) -> dict[str, bytes] | None:
        """The properties of the connection the frame came from (None: none, e.g. inproc)."""
        return getattr(self, "_properties", None)

    def __del__(self) -> None:
        if self._releases:
            self.tracker._release()

    @property
    def bytes(self) -> bytes:
        """The content as ``bytes`` (copied once, then cached)."""
        b = self._bytes
        if b is None:
            b = self._bytes = memoryview(self._data).tobytes()
        return b

    @property
    def buffer(self) -> memoryview:
        return memoryview(self._data)

    def __bytes__(self) -> bytes:
        return self.bytes

    def __buffer__(self, flags: int) -> memoryview:  # Python >= 3.12 buffer protocol
        return memoryview(self._data)

    def __len__(self) -> int:
        data = self._data
        return len(data) if data.__class__ is bytes else memoryview(data).nbytes

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Frame):
            return self.bytes == other.bytes
        if isinstance(other, bytes | bytearray | memoryview):
            return self.bytes == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def set(self, option: int, value: int) -> None:
        if option == MessageOption.MORE:
            self.more = bool(value)
            return
        raise ValueError(f"Frame option {option} cannot be set")

    def get(self, option: int | str | bytes) -> int | str:
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

    def __getitem__(self, key: int | str | bytes) -> int | str:
        """``frame["User-Id"]`` is ``frame.get("User-Id")`` (pyzmq's spelling)."""
        return self.get(key)

    def __repr__(self) -> str:
        return f"<Frame {len(self)} bytes{' more' if self.more else ''}>"


Message = Frame
