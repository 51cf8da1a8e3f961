"""tcp:// and ipc:// addresses: parsing, resolution, and the OS sockets for them."""

from __future__ import annotations

import os
import socket as pysocket
import struct
import sys
import tempfile
from dataclasses import dataclass
from errno import ENAMETOOLONG
from typing import Any

from ..errno import EADDRINUSE, EADDRNOTAVAIL, EINVAL
from ..error import ZMQError

#: The longest ipc path, in bytes: ``sockaddr_un.sun_path`` less its closing NUL (as libzmq's).
IPC_PATH_MAX_LEN = 107 if sys.platform.startswith("linux") else 103


@dataclass(frozen=True, slots=True)
class NetAddress:
    """Where to bind or connect: a socket family and a ``sockaddr``."""

    family: int
    sockaddr: tuple[Any, ...] | str
    transport: str

    def uri(self, sockaddr: tuple[Any, ...] | str | bytes | None = None) -> str:
        """The endpoint string (LAST_ENDPOINT form) for this or an actual ``sockaddr``."""
        addr = self.sockaddr if sockaddr is None else sockaddr
        if self.transport == "ipc":
            name = addr if isinstance(addr, str) else bytes(addr).decode()
            return "ipc://" + (name.replace("\0", "@", 1) if name.startswith("\0") else name)
        assert isinstance(addr, tuple)  # tcp: (host, port, ...)
        host: str = addr[0]
        port: int = addr[1]
        return f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"


def parse_tcp(address: str, *, bind: bool, ipv6: bool) -> list[NetAddress]:
    """Candidate addresses for ``host:port`` (``*`` host and port allowed when binding)."""
    host, port = split_tcp(address, bind=bind)
    if host == "*":
        return (
            [NetAddress(pysocket.AF_INET6, ("::", port, 0, 0), "tcp")]
            if ipv6
            else [NetAddress(pysocket.AF_INET, ("0.0.0.0", port), "tcp")]
        )
    if bind:
        interface = _interface_address(host)
        if interface is not None:  # tcp://eth0:5555 binds that interface's address
            return [NetAddress(pysocket.AF_INET, (interface, port), "tcp")]
    family = pysocket.AF_UNSPEC if ipv6 else pysocket.AF_INET
    try:
        infos = pysocket.getaddrinfo(host, port, family, pysocket.SOCK_STREAM)
    except (pysocket.gaierror, UnicodeError):
        raise ZMQError(
            EADDRNOTAVAIL if bind else EINVAL,
            f"Cannot resolve tcp host {host!r} in {address!r}",
        ) from None
    return [NetAddress(info[0], info[4], "tcp") for info in infos]


def split_source(address: str) -> tuple[str | None, str]:
    """A tcp connection's ``source;address`` (zmq_tcp(7)): the address to bind the connection's
    socket to first (an interface or address, and a port, 0 or ``*`` for any), if one is given,
    and the address to connect to."""
    source, sep, target = address.rpartition(";")
    return (source, target) if sep else (None, address)


def split_tcp(address: str, *, bind: bool) -> tuple[str, int]:
    """The host and port of ``host:port``, checked but not resolved (a connection resolves its
    host at each attempt, as libzmq's: a name may not resolve yet when ``connect`` is called)."""
    host, sep, port_text = address.rpartition(":")
    if not sep or not host:
        raise ZMQError(EINVAL, f"Invalid argument: tcp address {address!r} needs host:port")
    if port_text in ("*", "0") and bind:
        port = 0
    else:
        try:
            port = int(port_text)
        except ValueError:
            raise ZMQError(
                EINVAL, f"Invalid argument: bad port {port_text!r} in {address!r}"
            ) from None
        if not 0 < port < 65536:
            raise ZMQError(EINVAL, f"Invalid argument: port {port} out of range in {address!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host == "*" and not bind:
        raise ZMQError(EINVAL, f"Invalid argument: cannot connect to '*' in {address!r}")
    return host, port


_SIOCGIFADDR = 0x8915


def _interface_address(name: str) -> str | None:
    """The IPv4 address of network interface ``name`` (Linux), or None if it is not one."""
    try:
        pysocket.if_nametoindex(name)
    except OSError:
        return None
    try:
        import fcntl
        import struct

        with pysocket.socket(pysocket.AF_INET, pysocket.SOCK_DGRAM) as probe:
            request = struct.pack("256s", name.encode()[:15])
            reply = fcntl.ioctl(probe.fileno(), _SIOCGIFADDR, request)
    except (ImportError, OSError):
        return None  # no IPv4 address on it (or not Linux): fall back to name resolution
    return pysocket.inet_ntoa(reply[20:24])


def parse_ipc(address: str) -> NetAddress:
    """A path, ``@name`` (Linux abstract namespace), or ``*`` (a fresh temporary path)."""
    if address == "*":
        address = os.path.join(tempfile.mkdtemp(prefix="brokerless-"), "socket")
    check_ipc_path(address)
    if address.startswith("@"):
        address = "\0" + address[1:]
    return NetAddress(pysocket.AF_UNIX, address, "ipc")


def check_ipc_path(address: str) -> None:
    """ENAMETOOLONG for a path that ``sockaddr_un`` cannot hold (checked by ``connect`` too,
    as libzmq's)."""
    if len(address.encode()) > IPC_PATH_MAX_LEN:
        raise ZMQError(
            ENAMETOOLONG,
            f"File name too long: ipc path {address!r} is longer than IPC_PATH_MAX_LEN "
            f"({IPC_PATH_MAX_LEN} bytes, the size of sockaddr_un.sun_path)",
        )


def listen(addr: NetAddress, backlog: int) -> pysocket.socket:
    """A listening, non-blocking OS socket for ``addr``; EADDRINUSE etc. as ZMQError."""
    try:
        sock = pysocket.socket(addr.family, pysocket.SOCK_STREAM)
    except OSError as exc:  # EMFILE, ENFILE
        raise ZMQError(exc.errno or EINVAL, f"Cannot bind {addr.uri()}: {exc.strerror}") from None
    try:
        if addr.family == pysocket.AF_UNIX:
            path = addr.sockaddr
            if isinstance(path, str) and not path.startswith("\0") and _is_stale_socket(path):
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass  # its listener removed it meanwhile
        else:
            sock.setsockopt(pysocket.SOL_SOCKET, pysocket.SO_REUSEADDR, 1)
            if addr.family == pysocket.AF_INET6:
                sock.setsockopt(pysocket.IPPROTO_IPV6, pysocket.IPV6_V6ONLY, 0)
        sock.bind(addr.sockaddr)
        sock.listen(backlog)
    except OSError as exc:
        sock.close()
        errnum = exc.errno or EINVAL
        if errnum == EADDRINUSE:
            raise ZMQError(EADDRINUSE, f"Address already in use: {addr.uri()}") from None
        raise ZMQError(errnum, f"Cannot bind {addr.uri()}: {exc.strerror}") from None
    sock.setblocking(False)
    return sock


def _is_stale_socket(path: str) -> bool:
    """A socket file nobody listens on any more (left by a crashed process)."""
    if not os.path.exists(path):
        return False
    probe = pysocket.socket(pysocket.AF_UNIX, pysocket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        return True
    finally:
        probe.close()
    return False


def tune(sock: pysocket.socket, *, keepalive: int, idle: int, cnt: int, intvl: int) -> None:
    """Per-connection settings: TCP_NODELAY and the TCP_KEEPALIVE options, for tcp."""
    if sock.family == pysocket.AF_UNIX:
        return
    sock.setsockopt(pysocket.IPPROTO_TCP, pysocket.TCP_NODELAY, 1)
    if keepalive != -1:
        sock.setsockopt(pysocket.SOL_SOCKET, pysocket.SO_KEEPALIVE, keepalive)
    if keepalive == 1:
        for opt, value in (
            (pysocket.TCP_KEEPIDLE, idle),
            (pysocket.TCP_KEEPCNT, cnt),
            (pysocket.TCP_KEEPINTVL, intvl),
        ):
            if value > 0:
                sock.setsockopt(pysocket.IPPROTO_TCP, opt, value)


_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def peer_address(sock: pysocket.socket) -> bytes:
    """The peer's address as libzmq reports it (ZAP's address frame, the Peer-Address
    property): the IP address for tcp; for ipc ``localhost:uid:gid:pid`` where the OS tells the
    peer's credentials (Linux), else ``localhost``; empty when unknown."""
    try:
        if sock.family in (pysocket.AF_INET, pysocket.AF_INET6):
            host: str = sock.getpeername()[0]
            return host.encode()
        if sock.family == pysocket.AF_UNIX:
            cred = getattr(pysocket, "SO_PEERCRED", None)
            if cred is None:
                return b"localhost"
            pid, uid, gid = _PEERCRED.unpack(
                sock.getsockopt(pysocket.SOL_SOCKET, cred, _PEERCRED.size)
            )
            return f"localhost:{uid}:{gid}:{pid}".encode()
    except OSError:
        pass
    return b""
