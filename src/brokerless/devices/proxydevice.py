"""Proxy, ThreadProxy, ProcessProxy: a device with a third, monitor socket that gets a copy of
every message (the capture socket of ``zmq.proxy``)."""

from __future__ import annotations

from typing import Any

from ..constants import SocketType
from ..proxy import proxy
from ..socket import SyncSocket
from .basedevice import Device, ProcessDevice, SocketPlan, ThreadDevice, apply_plans


class ProxyBase(Device):
    """What a proxy device adds to a :class:`Device`: the ``mon`` socket and its queue of
    actions (``bind_mon``, ``connect_mon``, ``setsockopt_mon``...).  Mixed in before a Device
    class."""

    def __init__(self, in_type: int, out_type: int, mon_type: int = SocketType.PUB) -> None:
        Device.__init__(self, in_type=in_type, out_type=out_type)
        self.mon_type = mon_type
        self._mon = SocketPlan()

    def bind_mon(self, addr: str) -> None:
        """Bind the monitor socket to ``addr`` once it exists."""
        self._mon.binds.append(addr)

    def bind_mon_to_random_port(self, addr: str, *args: Any, **kwargs: Any) -> int:
        """As ``bind_in_to_random_port``, for the monitor socket."""
        return self._bind_random(self._mon, addr, *args, **kwargs)

    def connect_mon(self, addr: str) -> None:
        """Connect the monitor socket to ``addr`` once it exists."""
        self._mon.connects.append(addr)

    def setsockopt_mon(self, opt: int, value: Any) -> None:
        """Set an option of the monitor socket once it exists (before any bind or connect)."""
        self._mon.sockopts.append((opt, value))

    def _setup_proxy_sockets(self) -> tuple[SyncSocket, SyncSocket, SyncSocket]:
        """The device's in and out sockets, then the monitor socket."""
        ins, outs = self._setup_sockets()
        mons = self._make_socket(self.mon_type)
        apply_plans([(mons, self._mon)])
        return ins, outs, mons

    def run_device(self) -> None:
        ins, outs, mons = self._setup_proxy_sockets()
        proxy(ins, outs, mons)


class Proxy(ProxyBase, Device):
    """A device forwarding between ``in`` and ``out`` that also sends every message, either
    way, to its ``mon`` socket (a PUB by default), run in the calling thread."""


class ThreadProxy(ProxyBase, ThreadDevice):
    """A :class:`Proxy` run in a background thread."""


class ProcessProxy(ProxyBase, ProcessDevice):
    """A :class:`Proxy` run in a process of its own."""


__all__ = ["ProcessProxy", "Proxy", "ThreadProxy"]
