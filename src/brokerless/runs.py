"""Runs: many equal-size messages, handed over as one item and cut into ``bytes`` by their reader.

Theory of operation
-------------------
A stream of fixed-size messages is common, and its frames sit at fixed strides in what was read
(see ``_uniform_run`` in :mod:`brokerless.zmtp.frames`).  Cut into ``bytes`` by the I/O thread,
each message is an object made on one core and read, then freed, on another: the receive side
paid for that hand-over more than for the decoding.  So a connection's decoder can hand such a
run on as one :class:`Run` -- the buffer, where the first body starts, the stride, the size and
the count -- and the pipe's *reader*, the socket's thread, cuts it (``messages``) when it reaches
it: each message is then made by the thread that receives it, and the I/O thread's work for the
run is the same whatever its length.

A run is only ever single-part data messages, in order, with nothing between them, so cutting it
late changes nothing a reader can see.  The pipe counts its messages against the HWM (see
:class:`~brokerless.pipe.Lane`).  This module imports nothing of brokerless: both the wire
(``zmtp``) and the pipes use it.
"""

from __future__ import annotations

from struct import Struct


def cut(buf: bytes, start: int, stride: int, size: int, n: int) -> tuple[bytes, ...]:
    """The ``n`` bodies of ``size`` octets in ``buf``, the first at ``start``, one every
    ``stride`` octets (``start`` at least ``stride - size``): cut in C by a ``struct`` format of
    ``n`` skip-and-take pairs, 40-50 ns a message where slicing in a comprehension took 100-200
    (made afresh each time: the ``struct`` module's own cache of formats is left alone)."""
    gap = stride - size
    return Struct(f"{gap}x{size}s" * n).unpack_from(buf, start - gap)


class Run:
    """``n`` messages of ``size`` octets in ``buf``, the first at ``start``, one every
    ``stride`` octets."""

    __slots__ = ("buf", "n", "size", "start", "stride")

    def __init__(self, buf: bytes, start: int, stride: int, size: int, n: int) -> None:
        self.buf = buf
        self.start = start
        self.stride = stride
        self.size = size
        self.n = n

    def __repr__(self) -> str:
        return f"<Run of {self.n} messages of {self.size} B>"

    def messages(self) -> tuple[bytes, ...]:
        """The messages, as ``bytes``, in order."""
        return cut(self.buf, self.start, self.stride, self.size, self.n)

