"""pyzmq's ``zmq.sugar``: the module paths code imports the core classes from.

In pyzmq, ``zmq.sugar`` is the Python layer over the libzmq binding; brokerless has no such
split, so each module here only names where the class lives (``zmq.sugar.socket.Socket`` is
``zmq.Socket``).  ``attrsettr`` alone has code of its own: pyzmq's option-attribute mixin,
for user classes built on it.
"""

from __future__ import annotations

# Here but not exported, as in pyzmq: DeviceType, proxy, attrsettr.
from ..constants import DeviceType as DeviceType
from ..context import Context, SyncContext
from ..error import (
    Again,
    ContextTerminated,
    DraftFDWarning,
    InterruptedSystemCall,
    NotDone,
    ZMQBaseError,
    ZMQBindError,
    ZMQError,
    ZMQVersionError,
)
from ..frame import _FINISHED_TRACKER, Frame, Message, MessageTracker
from ..poll import Poller
from ..poll import select_ as select
from ..proxy import device
from ..proxy import proxy as proxy
from ..socket import Socket, SyncSocket
from ..version import (
    __revision__,
    __version__,
    pyzmq_version,
    pyzmq_version_info,
    zmq_version,
    zmq_version_info,
)
from . import attrsettr as attrsettr
from . import context, frame, poll, socket, stopwatch, tracker, version
from .stopwatch import Stopwatch

__all__ = [
    "_FINISHED_TRACKER",
    "Again",
    "Context",
    "ContextTerminated",
    "DraftFDWarning",
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
    "ZMQVersionError",
    "__revision__",
    "__version__",
    "context",
    "device",
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
