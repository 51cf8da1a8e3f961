"""Decoding socket monitor events (pyzmq's ``zmq.utils.monitor``).

An event is a two-part message on the monitor's PAIR socket: the event number (native uint16)
and value (native uint32) in 6 octets, then the endpoint (see :mod:`brokerless.monitor`).
"""

from __future__ import annotations

import struct
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, TypedDict, overload

from ..constants import Event

if TYPE_CHECKING:
    # As pyzmq's does, this module brings in the asyncio module for type checkers, so that
    # ``zmq.asyncio.Socket`` is known to code that imported only ``zmq`` and this module.
    from .. import asyncio as asyncio
    from .._future import _AsyncSocket
    from ..socket import Socket, SyncSocket

_HEADER = struct.Struct("=HI")


class MonitorMessage(TypedDict):
    event: Event
    value: int
    endpoint: bytes


def parse_monitor_message(msg: list[bytes]) -> MonitorMessage:
    """The event in a monitor message: ``{"event": Event, "value": int, "endpoint": bytes}``.

    ``value`` is an :class:`Event` too (a file descriptor, an errno or a protocol error code,
    comparable as an int), as pyzmq gives it."""
    if len(msg) != 2 or len(msg[0]) != _HEADER.size:
        raise RuntimeError(f"not a monitor event message: {msg!r}")
    event, value = _HEADER.unpack(msg[0])
    return {"event": Event(event), "value": Event(value), "endpoint": bytes(msg[1])}


async def _parse_later(msg: Awaitable[list[bytes]]) -> MonitorMessage:
    return parse_monitor_message(await msg)


@overload
def recv_monitor_message(socket: _AsyncSocket, flags: int = 0) -> Awaitable[MonitorMessage]: ...
@overload
def recv_monitor_message(socket: SyncSocket, flags: int = 0) -> MonitorMessage: ...
def recv_monitor_message(
    socket: Socket[Any], flags: int = 0
) -> MonitorMessage | Awaitable[MonitorMessage]:
    """Receive and decode the next event from ``socket`` (made by ``get_monitor_socket()``).

    With an async socket (whose ``recv_multipart`` returns an awaitable) it returns an
    awaitable of the event."""
    msg = socket.recv_multipart(flags)
    if isinstance(msg, Awaitable):
        return _parse_later(msg)
    return parse_monitor_message(msg)


__all__ = ["parse_monitor_message", "recv_monitor_message"]
