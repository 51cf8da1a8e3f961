"""The Context: owner of every socket, the inproc name registry, and (later) the I/O threads.

There is no global state: two contexts share nothing, inproc names included.  ``term()`` is
libzmq's: sockets blocked in another thread are woken with ETERM, then it waits until every
socket has been closed.  ``destroy()`` closes them itself first.

A program that ends without closing its sockets still delivers what it queued: at interpreter
exit every context this process left open is destroyed, which waits for each socket's LINGER
(as libzmq does when pyzmq's context is terminated at exit; the I/O threads are daemons, so
without this the messages would die with them).
"""

from __future__ import annotations

import atexit
import os
import threading
import warnings
import weakref
from typing import Any

from .constants import OPTIONS, ContextOption, SocketOption
from .errno import EINVAL, EPROTONOSUPPORT, ETERM
from .error import ZMQError, error
from .io import IOThread
from .mailbox import Mailbox
from .socket import STOP, Socket
from .transport.inproc import InprocTransport
from .transport.network import NetworkTransport


class Context:
    """Holds sockets; ``Context.instance()`` is a shared one per process."""

    _instance: Context | None = None
    _instance_lock = threading.Lock()
    _instance_pid: int | None = None

    def __init__(self, io_threads: int = 1, **kwargs: Any) -> None:
        if not isinstance(io_threads, int) or io_threads < 0:
            raise ZMQError(
                EINVAL, f"Invalid argument: io_threads must be an int >= 0, not {io_threads!r}"
            )
        self._options: dict[ContextOption, int] = {
            ContextOption.IO_THREADS: io_threads,
            ContextOption.MAX_SOCKETS: 1023,
            ContextOption.SOCKET_LIMIT: 65535,
            ContextOption.BLOCKY: 1,
        }
        self.sockopts: dict[int, Any] = {}
        self._sockets: weakref.WeakSet[Socket] = weakref.WeakSet()
        # Re-entrant: a socket's finalizer (close on garbage collection) may run while this
        # thread already holds it.
        self._lock = threading.RLock()
        self._all_closed = threading.Condition(self._lock)
        self._closed = False
        self._terminating = False
        self._inproc = InprocTransport()
        self._network = {name: NetworkTransport(self, name) for name in ("tcp", "ipc")}
        self._io_threads: list[IOThread] = []
        self._next_io = 0
        self._sessions = 0  # network sessions still running (lingering ones included)
        self._pid = os.getpid()
        _open_contexts.add(self)
        for name, value in kwargs.items():
            self.set(getattr(ContextOption, name.upper()), value)

    # -- the shared instance ------------------------------------------------------------------

    @classmethod
    def instance(cls, io_threads: int = 1) -> Context:
        """The process-wide context (created on first use, again after fork or term)."""
        with cls._instance_lock:
            inst = cls._instance
            if inst is None or inst.closed or cls._instance_pid != os.getpid():
                inst = cls._instance = cls(io_threads)
                cls._instance_pid = os.getpid()
            return inst

    # -- sockets ------------------------------------------------------------------------------

    def socket(
        self, socket_type: int, socket_class: type[Socket] | None = None, **options: Any
    ) -> Socket:
        """A new socket; keyword arguments set options (``ctx.socket(PUSH, sndhwm=10)``)."""
        if self._closed or self._terminating:
            raise error(ETERM, "Context was terminated: create a new Context")
        opts: dict[SocketOption, Any] = {}
        for name, value in options.items():
            try:
                opts[SocketOption[name.upper()]] = value
            except KeyError:
                raise TypeError(f"unknown socket option {name!r}") from None
        cls = socket_class or Socket
        sock = cls(self, socket_type)
        for opt, value in self.sockopts.items():
            try:
                sock.setsockopt(opt, value)
            except ZMQError:
                pass  # a default that does not apply to this socket type (as pyzmq)
        for opt, value in opts.items():
            sock.setsockopt(opt, value)
        with self._lock:
            if not self._terminating:
                self._sockets.add(sock)
                return sock
        sock.close()  # term() began meanwhile: it would never wake this socket
        raise error(ETERM, "Context was terminated: create a new Context")

    def setsockopt(self, option: int, value: Any) -> None:
        """Default option for sockets created afterwards."""
        self.sockopts[option] = value

    def getsockopt(self, option: int) -> Any:
        return self.sockopts[option]

    def set(self, option: int, value: int) -> None:
        """Set a context option (IO_THREADS, MAX_SOCKETS, BLOCKY, ...)."""
        try:
            opt = ContextOption(option)
        except ValueError:
            raise ZMQError(EINVAL, f"Invalid argument: unknown context option {option!r}") from None
        if not isinstance(value, int) or value < 0:
            raise ZMQError(EINVAL, f"Invalid argument: {opt.name} takes an int >= 0")
        self._options[opt] = value

    def get(self, option: int) -> int:
        try:
            return self._options[ContextOption(option)]
        except (ValueError, KeyError):
            raise ZMQError(EINVAL, f"Invalid argument: unknown context option {option!r}") from None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def underlying(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._sockets)} sockets"
        return f"<brokerless.Context {state}>"

    # -- shutdown -----------------------------------------------------------------------------

    def term(self) -> None:
        """Wake blocked calls with ETERM, then wait until every socket is closed."""
        if self._closed:
            return
        with self._lock:
            self._terminating = True
            sockets = list(self._sockets)
        for sock in sockets:
            sock.send_command(STOP, None)
        sockets = sock = None  # hold no socket while waiting: a dropped one must be collectable
        with self._all_closed:
            while len(self._sockets) or self._sessions:
                self._all_closed.wait()
            threads, self._io_threads = self._io_threads, []
        for io in threads:
            io.stop()
            io.join()
        self._closed = True

    def destroy(self, linger: int | None = None) -> None:
        """Close every socket (with ``linger`` if given), then terminate."""
        if self._closed:
            return
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            sock.close(linger=linger)
        self.term()

    def __del__(self) -> None:
        # Dropped without term().  Nothing of it can still be queued -- a socket with a
        # connection keeps its context reachable -- so only its I/O threads are left to stop.
        if getattr(self, "_closed", True) or self._pid != os.getpid():
            return
        warnings.warn(f"unclosed context {self!r}", ResourceWarning, stacklevel=2, source=self)
        for io in self._io_threads:
            io.stop()

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()

    # -- services for sockets -----------------------------------------------------------------

    def _new_mailbox(self) -> Mailbox:
        return Mailbox()

    def _socket_closing(self, sock: Socket) -> None:
        """Tell every transport that ``sock`` is closing (listeners stop, sessions flush)."""
        self._inproc.socket_closed(sock)
        for transport in self._network.values():
            transport.socket_closed(sock)

    def _socket_closed(self, sock: Socket) -> None:
        with self._all_closed:
            self._sockets.discard(sock)
            self._all_closed.notify_all()

    def _session_started(self, session: object) -> None:
        with self._lock:
            self._sessions += 1

    def _session_finished(self, session: object) -> None:
        with self._all_closed:
            self._sessions -= 1
            self._all_closed.notify_all()

    def _io_thread(self) -> IOThread:
        """An I/O thread for a new listener or connection (started on first use)."""
        with self._lock:
            if self._terminating:
                raise error(ETERM, "Context was terminated: create a new Context")
            if not self._io_threads:
                count = max(1, self._options[ContextOption.IO_THREADS])
                self._io_threads = [IOThread(f"brokerless-io-{i}") for i in range(count)]
            io = self._io_threads[self._next_io % len(self._io_threads)]
            self._next_io += 1
            return io

    def _transport(self, name: str) -> InprocTransport | NetworkTransport:
        if name == "inproc":
            return self._inproc
        if name in self._network:
            return self._network[name]
        raise ZMQError(
            EPROTONOSUPPORT, f"Protocol not supported: brokerless has no {name}:// transport"
        )


_open_contexts: weakref.WeakSet[Context] = weakref.WeakSet()


@atexit.register
def _destroy_open_contexts() -> None:
    """Interpreter exit: deliver what open sockets queued, within their LINGER (module doc)."""
    pid = os.getpid()
    for context in list(_open_contexts):
        if context._pid == pid and not context.closed:
            context.destroy()


def _default_option_property(opt: SocketOption) -> property:
    def fget(self: Context) -> Any:
        try:
            return self.sockopts[opt]
        except KeyError:
            raise AttributeError(f"no default {opt.name} is set on this context") from None

    def fset(self: Context, value: Any) -> None:
        self.sockopts[opt] = value

    return property(fget, fset, doc=f"Default {opt.name} for sockets created afterwards.")


# ``ctx.linger = 0`` sets a default for new sockets, as in pyzmq.
for _opt, _spec in OPTIONS.items():
    if _spec.settable and not hasattr(Context, _opt.name.lower()):
        setattr(Context, _opt.name.lower(), _default_option_property(_opt))
del _opt, _spec
