"""monitored_queue: a queue between two sockets that tells a third about every message.

It predates ``zmq.proxy``: every message from ``in_socket`` goes to ``out_socket`` and the other
way, and the monitor socket gets each one as ``[prefix, *parts]`` -- ``in_prefix`` for what
came in on ``in_socket``, ``out_prefix`` for what came in on ``out_socket`` -- so a listener
can tell the directions apart.  Between two ROUTER sockets the first two frames (the sender's
routing id, then the addressee's) are swapped, so the message reaches the addressee named in
it with the sender's id in front: a ROUTER-ROUTER broker, which ``zmq.proxy`` cannot be.  The
monitor sees the message as forwarded (ids swapped).

It runs on the proxy loop of :mod:`brokerless.proxy` (whole messages, batches, no timeout
loop) until the context is terminated (``ContextTerminated``) or Ctrl-C.
"""

from __future__ import annotations

from typing import Any

from ..constants import SocketType
from ..proxy import Tap, run_proxy
from ..socket import Socket


def _monitor_tap(mon_socket: Socket[Any], prefix: bytes) -> Tap:
    send_multipart = mon_socket.send_multipart

    def tap(msg: Any) -> None:
        send_multipart([prefix, *msg] if msg.__class__ is list else [prefix, msg], copy=False)

    return tap


def _swap_routing_ids(msg: Any) -> Any:
    return [msg[1], msg[0], *msg[2:]]


def monitored_queue(
    in_socket: Socket[Any],
    out_socket: Socket[Any],
    mon_socket: Socket[Any],
    in_prefix: bytes = b"in",
    out_prefix: bytes = b"out",
) -> int:
    """Forward between ``in_socket`` and ``out_socket``, copying every message to
    ``mon_socket`` behind ``in_prefix`` or ``out_prefix`` (see the module's doc)."""
    prefixes = []
    for name, prefix in (("in_prefix", in_prefix), ("out_prefix", out_prefix)):
        try:
            prefixes.append(memoryview(prefix).tobytes())
        except TypeError:
            raise TypeError(f"{name} must be bytes, not {type(prefix).__name__}") from None
    both_routers = in_socket.socket_type == out_socket.socket_type == SocketType.ROUTER
    return run_proxy(
        in_socket,
        out_socket,
        taps=(_monitor_tap(mon_socket, prefixes[0]), _monitor_tap(mon_socket, prefixes[1])),
        transform=_swap_routing_ids if both_routers else None,
    )


__all__ = ["monitored_queue"]
