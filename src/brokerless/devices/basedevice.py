"""Device, ThreadDevice, ProcessDevice: a proxy between two sockets made where it runs.

A device is configured with socket *types* and queued actions; ``start()`` runs it (in the
calling thread for :class:`Device`, in a new thread or process for the others), and only there
are the sockets created, given their options, bound and connected -- a socket belongs to the
thread that uses it.  When the device's context is terminated (or its sockets closed) the proxy
ends quietly, the device closes its sockets and ``done`` becomes true.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from multiprocessing import Process
from typing import Any

from ..constants import DeviceType, SocketType
from ..context import Context, SyncContext
from ..errno import ENOTSOCK, ETERM
from ..error import ZMQBindError, ZMQError
from ..proxy import proxy
from ..socket import SyncSocket


class SocketPlan:
    """The options, binds and connects queued for one of a device's sockets."""

    __slots__ = ("binds", "connects", "sockopts")

    def __init__(self) -> None:
        self.binds: list[str] = []
        self.connects: list[str] = []
        self.sockopts: list[tuple[int, Any]] = []


def apply_plans(planned: list[tuple[SyncSocket, SocketPlan]]) -> None:
    """Options on every socket first (a ROUTING_ID must precede connecting), then every bind,
    then every connect."""
    for sock, plan in planned:
        for option, value in plan.sockopts:
            sock.setsockopt(option, value)
    for sock, plan in planned:
        for addr in plan.binds:
            sock.bind(addr)
    for sock, plan in planned:
        for addr in plan.connects:
            sock.connect(addr)


class Device:
    """A proxy between an ``in`` and an ``out`` socket of the given types, run by ``start()``.

    ``Device(zmq.QUEUE, zmq.ROUTER, zmq.DEALER)``; an ``out_type`` below 0 means the ``in``
    socket serves both sides.  ``bind_in``, ``connect_out``, ``setsockopt_in``... queue what
    is done to the sockets once they exist.  ``daemon`` (default True) is passed to the thread
    or process of a background device.
    """

    #: Makes the device's context: the shared instance for a device running in a thread of this
    #: process; a fresh context in a process of its own (see :class:`ProcessDevice`).
    context_factory: Callable[[], SyncContext] = Context.instance

    daemon: bool
    done: bool
    device_type: int
    in_type: int
    out_type: int

    def __init__(
        self,
        device_type: int = DeviceType.QUEUE,
        in_type: int | None = None,
        out_type: int | None = None,
    ) -> None:
        if in_type is None:
            raise TypeError("in_type must be specified")
        if out_type is None:
            raise TypeError("out_type must be specified")
        self.device_type = device_type
        self.in_type = in_type
        self.out_type = out_type
        self.daemon = True
        self.done = False
        self._in = SocketPlan()
        self._out = SocketPlan()
        self._random_addrs: list[str] = []
        self._sockets: list[SyncSocket] = []
        self._finished = threading.Event()

    # A ProcessDevice may be pickled to reach its process (spawn/forkserver): the event is local.
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["_finished"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._finished = threading.Event()

    # -- configuration (queued; applied where the device runs) ---------------------------------

    def bind_in(self, addr: str) -> None:
        """Bind the in socket to ``addr`` once it exists."""
        self._in.binds.append(addr)

    def bind_in_to_random_port(self, addr: str, *args: Any, **kwargs: Any) -> int:
        """Pick a free port on ``addr`` now (as ``Socket.bind_to_random_port``) and queue
        binding the in socket to it; the port."""
        return self._bind_random(self._in, addr, *args, **kwargs)

    def connect_in(self, addr: str) -> None:
        """Connect the in socket to ``addr`` once it exists."""
        self._in.connects.append(addr)

    def setsockopt_in(self, opt: int, value: Any) -> None:
        """Set an option of the in socket once it exists (before any bind or connect)."""
        self._in.sockopts.append((opt, value))

    def bind_out(self, addr: str) -> None:
        """Bind the out socket to ``addr`` once it exists."""
        self._out.binds.append(addr)

    def bind_out_to_random_port(self, addr: str, *args: Any, **kwargs: Any) -> int:
        """As :meth:`bind_in_to_random_port`, for the out socket."""
        return self._bind_random(self._out, addr, *args, **kwargs)

    def connect_out(self, addr: str) -> None:
        """Connect the out socket to ``addr`` once it exists."""
        self._out.connects.append(addr)

    def setsockopt_out(self, opt: int, value: Any) -> None:
        """Set an option of the out socket once it exists (before any bind or connect)."""
        self._out.sockopts.append((opt, value))

    def _bind_random(self, plan: SocketPlan, addr: str, *args: Any, **kwargs: Any) -> int:
        port = self._reserve_random_port(addr, *args, **kwargs)
        plan.binds.append(f"{addr}:{port}")
        return port

    def _reserve_random_port(self, addr: str, *args: Any, **kwargs: Any) -> int:
        """A port on ``addr`` that was free a moment ago and not handed out before by this
        device (the socket that will bind it does not exist yet)."""
        with Context() as ctx, ctx.socket(SocketType.PUSH) as probe:
            for _ in range(5):  # the probe keeps each port: the next try gets another one
                port = probe.bind_to_random_port(addr, *args, **kwargs)
                if f"{addr}:{port}" not in self._random_addrs:
                    self._random_addrs.append(f"{addr}:{port}")
                    return port
        raise ZMQBindError(f"Could not reserve a random port on {addr}")

    # -- running -------------------------------------------------------------------------------

    def _make_socket(self, socket_type: int) -> SyncSocket:
        sock = self._context.socket(socket_type)
        self._sockets.append(sock)
        return sock

    def _setup_sockets(self) -> tuple[SyncSocket, SyncSocket]:
        """Create the context and the in and out sockets, and apply what was queued."""
        self._context = self.context_factory()
        ins = self._make_socket(self.in_type)
        outs = ins if self.out_type < 0 else self._make_socket(self.out_type)
        apply_plans([(ins, self._in), (outs, self._out)])
        return ins, outs

    def run_device(self) -> None:
        """Make the sockets and run the proxy (called by :meth:`run`)."""
        ins, outs = self._setup_sockets()
        proxy(ins, outs)

    def _close_sockets(self) -> None:
        for sock in self._sockets:
            if not sock.closed:
                sock.close()

    def run(self) -> None:
        """Run the device here until its context is terminated, then close its sockets."""
        try:
            self.run_device()
        except ZMQError as exc:
            if exc.errno not in (ETERM, ENOTSOCK):  # terminated or closed: a clean end
                raise
        finally:
            self.done = True
            self._close_sockets()
            self._finished.set()

    def start(self) -> None:
        """Run the device (in this thread: :class:`Device` returns only when it ends)."""
        self.run()

    def join(self, timeout: float | None = None) -> None:
        """Wait until the device has ended, at most ``timeout`` seconds (None: no limit)."""
        self._finished.wait(timeout)


class BackgroundDevice(Device):
    """A device run by a launcher: ``_launch_class(target=self.run)`` (a thread, a process)."""

    launcher: threading.Thread | Process | None = None
    _launch_class: Callable[..., threading.Thread | Process]

    def start(self) -> None:
        self.launcher = self._launch_class(target=self.run)
        self.launcher.daemon = self.daemon
        self.launcher.start()

    def join(self, timeout: float | None = None) -> None:
        if self.launcher is None:
            raise RuntimeError("cannot join a device before it is started")
        self.launcher.join(timeout=timeout)


class ThreadDevice(BackgroundDevice):
    """A :class:`Device` run in a background thread (sharing ``Context.instance()``)."""

    _launch_class = threading.Thread


class ProcessDevice(BackgroundDevice):
    """A :class:`Device` run in a process of its own, with a context of its own."""

    _launch_class = Process
    context_factory = Context


__all__ = ["Device", "ProcessDevice", "ThreadDevice"]
