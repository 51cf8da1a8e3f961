"""brokerless: ZeroMQ's brokerless messaging in pure Python, with pyzmq's API.

``import brokerless as zmq`` runs ordinary pyzmq code.
"""

from __future__ import annotations

from . import constants, utils
from .constants import (
    ContextOption,
    DeviceType,
    Errno,
    Event,
    Flag,
    MessageOption,
    PollEvent,
    SecurityMechanism,
    SocketOption,
    SocketType,
)
from .context import Context
from .curve import curve_keypair, curve_public
from .error import (
    Again,
    ContextTerminated,
    InterruptedSystemCall,
    NotDone,
    ZMQBaseError,
    ZMQBindError,
    ZMQError,
    strerror,
)
from .frame import Frame, Message, MessageTracker
from .poll import Poller
from .poll import select_ as select
from .proxy import device, proxy, proxy_steerable
from .socket import Socket

__version__ = "0.1.0"
#: The ZMTP/libzmq version whose behaviour brokerless follows.
LIBZMQ_COMPAT = (4, 3, 5)


def zmq_version_info() -> tuple[int, int, int]:
    return LIBZMQ_COMPAT


def zmq_version() -> str:
    return ".".join(map(str, LIBZMQ_COMPAT))


def pyzmq_version() -> str:
    return __version__


def has(capability: str) -> bool:
    """Whether brokerless offers an optional libzmq capability, by ``zmq_has``'s names:
    "ipc" yes; "curve" when PyNaCl (libsodium) is installed; "pgm", "tipc", "norm", "gssapi",
    "draft" no.  (PLAIN is always there and, as in libzmq, not a capability.)"""
    from .security import CURVE_AVAILABLE

    return capability == "ipc" or (capability == "curve" and CURVE_AVAILABLE)


# pyzmq's flat names: zmq.PUSH, zmq.SNDHWM, zmq.POLLIN, zmq.EVENT_CONNECTED, zmq.EAGAIN, ...
def _export_flat_names() -> list[str]:
    names: list[str] = []
    module = globals()
    for enum in (
        SocketType,
        SocketOption,
        Flag,
        PollEvent,
        Errno,
        ContextOption,
        MessageOption,
        DeviceType,
    ):
        for name, member in enum.__members__.items():
            module.setdefault(name, member)
            names.append(name)
    for name, member in Event.__members__.items():
        if name.startswith("PROTOCOL_ERROR_"):  # pyzmq: zmq.PROTOCOL_ERROR_ZAP_BAD_VERSION
            module[name] = member
            names.append(name)
            continue
        module["EVENT_" + name] = member
        names.append("EVENT_" + name)
    for name, member in SecurityMechanism.__members__.items():
        module.setdefault(name, member)
        names.append(name)
    module["NOBLOCK"] = Flag.NOBLOCK
    module["IDENTITY"] = SocketOption.ROUTING_ID
    return names


_FLAT_NAMES = _export_flat_names()

__all__ = [
    "LIBZMQ_COMPAT",
    "Again",
    "Context",
    "ContextOption",
    "ContextTerminated",
    "DeviceType",
    "Errno",
    "Event",
    "Flag",
    "Frame",
    "InterruptedSystemCall",
    "Message",
    "MessageOption",
    "MessageTracker",
    "NotDone",
    "PollEvent",
    "Poller",
    "SecurityMechanism",
    "Socket",
    "SocketOption",
    "SocketType",
    "ZMQBaseError",
    "ZMQBindError",
    "ZMQError",
    "constants",
    "curve_keypair",
    "curve_public",
    "device",
    "has",
    "proxy",
    "proxy_steerable",
    "pyzmq_version",
    "select",
    "strerror",
    "utils",
    "zmq_version",
    "zmq_version_info",
    *_FLAT_NAMES,
]
