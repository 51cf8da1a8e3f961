"""pyzmq's exception hierarchy: ``ZMQError(errno, msg)`` and its typed subclasses."""

from __future__ import annotations

import os
import sys
from typing import ClassVar

from .constants import Errno
from .version import zmq_version

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


def zmq_errno() -> int:
    """libzmq's ``zmq_errno``: the errno of the ZMQError this thread is handling, else 0.

    In libzmq this is C's thread-local ``errno``, meaningful only right after a failed call;
    brokerless has no C layer and every failure is a ZMQError carrying its errno.  So the errno
    is that of the exception being handled (inside ``except zmq.ZMQError:``, per thread and per
    coroutine, as Python keeps it), and 0 anywhere else: nothing is recorded on the hot path.
    """
    exc = sys.exc_info()[1]
    errno = exc.errno if isinstance(exc, ZMQError) else None
    return errno or 0


class DraftFDWarning(RuntimeWarning):
    """pyzmq's warning that ``socket.FD`` on a thread-safe (draft) socket is experimental.

    brokerless has no draft sockets, so never warns it; the class is here for code that
    filters it.
    """

    def __init__(self, msg: str = "") -> None:
        super().__init__(
            msg
            or "socket.FD on thread-safe (draft) sockets is experimental and may be removed; "
            "silence this with warnings.simplefilter('ignore', zmq.error.DraftFDWarning)"
        )


class ZMQBaseError(Exception):
    """Base of every brokerless exception."""


class ZMQError(ZMQBaseError):
    """An error with a libzmq errno, raised by socket and context operations.

    ``str(err)`` is the message; ``err.errno`` the number, comparable with ``zmq.EAGAIN`` etc.
    A str in the errno's place is the message, as pyzmq takes it (``ZMQError("no room")``);
    a typed subclass then keeps its own errno (``Again("window full").errno == EAGAIN``).
    """

    errno: int | None
    strerror: str
    #: The errno of an error made without one: the typed subclasses' own.
    default_errno: ClassVar[int | None] = None

    def __init__(self, errno: int | str | None = None, msg: str | None = None) -> None:
        if isinstance(errno, str):  # the message in the errno's place
            if msg is None:
                msg = errno
            errno = self.default_errno
        elif errno is None:  # (pyzmq's: libzmq's errno, 0 -- "Success" -- when there is none)
            errno = self.default_errno if self.default_errno is not None else zmq_errno()
        text = msg if msg is not None else (strerror(errno) if errno is not None else "")
        # ``args`` stay what the error was made with, as pyzmq's (``ZMQError(EAGAIN).args``
        # is ``(EAGAIN,)``).  First: OSError's __init__ (InterruptedSystemCall's base) resets
        # errno and strerror.
        super().__init__(*self.args)
        self.errno = errno
        self.strerror = text

    def __str__(self) -> str:
        return self.strerror

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.strerror!r})"


class ZMQBindError(ZMQBaseError):
    """``bind_to_random_port`` found no free port."""


class Again(ZMQError):
    """EAGAIN: the operation would block (non-blocking call, or SNDTIMEO/RCVTIMEO expired)."""

    default_errno = Errno.EAGAIN


class ContextTerminated(ZMQError):
    """ETERM: the socket's context was terminated; close the socket."""

    default_errno = Errno.ETERM


# OSError declares ``strerror: str | None``; ZMQError's is always a str (set after OSError's
# __init__).  pyzmq's hierarchy has both bases too.
class InterruptedSystemCall(ZMQError, InterruptedError):  # type: ignore[misc]
    """EINTR."""

    default_errno = Errno.EINTR


class NotDone(ZMQBaseError):
    """A tracker's wait timed out."""


class ZMQVersionError(NotImplementedError):
    """A feature needs a newer libzmq than the one emulated (``zmq.zmq_version()``).

    As in pyzmq, a NotImplementedError and not a ZMQBaseError.
    """

    msg: str
    min_version: str
    version: str

    def __init__(self, min_version: str, msg: str = "Feature") -> None:
        super().__init__(min_version, msg)
        self.msg = msg
        self.min_version = min_version
        self.version = zmq_version()

    def __str__(self) -> str:
        return f"{self.msg} requires libzmq >= {self.min_version}, have {self.version}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}('{self}')"


def error(errnum: int, msg: str) -> ZMQError:
    """The typed exception for ``errnum`` carrying ``msg``."""
    cls = _TYPED.get(errnum, ZMQError)
    return cls(errnum, msg)


_TYPED: dict[int, type[ZMQError]] = {
    Errno.EAGAIN: Again,
    Errno.ETERM: ContextTerminated,
    Errno.EINTR: InterruptedSystemCall,
}

__all__ = [
    "Again",
    "ContextTerminated",
    "DraftFDWarning",
    "InterruptedSystemCall",
    "NotDone",
    "ZMQBaseError",
    "ZMQBindError",
    "ZMQError",
    "ZMQVersionError",
]
