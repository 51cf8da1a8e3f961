"""ProxySteerable, ThreadProxySteerable, ProcessProxySteerable: a proxy device with a fourth,
control socket (PAUSE, RESUME, TERMINATE, STATISTICS; see :mod:`brokerless.proxy`)."""

from __future__ import annotations

from typing import Any

from ..constants import SocketType
from ..errno import EINVAL
from ..error import ZMQError
from ..proxy import proxy_steerable
from ..socket import SyncSocket
from .basedevice import SocketPlan, apply_plans
from .proxydevice import ProcessProxy, Proxy, ProxyBase, ThreadProxy


class ProxySteerableBase(ProxyBase):
    """What a steerable proxy device adds: the ``ctrl`` socket and its queue of actions
    (``bind_ctrl``, ``connect_ctrl``, ``setsockopt_ctrl``...).  Mixed in before a Proxy
    class."""

    def __init__(
        self,
        in_type: int,
        out_type: int,
        mon_type: int = SocketType.PUB,
        ctrl_type: int | None = None,
    ) -> None:
        super().__init__(in_type=in_type, out_type=out_type, mon_type=mon_type)
        self.ctrl_type = ctrl_type
        self._ctrl = SocketPlan()

    def bind_ctrl(self, addr: str) -> None:
        """Bind the control socket to ``addr`` once it exists."""
        self._ctrl.binds.append(addr)

    def bind_ctrl_to_random_port(self, addr: str, *args: Any, **kwargs: Any) -> int:
        """As ``bind_in_to_random_port``, for the control socket."""
        return self._bind_random(self._ctrl, addr, *args, **kwargs)

    def connect_ctrl(self, addr: str) -> None:
        """Connect the control socket to ``addr`` once it exists."""
        self._ctrl.connects.append(addr)

    def setsockopt_ctrl(self, opt: int, value: Any) -> None:
        """Set an option of the control socket once it exists (before any bind or connect)."""
        self._ctrl.sockopts.append((opt, value))

    def _setup_steerable_sockets(self) -> tuple[SyncSocket, SyncSocket, SyncSocket, SyncSocket]:
        """The proxy's in, out and monitor sockets, then the control socket."""
        if self.ctrl_type is None:  # allowed by the constructor, as in pyzmq
            raise ZMQError(EINVAL, "Invalid argument: a steerable proxy needs a ctrl_type")
        ins, outs, mons = self._setup_proxy_sockets()
        ctrls = self._make_socket(self.ctrl_type)
        apply_plans([(ctrls, self._ctrl)])
        return ins, outs, mons, ctrls

    def run_device(self) -> None:
        ins, outs, mons, ctrls = self._setup_steerable_sockets()
        proxy_steerable(ins, outs, mons, ctrls)


class ProxySteerable(ProxySteerableBase, Proxy):
    """A :class:`~brokerless.devices.Proxy` steered through its ``ctrl`` socket: PAUSE,
    RESUME, TERMINATE (the device ends), STATISTICS."""


class ThreadProxySteerable(ProxySteerableBase, ThreadProxy):
    """A :class:`ProxySteerable` run in a background thread."""


class ProcessProxySteerable(ProxySteerableBase, ProcessProxy):
    """A :class:`ProxySteerable` run in a process of its own."""


__all__ = ["ProcessProxySteerable", "ProxySteerable", "ThreadProxySteerable"]
