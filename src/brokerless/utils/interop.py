"""Addresses of sockets and contexts as ints (pyzmq's ``zmq.utils.interop``).

In pyzmq these are libzmq pointers, possibly CFFI ones.  brokerless's ``underlying`` is
already an int (see :mod:`brokerless.shadow`); anything else cannot name a brokerless object.
"""

from __future__ import annotations

from typing import Any


def cast_int_addr(n: Any) -> int:
    """``n`` as an int address: ints pass; anything else (a CFFI pointer) is a ValueError."""
    if isinstance(n, int) and not isinstance(n, bool):
        return n
    raise ValueError(
        f"cannot cast {n!r} to an int address: brokerless's addresses are the ints "
        "Socket.underlying and Context.underlying give"
    )


__all__ = ["cast_int_addr"]
