"""MonitoredQueue, ThreadMonitoredQueue, ProcessMonitoredQueue: a proxy device running
:func:`~brokerless.devices.monitored_queue` (prefixed monitor messages, ROUTER-ROUTER)."""

from __future__ import annotations

from ..constants import SocketType
from .monitoredqueue import monitored_queue
from .proxydevice import ProcessProxy, Proxy, ProxyBase, ThreadProxy


class MonitoredQueueBase(ProxyBase):
    """What a monitored-queue device adds to a proxy device: the two prefixes."""

    def __init__(
        self,
        in_type: int,
        out_type: int,
        mon_type: int = SocketType.PUB,
        in_prefix: bytes = b"in",
        out_prefix: bytes = b"out",
    ) -> None:
        ProxyBase.__init__(self, in_type=in_type, out_type=out_type, mon_type=mon_type)
        self._in_prefix = in_prefix
        self._out_prefix = out_prefix

    def run_device(self) -> None:
        ins, outs, mons = self._setup_proxy_sockets()
        monitored_queue(ins, outs, mons, self._in_prefix, self._out_prefix)


class MonitoredQueue(MonitoredQueueBase, Proxy):
    """A queue whose monitor socket gets ``[in_prefix, *message]`` for what came in on the in
    socket and ``[out_prefix, *message]`` for what came in on the out socket; ROUTER on both
    sides works (see :func:`~brokerless.devices.monitored_queue`)."""


class ThreadMonitoredQueue(MonitoredQueueBase, ThreadProxy):
    """A :class:`MonitoredQueue` run in a background thread."""


class ProcessMonitoredQueue(MonitoredQueueBase, ProcessProxy):
    """A :class:`MonitoredQueue` run in a process of its own."""


__all__ = ["MonitoredQueue", "ProcessMonitoredQueue", "ThreadMonitoredQueue"]
