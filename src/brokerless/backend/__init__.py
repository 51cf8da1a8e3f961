"""pyzmq's ``zmq.backend``: there the libzmq binding under the Python layer; here the same
classes as everywhere else (brokerless is one layer, with no libzmq underneath).

pyzmq's binding of libzmq's C API, ``zmq.backend.cython``, does not exist: importing it says so.
"""

from __future__ import annotations

from ..context import Context
from ..curve import curve_keypair, curve_public
from ..devices.monitoredqueue import monitored_queue as monitored_queue
from ..error import strerror, zmq_errno
from ..frame import Frame, Message
from ..poll import zmq_poll
from ..proxy import proxy, proxy_steerable
from ..security import CURVE_AVAILABLE
from ..socket import Socket
from ..transport.address import IPC_PATH_MAX_LEN
from ..version import zmq_version_info

#: Whether pyzmq was built with libzmq's draft API: brokerless has none (see ``zmq.DRAFT_API``).
PYZMQ_DRAFT_API = False


def has(capability: str) -> bool:
    """Whether brokerless offers an optional libzmq capability, by ``zmq_has``'s names:
    "ipc" yes; "curve" when PyNaCl (libsodium) is installed; "pgm", "tipc", "norm", "gssapi",
    "draft" no.  (PLAIN is always there and, as in libzmq, not a capability.)"""
    return capability == "ipc" or (capability == "curve" and CURVE_AVAILABLE)


# pyzmq's public names; monitored_queue, like pyzmq's, is there but not among them.
__all__ = [
    "IPC_PATH_MAX_LEN",
    "PYZMQ_DRAFT_API",
    "Context",
    "Frame",
    "Message",
    "Socket",
    "curve_keypair",
    "curve_public",
    "has",
    "proxy",
    "proxy_steerable",
    "strerror",
    "zmq_errno",
    "zmq_poll",
    "zmq_version_info",
]
