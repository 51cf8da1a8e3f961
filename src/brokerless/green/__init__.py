"""gevent-friendly brokerless: pyzmq's ``zmq.green`` (``import brokerless.green as zmq``).

Everything :mod:`brokerless` exports, with ``Context``, ``Socket``, ``Poller`` and ``device``
replaced by versions whose blocking calls block only the calling greenlet (see :mod:`.core`).
Needs gevent (the ``green`` extra: ``pip install -e '.[green]'`` in a clone).
"""

from __future__ import annotations

from brokerless import *  # noqa: F403 (everything brokerless exports, as zmq.green does)
from brokerless import __all__ as _brokerless_all

from .core import Context as Context
from .core import Socket as Socket
from .device import device as device
from .poll import Poller as Poller

__all__ = list(dict.fromkeys([*_brokerless_all, "device"]))
