"""STREAM: raw TCP (or ipc) connections to peers that do not speak ZMTP.

Theory of operation
-------------------
Each connection is one pipe whose far end is a raw engine (:mod:`brokerless.transport.raw`):
what arrives from the peer comes in as one single-part message per read, and what the socket
sends goes out as bytes, with no framing.  On top of that the pattern routes as a ROUTER does
(it shares ROUTER's routing table and fair queue):

* **in:** every message is ``[routing id, data]``, fair-queued over the connections.  With
  STREAM_NOTIFY (the default) the raw engine also hands in an empty message when a connection
  opens and when it ends, so the application sees ``[id, b""]`` for both.
* **out:** a message is read frame by frame as libzmq does: a routing id frame, then one data
  frame.  The id must name a live connection (EHOSTUNREACH otherwise, always: there is no
  ROUTER_MANDATORY to set); a connection at its HWM makes the send wait, or raise ``Again``.
  Sending ``[id, b""]`` closes that connection (what was sent before it still goes out, within
  LINGER, as when a socket closes); the socket then forgets the id and sees no notification
  for it.  MORE on a data frame is ignored, so a third frame starts a new ``[id, data]`` pair;
  a lone frame sent without MORE leaves the socket expecting a data frame, which is then
  dropped (libzmq's state machine, kept exactly).
* **ids:** an accepted connection gets a generated 5-octet id (as ROUTER's), which ROUTING_ID
  then reads, as in libzmq; ``connect`` uses CONNECT_ROUTING_ID when one is set (an id already in
  use is refused with EINVAL before anything is made, where libzmq aborts).  A connecting
  STREAM keeps its pipe and id across reconnects, so a peer that went away and came back shows
  as ``[id, b""]`` twice, under the same id.
"""

from __future__ import annotations

from typing import Any

from ..constants import SocketOption, SocketType
from ..errno import EHOSTUNREACH, EINVAL
from ..error import ZMQError
from ..pipe import Pipe
from .base import as_bytes
from .reqrep import Router

_O = SocketOption


class Stream(Router):
    socket_type = SocketType.STREAM
    options_accepted = frozenset({_O.STREAM_NOTIFY, _O.CONNECT_ROUTING_ID})

    def __init__(self, options: dict[SocketOption, Any]) -> None:
        super().__init__(options)
        self._more_out = False  # the next frame sent is a data frame (a routing id came last)
        self._current_out: Pipe | None = None  # where that data frame goes (None: dropped)

    def greeting(self) -> tuple[Any, ...]:
        return ()

    def check_connect(self) -> None:
        rid = self.options[_O.CONNECT_ROUTING_ID]
        if rid and rid in self.out:
            raise ZMQError(
                EINVAL,
                f"Invalid argument: CONNECT_ROUTING_ID {rid!r} already names a connection of "
                "this STREAM socket",
            )

    def attach(self, pipe: Pipe) -> bool | None:
        rid = pipe.routing_id  # CONNECT_ROUTING_ID (check_connect refused one in use)
        if not rid:
            rid = self._generate_id()
            self.options[_O.ROUTING_ID] = rid  # libzmq: ROUTING_ID reads the last id made
        pipe.routing_id = rid
        self.out[rid] = pipe
        self.fq.attach(pipe)
        return True

    def _lookup(self, rid: Any) -> Pipe:
        pipe = self.out.get(as_bytes(rid))
        if pipe is None or pipe.terminating:
            raise ZMQError(
                EHOSTUNREACH,
                f"Host unreachable: no STREAM connection with routing id {as_bytes(rid)!r}",
            )
        return pipe

    def xprepare_send(self, first: Any) -> bool:
        if self._more_out:
            return True  # ``first`` is the data frame of a routing id sent alone before
        return self._lookup(first).check_write()

    def xsend(self, msg: Any) -> bool:
        parts = msg if msg.__class__ is list else [msg]
        last = len(parts) - 1
        first = 0
        if last and not self._more_out:
            pipe = self._lookup(parts[0])
            if not pipe.check_write():
                return False  # at its HWM: wait, or Again (nothing is sent or changed yet)
            self._current_out, self._more_out, first = pipe, True, 1
        for i in range(first, last + 1):
            part = parts[i]
            if not self._more_out:
                # A routing id.  Alone (no MORE) it names nothing: its data frame is dropped.
                self._current_out = self._lookup(part) if i < last else None
                self._more_out = True
                continue
            self._more_out = False
            target, self._current_out = self._current_out, None
            if target is None:
                continue
            if len(part) == 0:
                self._close(target)
            else:
                target.write(part)  # a later pair whose connection is at its HWM is dropped
        return True

    def _close(self, pipe: Pipe) -> None:
        """Close a connection at the application's request: what was sent to it before still
        goes out, what it sent and was not read is dropped, and the socket forgets the pipe."""
        pipe.terminate()
        pipe.drop_inbound()
        owner = pipe.owner
        if owner is not None:
            owner.pipe_terminated(pipe)

    def xhas_out(self) -> bool:
        return True  # as libzmq: a STREAM is always writable (routing decides per message)
