"""pyzmq's ``zmq.backend``: there the libzmq binding under the Python layer; here the same
classes as everywhere else (brokerless is one layer, with no libzmq underneath).

pyzmq's binding of libzmq's C API, ``zmq.backend.cython``, does not exist: importing it says so.
"""

from __future__ import annotations

from ..context import Context
from ..error import strerror
from ..frame import Frame, Message
from ..poll import zmq_poll
from ..security import CURVE_AVAILABLE
from ..socket import Socket
from ..version import zmq_version_info


def has(capability: str) -> bool:
    """Whether brokerless offers an optional libzmq capability, by ``zmq_has``'s names:
    "ipc" yes; "curve" when PyNaCl (libsodium) is installed; "pgm", "tipc", "norm", "gssapi",
    "draft" no.  (PLAIN is always there and, as in libzmq, not a capability.)"""
    return capability == "ipc" or (capability == "curve" and CURVE_AVAILABLE)


__all__ = [
    "Context",
    "Frame",
    "Message",
    "Socket",
    "has",
    "strerror",
    "zmq_poll",
    "zmq_version_info",
]
