"""Message parts between the user and the pipes: what ``send`` queues for a user's data, and
what ``recv`` hands back for what a pipe carries.

A pipe carries ``bytes`` (the common case: nothing to convert either way) or a
:class:`~brokerless.frame.Frame` when the part is shared without a copy or tracked.  These
helpers are off the hot path: ``send`` and ``recv`` call them only for anything else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..frame import _FINISHED_TRACKER, Frame, MessageTracker
from ..pipe import Pipe


def to_part(
    data: Any,
    copy: bool,
    track: bool = False,
    copy_threshold: int = 0,
    tracker: MessageTracker | None = None,
) -> Any:
    """What goes into a pipe for one user-supplied part.  Tracked (``track``) and shared
    (``copy=False``, at least ``copy_threshold`` bytes), it travels in a carrier that holds
    ``tracker`` (a new one when None)."""
    if isinstance(data, Frame):
        if data.tracker is None:
            if track:
                raise ValueError("Not a tracked message: make the Frame with track=True")
            return data
        return Frame._carrier(data._data, data.tracker)
    if data.__class__ is bytes:  # here only when tracked
        if copy or len(data) < copy_threshold:
            return data
        return Frame._carrier(data, tracker or MessageTracker())
    if isinstance(data, str):
        raise TypeError("unicode not allowed, use send_string")
    try:
        view = memoryview(data)
    except TypeError:
        raise TypeError(
            f"a message part must be bytes or support the buffer protocol, "
            f"not {type(data).__name__}"
        ) from None
    if copy or view.nbytes < copy_threshold:  # copied: a buffer changed later changes nothing
        return view.tobytes()
    if track:
        return Frame._carrier(
            view if view.contiguous else view.tobytes(), tracker or MessageTracker()
        )
    return Frame(view if view.contiguous else view.tobytes(), copy=False)


def tracked_parts(
    msg_parts: Sequence[Any], copy: bool, copy_threshold: int
) -> tuple[list[Any], MessageTracker]:
    """The parts of a tracked multipart send, and the one tracker for all of them."""
    shared = MessageTracker()
    parts = [to_part(p, copy, True, copy_threshold, shared) for p in msg_parts]
    trackers = {id(t): t for p in parts if p.__class__ is Frame and (t := p.tracker)}
    if not trackers:
        return parts, _FINISHED_TRACKER
    if len(trackers) == 1:
        return parts, next(iter(trackers.values()))
    return parts, MessageTracker(*trackers.values())


def frame_bytes(part: Frame) -> bytes:
    return part.bytes


def as_frame(part: Any, more: bool) -> Frame:
    frame = Frame(part, copy=False)  # a new frame: the sender's carrier is released once dropped
    frame.more = more
    return frame


def wired_frame(part: Any, more: bool, source: Pipe | None) -> Frame:
    """A frame from a socket with tcp/ipc peers: it carries its connection's properties."""
    frame = Frame(part, copy=False)
    frame.more = more
    if source is not None:
        frame._properties = source.metadata  # the connection's, shared by its messages
    return frame
