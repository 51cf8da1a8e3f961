"""pyzmq's ``zmq.sugar``: the module paths code imports the core classes from.

In pyzmq, ``zmq.sugar`` is the Python layer over the libzmq binding; brokerless has no such
split, so each module here only names where the class lives (``zmq.sugar.socket.Socket`` is
``zmq.Socket``).
"""

from __future__ import annotations

from ..context import Context, SyncContext
from ..error import (
    Again,
    ContextTerminated,
    InterruptedSystemCall,
    NotDone,
    ZMQBaseError,
    ZMQBindError,
    ZMQError,
)
from ..frame import _FINISHED_TRACKER, Frame, Message, MessageTracker
from ..poll import Poller
from ..poll import select_ as select
from ..socket import Socket, SyncSocket
from ..version import (
    __revision__,
    __version__,
    pyzmq_version,
    pyzmq_version_info,
    zmq_version,
    zmq_version_info,
)
from . import context, frame, poll, socket, stopwatch, tracker, version
from .stopwatch import Stopwatch

__all__ = [
    "_FINISHED_TRACKER",
    "Again",
    "Context",
    "ContextTerminated",
    "Frame",
    "InterruptedSystemCall",
    "Message",
    "MessageTracker",
    "NotDone",
    "Poller",
    "Socket",
    "Stopwatch",
    "SyncContext",
    "SyncSocket",
    "ZMQBaseError",
    "ZMQBindError",
    "ZMQError",
    "__revision__",
    "__version__",
    "context",
    "frame",
    "poll",
    "pyzmq_version",
    "pyzmq_version_info",
    "select",
    "socket",
    "stopwatch",
    "tracker",
    "version",
    "zmq_version",
    "zmq_version_info",
]
