"""pyzmq's exception hierarchy: ``ZMQError(errno, msg)`` and its typed subclasses."""

from __future__ import annotations

import os

from .constants import Errno

_ZMQ_MESSAGES = {
    Errno.EFSM: "Operation cannot be accomplished in current state",
    Errno.ENOCOMPATPROTO: "The protocol is not compatible with the socket type",
    Errno.ETERM: "Context was terminated",
    Errno.EMTHREAD: "No thread available",
}


def strerror(errnum: int) -> str:
    """The text libzmq's ``zmq_strerror`` gives for an error number."""
    if errnum in _ZMQ_MESSAGES:
        return _ZMQ_MESSAGES[Errno(errnum)]
    return os.strerror(errnum)


class ZMQBaseError(Exception):
    """Base of every brokerless exception."""


class ZMQError(ZMQBaseError):
    """An error with a libzmq errno, raised by socket and context operations.

    ``str(err)`` is the message; ``err.errno`` the number, comparable with ``zmq.EAGAIN`` etc.
    """

    errno: int | None
    strerror: str

    def __init__(self, errno: int | None = None, msg: str | None = None) -> None:
        self.errno = errno
        self.strerror = msg if msg is not None else (strerror(errno) if errno is not None else "")
        super().__init__(self.strerror)

    def __str__(self) -> str:
        return self.strerror

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.strerror!r})"


class ZMQBindError(ZMQBaseError):
    """``bind_to_random_port`` found no free port."""


class Again(ZMQError):
    """EAGAIN: the operation would block (non-blocking call, or SNDTIMEO/RCVTIMEO expired)."""

    def __init__(self, errno: int | None = Errno.EAGAIN, msg: str | None = None) -> None:
        super().__init__(errno, msg)


class ContextTerminated(ZMQError):
    """ETERM: the socket's context was terminated; close the socket."""

    def __init__(self, errno: int | None = Errno.ETERM, msg: str | None = None) -> None:
        super().__init__(errno, msg)


# OSError declares ``strerror: str | None``; ZMQError's is always a str (pyzmq's hierarchy has
# both bases too).
class InterruptedSystemCall(ZMQError, InterruptedError):  # type: ignore[misc]
    """EINTR."""

    def __init__(self, errno: int | None = Errno.EINTR, msg: str | None = None) -> None:
        super().__init__(errno, msg)


class NotDone(ZMQBaseError):
    """A tracker's wait timed out."""


def error(errnum: int, msg: str) -> ZMQError:
    """The typed exception for ``errnum`` carrying ``msg``."""
    cls = _TYPED.get(errnum, ZMQError)
    return cls(errnum, msg)


_TYPED: dict[int, type[ZMQError]] = {
    Errno.EAGAIN: Again,
    Errno.ETERM: ContextTerminated,
    Errno.EINTR: InterruptedSystemCall,
}
