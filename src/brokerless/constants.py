"""libzmq's constants, with libzmq's numeric values, and the socket option table.

The option table says, for every option brokerless understands, the type of its value, its
default, and whether it can be set and read.  ``socket.py`` builds the typed option attributes
(``sock.sndhwm``, ``sock.linger``, ...) and the checks of ``setsockopt``/``getsockopt`` from it.
"""

from __future__ import annotations

import errno as _errno
import socket as _socket
from dataclasses import dataclass
from enum import IntEnum, IntFlag


class SocketType(IntEnum):
    PAIR = 0
    PUB = 1
    SUB = 2
    REQ = 3
    REP = 4
    DEALER = 5
    ROUTER = 6
    PULL = 7
    PUSH = 8
    XPUB = 9
    XSUB = 10
    STREAM = 11
    SERVER = 12
    CLIENT = 13
    RADIO = 14
    DISH = 15
    GATHER = 16
    SCATTER = 17
    DGRAM = 18
    PEER = 19
    CHANNEL = 20


class Flag(IntFlag):
    DONTWAIT = 1
    NOBLOCK = 1
    SNDMORE = 2


class PollEvent(IntFlag):
    POLLIN = 1
    POLLOUT = 2
    POLLERR = 4
    POLLPRI = 8


class Event(IntFlag):
    """Socket monitor events (``zmq_socket_monitor``)."""

    CONNECTED = 0x0001
    CONNECT_DELAYED = 0x0002
    CONNECT_RETRIED = 0x0004
    LISTENING = 0x0008
    BIND_FAILED = 0x0010
    ACCEPTED = 0x0020
    ACCEPT_FAILED = 0x0040
    CLOSED = 0x0080
    CLOSE_FAILED = 0x0100
    DISCONNECTED = 0x0200
    MONITOR_STOPPED = 0x0400
    HANDSHAKE_FAILED_NO_DETAIL = 0x0800
    HANDSHAKE_SUCCEEDED = 0x1000
    HANDSHAKE_FAILED_PROTOCOL = 0x2000
    HANDSHAKE_FAILED_AUTH = 0x4000
    ALL_V1 = 0xFFFF
    ALL = 0xFFFF
    PIPES_STATS = 0x10000
    ALL_V2 = 0x1FFFF
    PROTOCOL_ERROR_ZMTP_UNSPECIFIED = 0x10000000
    PROTOCOL_ERROR_ZAP_UNSPECIFIED = 0x20000000


_HAUSNUMERO = 156384712


class Errno(IntEnum):
    """Error numbers: the platform's for POSIX errors, libzmq's own above ZMQ_HAUSNUMERO."""

    EAGAIN = _errno.EAGAIN
    EFAULT = _errno.EFAULT
    EACCES = _errno.EACCES
    EINVAL = _errno.EINVAL
    ENOENT = _errno.ENOENT
    EINTR = _errno.EINTR
    ENOTSUP = _errno.EOPNOTSUPP
    EPROTONOSUPPORT = _errno.EPROTONOSUPPORT
    ENOBUFS = _errno.ENOBUFS
    ENETDOWN = _errno.ENETDOWN
    EADDRINUSE = _errno.EADDRINUSE
    EADDRNOTAVAIL = _errno.EADDRNOTAVAIL
    ECONNREFUSED = _errno.ECONNREFUSED
    EINPROGRESS = _errno.EINPROGRESS
    ENOTSOCK = _errno.ENOTSOCK
    EMSGSIZE = _errno.EMSGSIZE
    EAFNOSUPPORT = _errno.EAFNOSUPPORT
    ENETUNREACH = _errno.ENETUNREACH
    ECONNABORTED = _errno.ECONNABORTED
    ECONNRESET = _errno.ECONNRESET
    ENOTCONN = _errno.ENOTCONN
    ETIMEDOUT = _errno.ETIMEDOUT
    EHOSTUNREACH = _errno.EHOSTUNREACH
    ENETRESET = _errno.ENETRESET
    EFSM = _HAUSNUMERO + 51
    ENOCOMPATPROTO = _HAUSNUMERO + 52
    ETERM = _HAUSNUMERO + 53
    EMTHREAD = _HAUSNUMERO + 54


class ContextOption(IntEnum):
    IO_THREADS = 1
    MAX_SOCKETS = 2
    SOCKET_LIMIT = 3
    MAX_MSGSZ = 5
    MSG_T_SIZE = 6
    THREAD_NAME_PREFIX = 9
    BLOCKY = 70


class MessageOption(IntEnum):
    MORE = 1
    SRCFD = 2
    SHARED = 3


class SecurityMechanism(IntEnum):
    NULL = 0
    PLAIN = 1
    CURVE = 2
    GSSAPI = 3


class SocketOption(IntEnum):
    HWM = 1
    AFFINITY = 4
    ROUTING_ID = 5
    IDENTITY = 5
    SUBSCRIBE = 6
    UNSUBSCRIBE = 7
    RATE = 8
    RECOVERY_IVL = 9
    SNDBUF = 11
    RCVBUF = 12
    RCVMORE = 13
    FD = 14
    EVENTS = 15
    TYPE = 16
    LINGER = 17
    RECONNECT_IVL = 18
    BACKLOG = 19
    RECONNECT_IVL_MAX = 21
    MAXMSGSIZE = 22
    SNDHWM = 23
    RCVHWM = 24
    MULTICAST_HOPS = 25
    RCVTIMEO = 27
    SNDTIMEO = 28
    IPV4ONLY = 31
    LAST_ENDPOINT = 32
    ROUTER_MANDATORY = 33
    TCP_KEEPALIVE = 34
    TCP_KEEPALIVE_CNT = 35
    TCP_KEEPALIVE_IDLE = 36
    TCP_KEEPALIVE_INTVL = 37
    IMMEDIATE = 39
    XPUB_VERBOSE = 40
    ROUTER_RAW = 41
    IPV6 = 42
    MECHANISM = 43
    PLAIN_SERVER = 44
    PLAIN_USERNAME = 45
    PLAIN_PASSWORD = 46
    CURVE_SERVER = 47
    CURVE_PUBLICKEY = 48
    CURVE_SECRETKEY = 49
    CURVE_SERVERKEY = 50
    PROBE_ROUTER = 51
    REQ_CORRELATE = 52
    REQ_RELAXED = 53
    CONFLATE = 54
    ZAP_DOMAIN = 55
    ROUTER_HANDOVER = 56
    TOS = 57
    CONNECT_ROUTING_ID = 61
    HANDSHAKE_IVL = 66
    XPUB_NODROP = 69
    BLOCKY = 70
    XPUB_MANUAL = 71
    XPUB_WELCOME_MSG = 72
    STREAM_NOTIFY = 73
    INVERT_MATCHING = 74
    HEARTBEAT_IVL = 75
    HEARTBEAT_TTL = 76
    HEARTBEAT_TIMEOUT = 77
    XPUB_VERBOSER = 78
    CONNECT_TIMEOUT = 79
    TCP_MAXRT = 80
    THREAD_SAFE = 81
    BINDTODEVICE = 92
    ZAP_ENFORCE_DOMAIN = 93
    LOOPBACK_FASTPATH = 94
    ROUTER_NOTIFY = 97


@dataclass(frozen=True, slots=True)
class OptionSpec:
    """What one socket option holds: value type, default, and who may set or read it."""

    kind: type  # int or bytes
    default: int | bytes
    settable: bool = True
    gettable: bool = True


_O = SocketOption
_INT, _BYTES = int, bytes

#: Every option brokerless accepts.  Options a transport uses (reconnect, heartbeat, tcp
#: keep-alive, ...) are stored now and honoured by the transport that needs them.
OPTIONS: dict[SocketOption, OptionSpec] = {
    _O.AFFINITY: OptionSpec(_INT, 0),
    _O.ROUTING_ID: OptionSpec(_BYTES, b""),
    _O.SUBSCRIBE: OptionSpec(_BYTES, b"", gettable=False),
    _O.UNSUBSCRIBE: OptionSpec(_BYTES, b"", gettable=False),
    _O.RATE: OptionSpec(_INT, 100),
    _O.RECOVERY_IVL: OptionSpec(_INT, 10000),
    _O.SNDBUF: OptionSpec(_INT, -1),
    _O.RCVBUF: OptionSpec(_INT, -1),
    _O.RCVMORE: OptionSpec(_INT, 0, settable=False),
    _O.FD: OptionSpec(_INT, -1, settable=False),
    _O.EVENTS: OptionSpec(_INT, 0, settable=False),
    _O.TYPE: OptionSpec(_INT, 0, settable=False),
    _O.LINGER: OptionSpec(_INT, -1),
    _O.RECONNECT_IVL: OptionSpec(_INT, 100),
    # libzmq's default is 100; a Python accept loop is slower than libzmq's, so the kernel's
    # queue has to absorb a burst of connections (beyond it, peers retry their SYNs after 1 s).
    _O.BACKLOG: OptionSpec(_INT, _socket.SOMAXCONN),
    _O.RECONNECT_IVL_MAX: OptionSpec(_INT, 0),
    _O.MAXMSGSIZE: OptionSpec(_INT, -1),
    _O.SNDHWM: OptionSpec(_INT, 1000),
    _O.RCVHWM: OptionSpec(_INT, 1000),
    _O.MULTICAST_HOPS: OptionSpec(_INT, 1),
    _O.RCVTIMEO: OptionSpec(_INT, -1),
    _O.SNDTIMEO: OptionSpec(_INT, -1),
    _O.IPV4ONLY: OptionSpec(_INT, 1),
    _O.LAST_ENDPOINT: OptionSpec(_BYTES, b"", settable=False),
    _O.ROUTER_MANDATORY: OptionSpec(_INT, 0, gettable=False),
    _O.TCP_KEEPALIVE: OptionSpec(_INT, -1),
    _O.TCP_KEEPALIVE_CNT: OptionSpec(_INT, -1),
    _O.TCP_KEEPALIVE_IDLE: OptionSpec(_INT, -1),
    _O.TCP_KEEPALIVE_INTVL: OptionSpec(_INT, -1),
    _O.IMMEDIATE: OptionSpec(_INT, 0),
    _O.XPUB_VERBOSE: OptionSpec(_INT, 0, gettable=False),
    _O.IPV6: OptionSpec(_INT, 0),
    _O.MECHANISM: OptionSpec(_INT, 0, settable=False),
    _O.PROBE_ROUTER: OptionSpec(_INT, 0, gettable=False),
    _O.REQ_CORRELATE: OptionSpec(_INT, 0, gettable=False),
    _O.REQ_RELAXED: OptionSpec(_INT, 0, gettable=False),
    _O.CONFLATE: OptionSpec(_INT, 0),
    _O.ROUTER_HANDOVER: OptionSpec(_INT, 0, gettable=False),
    _O.TOS: OptionSpec(_INT, 0),
    _O.CONNECT_ROUTING_ID: OptionSpec(_BYTES, b"", gettable=False),
    _O.HANDSHAKE_IVL: OptionSpec(_INT, 30000),
    _O.XPUB_NODROP: OptionSpec(_INT, 0, gettable=False),
    _O.XPUB_MANUAL: OptionSpec(_INT, 0, gettable=False),
    _O.XPUB_WELCOME_MSG: OptionSpec(_BYTES, b"", gettable=False),
    _O.INVERT_MATCHING: OptionSpec(_INT, 0),
    _O.HEARTBEAT_IVL: OptionSpec(_INT, 0),
    _O.HEARTBEAT_TTL: OptionSpec(_INT, 0),
    _O.HEARTBEAT_TIMEOUT: OptionSpec(_INT, -1),
    _O.XPUB_VERBOSER: OptionSpec(_INT, 0, gettable=False),
    _O.STREAM_NOTIFY: OptionSpec(_INT, 1, gettable=False),
    _O.CONNECT_TIMEOUT: OptionSpec(_INT, 0),
    _O.TCP_MAXRT: OptionSpec(_INT, 0),
    _O.THREAD_SAFE: OptionSpec(_INT, 0, settable=False),
}

#: Options whose value is text (accepted as ``str`` by ``setsockopt_string``).
STRING_OPTIONS = frozenset({_O.LAST_ENDPOINT, _O.ROUTING_ID, _O.SUBSCRIBE, _O.UNSUBSCRIBE})
