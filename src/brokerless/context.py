"""The Context: owner of every socket, the inproc name registry, and (later) the I/O threads.

There is no global state: two contexts share nothing, inproc names included.  ``term()`` is
libzmq's: sockets blocked in another thread are woken with ETERM, then it waits until every
socket has been closed.  ``destroy()`` closes them itself first.

A program that ends without closing its sockets still delivers what it queued to connected
peers: at interpreter exit every context this process left open is destroyed, which waits for
each socket's LINGER (the I/O threads are daemons: without this the messages would die with
them).  But exiting is not held up by a peer that is not there: from then on nothing is
reconnected, and what waits for a peer that refused or lost its connection is dropped -- as
pyzmq, which leaves its contexts to die at exit, drops it.  A connection being made still
completes and delivers (a program that connects, sends and ends at once), or fails (within the
kernel's connect timeout, or HANDSHAKE_IVL) and is not retried.

Options are attributes too (``ctx.io_threads``; ``ctx.linger = 0`` is a default for sockets
made afterwards): typed descriptors generated into ``option_attrs_generated.py``.  A shadow
context (``Context.shadow``, ``Context(other)``, ``copy.copy``) shares this one's ``__dict__``,
so it is the same context under another class (see :mod:`brokerless.shadow`).
"""

from __future__ import annotations

import atexit
import os
import threading
import warnings
import weakref
from collections.abc import Callable
from errno import EMFILE  # (the system's: libzmq reports a full context so)
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from .constants import ContextOption, SocketOption, c_int
from .errno import EFAULT, EINVAL, ENOTSUP, EPROTONOSUPPORT, ETERM
from .error import ZMQError, error
from .io import IOThread
from .mailbox import Command, Mailbox
from .option_attrs import declared
from .option_attrs_generated import ContextOptionAttrs
from .shadow import address as shadow_address
from .shadow import foreign as shadow_foreign
from .shadow import resolve as shadow_resolve
from .socket import STOP, Socket, SyncSocket
from .transport.inproc import InprocTransport
from .transport.network import NetworkTransport

if TYPE_CHECKING:
    from typing_extensions import Self  # typing's from Python 3.11

    from .transport.port import SessionPort, SocketPort, Transport

#: The class of the sockets a context makes (``zmq.Context[MySocket]``).
_SocketT = TypeVar("_SocketT", bound="Socket[Any]", covariant=True)
#: The options that change the I/O threads' CPU set (set only, as in libzmq)
_AFFINITY = (ContextOption.THREAD_AFFINITY_CPU_ADD, ContextOption.THREAD_AFFINITY_CPU_REMOVE)
#: libzmq's ZMQ_IPV6 context option (the socket option's number): new sockets' IPV6 default
_IPV6 = int(SocketOption.IPV6)
_INT_MAX = 2**31 - 1  # MAX_MSGSZ's default
_MSG_T_SIZE = 64  # what libzmq's MSG_T_SIZE reads (the size of its zmq_msg_t)


class Context(ContextOptionAttrs, Generic[_SocketT]):
    """Holds sockets; ``Context.instance()`` is a shared one per process.

    ``Context(other)`` or ``Context(shadow=other)`` is a shadow of ``other`` (a context or its
    ``underlying``).  ``_socket_class`` is the class ``socket()`` makes, as in pyzmq.
    """

    # Besides the (shared, for a shadow) __dict__, each object's own: what it shadows.
    __slots__ = ("__dict__", "__weakref__", "_shadow_obj", "_shadowed")
    _shadow_obj: Context[Any] | int | None
    _shadowed: Context[Any] | None
    #: Default options of sockets made afterwards (``setsockopt``, ``ctx.linger = 0``).
    sockopts: dict[int, Any]

    _instance: Context[Any] | None = None
    _instance_lock = threading.Lock()
    _instance_pid: int | None = None
    _socket_class: type[_SocketT] = Socket  # type: ignore[assignment]
    _repr_cls = "zmq.Context"

    @overload
    def __init__(self: SyncContext, io_threads: int = 1, **kwargs: int) -> None: ...
    @overload
    def __init__(self: SyncContext, io_threads: Context[Any], /) -> None: ...
    @overload
    def __init__(self: SyncContext, *, shadow: Context[Any] | int) -> None: ...
    def __init__(
        self: SyncContext,
        io_threads: int | Context[Any] = 1,
        shadow: Context[Any] | int = 0,
        **kwargs: Any,
    ) -> None:
        if isinstance(io_threads, Context):
            io_threads, shadow = 1, io_threads
        if shadow:
            self._shadow_obj = shadow
            self._shadowed = shadow_resolve(shadow, Context)
            self.__dict__ = self._shadowed.__dict__
            return
        self._shadow_obj = None
        self._shadowed = None
        if not isinstance(io_threads, int) or io_threads < 0:
            raise ZMQError(
                EINVAL, f"Invalid argument: io_threads must be an int >= 0, not {io_threads!r}"
            )
        self._options: dict[int, int] = {
            ContextOption.IO_THREADS: io_threads,
            ContextOption.MAX_SOCKETS: 1023,
            ContextOption.SOCKET_LIMIT: 65535,
            ContextOption.BLOCKY: 1,
            ContextOption.THREAD_NAME_PREFIX: 0,
            ContextOption.MAX_MSGSZ: _INT_MAX,
            ContextOption.THREAD_SCHED_POLICY: -1,  # (the system's default, as libzmq reads it)
            _IPV6: 0,
        }
        #: MAX_SOCKETS as it was when the first socket was made (libzmq sizes its table then)
        self._max_sockets: int | None = None
        #: THREAD_AFFINITY_CPU_ADD/_REMOVE: the CPUs the I/O threads keep to (none: any)
        self._thread_cpus: set[int] = set()
        self.sockopts: dict[int, Any] = {}
        self._sockets: weakref.WeakSet[Socket[Any]] = weakref.WeakSet()
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
        # Network sessions still running (lingering ones included).
        self._sessions: set[SessionPort] = set()
        self._exiting = False  # the interpreter is exiting (see the module docstring)
        self._pid = os.getpid()
        _open_contexts.add(self)
        for name, value in kwargs.items():
            self.set(getattr(ContextOption, name.upper()), value)

    # -- the shared instance ------------------------------------------------------------------

    @classmethod
    def instance(cls, io_threads: int = 1) -> Context[Any]:
        """The process-wide context (created on first use, again after fork or term)."""
        with cls._instance_lock:
            inst = cls._instance
            if inst is None or inst.closed or cls._instance_pid != os.getpid():
                inst = cls._instance = cls(io_threads)
                cls._instance_pid = os.getpid()
            return inst

    # -- sockets ------------------------------------------------------------------------------

    def socket(
        self,
        socket_type: int,
        socket_class: Callable[[Self, int], _SocketT] | None = None,
        **kwargs: Any,
    ) -> _SocketT:
        """A new socket of ``socket_class`` (default ``_socket_class``); keyword arguments go
        to its constructor, as in pyzmq.  Defaults set on the context (``ctx.linger = 0``)
        apply where the socket type takes them."""
        if self._closed:
            if self._shadowed is not None:
                raise ZMQError(EFAULT, "Bad address: the context this one shadows was terminated")
            raise ZMQError(ENOTSUP, "Operation not supported: the context was terminated")
        if self._terminating:
            raise error(ETERM, "Context was terminated: create a new Context")
        if self._max_sockets is None:
            self._max_sockets = self._options[ContextOption.MAX_SOCKETS]
        if len(self._sockets) >= self._max_sockets:
            raise ZMQError(
                EMFILE,
                f"Too many open files: the context holds its MAX_SOCKETS ({self._max_sockets}), "
                "set before its first socket",
            )
        sock = (socket_class or self._socket_class)(self, socket_type, **kwargs)
        if self._options[_IPV6]:
            sock.setsockopt(SocketOption.IPV6, 1)  # (the context's default, as libzmq's)
        for opt, value in self.sockopts.items():
            try:
                sock.setsockopt(opt, value)
            except ZMQError:
                pass  # a default that does not apply to this socket type (as pyzmq)
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
        """Set a context option (IO_THREADS, MAX_SOCKETS, BLOCKY, ...; libzmq's IPV6 too: the
        default of sockets made afterwards).  The values libzmq refuses are EINVAL."""
        self._check_open()
        c_int(option, "a context option (zmq.IO_THREADS, ...)")
        c_int(value, "a context option's value")
        if option in (_IPV6, ContextOption.BLOCKY):
            if value < 0:
                raise ZMQError(EINVAL, f"Invalid argument: option {option} takes 0 or more")
            self._options[option] = int(value != 0)
            return
        try:
            opt = ContextOption(option)
        except ValueError:
            raise ZMQError(EINVAL, f"Invalid argument: unknown context option {option!r}") from None
        if opt is ContextOption.MSG_T_SIZE:
            raise ZMQError(EINVAL, "Invalid argument: MSG_T_SIZE can be read, not set")
        low = 1 if opt is ContextOption.MAX_SOCKETS else 0
        if value < low and opt is not ContextOption.THREAD_NAME_PREFIX:
            raise ZMQError(EINVAL, f"Invalid argument: {opt.name} takes an int >= {low}")
        if opt in _AFFINITY:
            self._set_thread_cpu(opt, value)
        elif opt is ContextOption.THREAD_PRIORITY:
            # accepted, not applied (README); its number, 3, is SOCKET_LIMIT to get, which
            # setting it leaves as it is, as in libzmq
            return
        else:
            self._options[opt] = value

    def _set_thread_cpu(self, opt: ContextOption, cpu: int) -> None:
        """THREAD_AFFINITY_CPU_ADD/_REMOVE, libzmq's: the I/O threads started from now on keep
        to the CPUs added (where the platform can keep a thread to CPUs; elsewhere, as
        libzmq, the set is kept and not applied).  A CPU this process cannot run on is taken,
        as libzmq takes it; an I/O thread left with none of its CPUs says so and runs on any
        (``io/thread.py``)."""
        if opt is ContextOption.THREAD_AFFINITY_CPU_REMOVE:
            if cpu not in self._thread_cpus:
                raise ZMQError(
                    EINVAL,
                    f"Invalid argument: CPU {cpu} is not in the I/O threads' affinity "
                    f"{sorted(self._thread_cpus)} (THREAD_AFFINITY_CPU_ADD adds one)",
                )
            self._thread_cpus.discard(cpu)
            return
        self._thread_cpus.add(cpu)

    def get(self, option: int) -> int:
        self._check_open()
        c_int(option, "a context option (zmq.IO_THREADS, ...)")
        if option in _AFFINITY:
            name = ContextOption(option).name
            raise ZMQError(EINVAL, f"Invalid argument: {name} can be set, not read (libzmq)")
        if option == ContextOption.MSG_T_SIZE:
            return _MSG_T_SIZE
        if option not in self._options:
            raise ZMQError(EINVAL, f"Invalid argument: unknown context option {option!r}")
        return self._options[option]

    def _check_open(self) -> None:
        if self._closed:  # (pyzmq's words; libzmq's context is gone)
            raise RuntimeError("Context has been destroyed")

    def __setattr__(self, name: str, value: Any) -> None:
        """As pyzmq's: a name that is no attribute of the context's class (nor private) is no
        option either -- an AttributeError, so that a misspelt option is not silently kept."""
        if not name.startswith("_") and not declared(type(self), name):
            raise AttributeError(f"{type(self).__name__} has no such option: {name.upper()}")
        object.__setattr__(self, name, value)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def underlying(self) -> int:
        """The number ``Context.shadow`` takes for this context (see :mod:`brokerless.shadow`)."""
        return shadow_address(self._shadowed or self)

    @property
    def _shadow(self) -> bool:
        """Whether this object is a shadow of another context."""
        return self._shadowed is not None

    @classmethod
    def shadow(cls, address: Context[Any] | int) -> Self:
        """Another object for an existing context: ``address`` is the context or its
        ``underlying``.  It shares everything; dropping it terminates nothing."""
        return cls(shadow=shadow_resolve(address, Context))

    @classmethod
    def shadow_pyczmq(cls, ctx: Any) -> Self:
        """pyczmq's contexts are libzmq's: refused (EFAULT), there is no libzmq here."""
        raise shadow_foreign("Context", "a pyczmq context is libzmq's")

    def __copy__(self, memo: Any = None) -> Self:
        """A copy is a shadow: the same context (pyzmq's rule)."""
        return type(self).shadow(self.underlying)

    __deepcopy__ = __copy__

    def __repr__(self) -> str:
        """pyzmq's ``<zmq.Context(2 sockets) at 0x…>``, ``closed`` once terminated."""
        cls = type(self)
        name = vars(cls).get("_repr_cls") or f"{cls.__module__}.{cls.__name__}"
        count = len(self._sockets)
        sockets = f"{count} socket{'s' if count > 1 else ''}" if count else ""
        return f"<{name}({sockets}) at {id(self):#x}{' closed' if self._closed else ''}>"

    # -- shutdown -----------------------------------------------------------------------------

    def term(self) -> None:
        """Wake blocked calls with ETERM, then wait until every socket is closed.  In a forked
        child the context is the parent's copy, whose I/O threads are not there: it is only
        marked closed, as pyzmq does (waiting would never end)."""
        if self._closed:
            return
        if self._pid != os.getpid():
            self._closed = True
            return
        with self._lock:
            self._terminating = True
            sockets = list(self._sockets)
        _stop(sockets)
        del sockets  # hold no socket while waiting: a dropped one must be collectable
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
        self._destroy(linger, warn=False)

    def _destroy(self, linger: int | None, warn: bool) -> None:
        if self._closed:
            return
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            if warn and not sock.closed:
                warnings.warn(
                    f"Destroying context with unclosed socket {sock!r}",
                    ResourceWarning,
                    stacklevel=3,
                    source=sock,
                )
            sock.close(linger=linger)
        self.term()

    def __del__(self) -> None:
        # Dropped without term().  Nothing of it can still be queued -- a socket with a
        # connection keeps its context reachable -- so only its I/O threads are left to stop.
        # A shadow leaves the context it shares alone.
        if getattr(self, "_shadowed", True) is not None or getattr(self, "_closed", True):
            return
        if self._pid != os.getpid():
            return
        warnings.warn(f"Unclosed context {self!r}", ResourceWarning, stacklevel=2, source=self)
        for io in self._io_threads:
            io.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        """Destroy, with a ResourceWarning for each socket left open (as pyzmq)."""
        self._destroy(None, warn=True)

    # -- services for sockets (see socket.state.SocketContext) -----------------------------------

    @property
    def _port(self) -> Self:
        """What the transports of its sockets see of the context (transport.port.ContextPort:
        ``_inproc``, ``_io_thread``, ``_session_started``, ``_session_finished``)."""
        return self

    def _new_mailbox(self) -> Mailbox[Command]:
        try:
            return Mailbox()
        except OSError as exc:
            raise _no_descriptor(exc, "a socket's mailbox") from None

    def _socket_closing(self, port: SocketPort) -> None:
        """Tell every transport that a socket is closing (listeners stop, sessions flush)."""
        self._inproc.socket_closed(port)
        for transport in self._network.values():
            transport.socket_closed(port)

    def _socket_closed(self, sock: Any) -> None:
        with self._all_closed:
            self._sockets.discard(sock)
            self._all_closed.notify_all()

    def _session_started(self, session: SessionPort) -> None:
        with self._lock:
            self._sessions.add(session)

    def _session_finished(self, session: SessionPort) -> None:
        with self._all_closed:
            self._sessions.discard(session)
            self._all_closed.notify_all()

    def _exit(self) -> None:
        """Interpreter exit: deliver what open sockets queued, within their LINGER, but not to
        peers that refused or lost their connection (see the module docstring)."""
        self._exiting = True
        with self._lock:
            sessions = list(self._sessions)
        for session in sessions:  # those lingering already, for sockets closed before
            session.exiting()
        self.destroy()

    def _io_thread(self) -> IOThread:
        """An I/O thread for a new listener or connection (started on first use)."""
        with self._lock:
            if self._terminating:
                raise error(ETERM, "Context was terminated: create a new Context")
            if not self._io_threads:
                count = max(1, self._options[ContextOption.IO_THREADS])
                cpus = frozenset(self._thread_cpus) if self._thread_cpus else None
                threads: list[IOThread] = []
                try:
                    for i in range(count):
                        threads.append(IOThread(f"brokerless-io-{i}", cpus))
                except OSError as exc:
                    for thread in threads:
                        thread.stop()
                    raise _no_descriptor(exc, "an I/O thread") from None
                self._io_threads = threads
            io = self._io_threads[self._next_io % len(self._io_threads)]
            self._next_io += 1
            return io

    def _transport(self, name: str) -> Transport:
        if name == "inproc":
            return self._inproc
        if name in self._network:
            return self._network[name]
        raise ZMQError(
            EPROTONOSUPPORT, f"Protocol not supported: brokerless has no {name}:// transport"
        )


def _stop(sockets: list[Socket[Any]]) -> None:
    """Fail calls blocked (or to come) on ``sockets`` with ETERM (``Context.term``)."""
    for sock in sockets:
        sock.send_command(STOP, None)


_open_contexts: weakref.WeakSet[Context[Any]] = weakref.WeakSet()


@atexit.register
def _destroy_open_contexts() -> None:
    """Interpreter exit: each context this process left open ends (see ``Context._exit``)."""
    pid = os.getpid()
    for context in list(_open_contexts):
        if context._pid == pid and not context.closed:
            context._exit()


def _forget_parent_connections() -> None:
    """A forked child (``os.fork``, multiprocessing's fork): the connections of the contexts it
    inherited are the parent's, served by the parent's I/O thread.  The child writes nothing on
    them any more -- as pyzmq's child sends nothing on an inherited socket -- for two processes
    writing one ZMTP stream would corrupt it.  (No lock is taken: threads of the parent that held
    one do not exist here.)"""
    for context in list(_open_contexts):
        for session in list(context._sessions):
            session.forked()


os.register_at_fork(after_in_child=_forget_parent_connections)


#: ``zmq.Context[zmq.SyncSocket]``: what ``zmq.Context()`` is to a type checker.
SyncContext = Context[SyncSocket]


def _no_descriptor(exc: OSError, what: str) -> ZMQError:
    """``exc`` (EMFILE, ENFILE: no descriptor for ``what``) as libzmq reports it, a ZMQError."""
    return ZMQError(
        exc.errno or EMFILE,
        f"{exc.strerror}: no descriptor for {what} "
        "(close sockets, or raise the process's limit: ulimit -n)",
    )
