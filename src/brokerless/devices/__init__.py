"""Proxies run in the background, pyzmq's ``zmq.devices``: the device makes its sockets in the
thread or process that runs it, from socket types and the binds, connects and options queued
beforehand (``bind_in``, ``connect_out``, ``setsockopt_mon``...).

The modules and names are pyzmq's, so ``from zmq.devices.basedevice import ThreadDevice`` and
the like work unchanged.
"""

from __future__ import annotations

# Not among the exported names, as in pyzmq, but there.
from ..constants import DeviceType as DeviceType
from ..proxy import proxy as proxy
from .basedevice import Device, ProcessDevice, ThreadDevice
from .monitoredqueue import monitored_queue
from .monitoredqueuedevice import MonitoredQueue, ProcessMonitoredQueue, ThreadMonitoredQueue
from .proxydevice import ProcessProxy, Proxy, ThreadProxy
from .proxysteerabledevice import ProcessProxySteerable, ProxySteerable, ThreadProxySteerable

__all__ = [
    "Device",
    "MonitoredQueue",
    "ProcessDevice",
    "ProcessMonitoredQueue",
    "ProcessProxy",
    "ProcessProxySteerable",
    "Proxy",
    "ProxySteerable",
    "ThreadDevice",
    "ThreadMonitoredQueue",
    "ThreadProxy",
    "ThreadProxySteerable",
    "monitored_queue",
]
