"""DEALER, ROUTER, REQ and REP: the request-reply family.

DEALER is lb + fq.  ROUTER fair-queues in and prefixes each message with the routing id of the
pipe it came from; out, it routes on the first frame.  REQ is a DEALER that wraps each request
in an envelope (an empty delimiter, optionally preceded by a request id) and accepts one reply,
from the peer it asked.  REP is a ROUTER that strips the envelope on receive and puts it back on
the reply.
"""

from __future__ import annotations

import random
import struct
from typing import Any

from ..constants import SocketOption, SocketType
from ..errno import EFSM, EHOSTUNREACH
from ..error import ZMQError
from ..pipe import Pipe
from .base import Pattern, as_bytes, join_parts, parts_of
from .strategies import FairQueue, LoadBalancer

_O = SocketOption
_REQUEST_ID = struct.Struct("=I")
_ROUTING_ID = struct.Struct(">BI")


class Dealer(Pattern):
    socket_type = SocketType.DEALER
    passes_through = True
    sends_through = True
    options_accepted = frozenset({_O.PROBE_ROUTER})

    def __init__(self, options: dict[SocketOption, Any]) -> None:
        super().__init__(options)
        self.lb = LoadBalancer()
        self.fq = FairQueue()

    def greeting(self) -> tuple[Any, ...]:
        return (b"",) if self.options[_O.PROBE_ROUTER] else ()

    def attach(self, pipe: Pipe) -> bool | None:
        self.greet(pipe)
        self.fq.attach(pipe)
        self.lb.attach(pipe)
        return True

    def terminated(self, pipe: Pipe) -> None:
        self.fq.terminated(pipe)
        self.lb.terminated(pipe)

    def read_activated(self, pipe: Pipe) -> None:
        self.fq.activated(pipe)

    def write_activated(self, pipe: Pipe) -> None:
        self.lb.activated(pipe)

    def xsend(self, msg: Any) -> bool:
        return self.lb.send(msg) is not None

    def xrecv(self) -> Any:
        return self.fq.recv()

    def xhas_in(self) -> bool:
        return self.fq.has_in()

    def xhas_out(self) -> bool:
        return self.lb.has_out()

    def received_from(self) -> Pipe | None:
        return self.fq.last_pipe


class Router(Pattern):
    socket_type = SocketType.ROUTER
    options_accepted = frozenset(
        {_O.ROUTER_MANDATORY, _O.ROUTER_HANDOVER, _O.PROBE_ROUTER, _O.CONNECT_ROUTING_ID}
    )

    def __init__(self, options: dict[SocketOption, Any]) -> None:
        super().__init__(options)
        self.fq = FairQueue()
        self.out: dict[bytes, Pipe] = {}
        #: Pipes whose routing id another pipe has, in order (see ``attach``).
        self.waiting: dict[bytes, list[Pipe]] = {}
        self._next_id = random.getrandbits(32)

    def _generate_id(self) -> bytes:
        while True:
            self._next_id = (self._next_id + 1) & 0xFFFFFFFF
            rid = _ROUTING_ID.pack(0, self._next_id)
            if rid not in self.out:
                return rid

    def greeting(self) -> tuple[Any, ...]:
        return (b"",) if self.options[_O.PROBE_ROUTER] else ()

    def attach(self, pipe: Pipe) -> bool | None:
        """A peer whose routing id another has waits, as with libzmq: its connection stays
        open, neither read nor addressable, until the id is free (closed, its peer would
        reconnect with the same id at once, for ever).  The newcomer waits; with
        ROUTER_HANDOVER it takes the id, and the pipe that had it waits instead."""
        self.greet(pipe)
        rid = pipe.routing_id or pipe.peer_routing_id
        if not rid:
            rid = self._generate_id()
        pipe.routing_id = rid
        holder = self.out.get(rid)
        if holder is not None:
            if not self.options[_O.ROUTER_HANDOVER]:
                self.waiting.setdefault(rid, []).append(pipe)
                return True
            self.fq.terminated(holder)
            self.waiting.setdefault(rid, []).insert(0, holder)
        self.out[rid] = pipe
        self.fq.attach(pipe)
        return True

    def terminated(self, pipe: Pipe) -> None:
        rid = pipe.routing_id
        waiting = self.waiting.get(rid, [])
        if self.out.get(rid) is pipe:
            self.fq.terminated(pipe)
            del self.out[rid]
            if waiting:  # the id is free: the next pipe with it takes it
                self.out[rid] = heir = waiting.pop(0)
                self.fq.attach(heir)
        elif pipe in waiting:
            waiting.remove(pipe)
        if not waiting:
            self.waiting.pop(rid, None)

    def read_activated(self, pipe: Pipe) -> None:
        if self.waiting and pipe in self.waiting.get(pipe.routing_id, ()):
            return  # (read once it has the id)
        self.fq.activated(pipe)

    def _route(self, rid: Any) -> Pipe | None:
        pipe = self.out.get(as_bytes(rid))
        if pipe is None and self.options[_O.ROUTER_MANDATORY]:
            raise ZMQError(
                EHOSTUNREACH,
                f"Host unreachable: no peer with routing id {as_bytes(rid)!r} "
                "(ROUTER_MANDATORY is set)",
            )
        return pipe

    def xprepare_send(self, first: Any) -> bool:
        pipe = self._route(first)
        return pipe is None or pipe.check_write() or not self.options[_O.ROUTER_MANDATORY]

    def xsend(self, msg: Any) -> bool:
        if msg.__class__ is not list:
            return True  # a lone routing id: nothing to deliver (dropped, as libzmq does)
        pipe = self._route(msg[0])
        if pipe is None:
            return True  # unroutable: dropped, as libzmq does
        if not pipe.write(msg[1] if len(msg) == 2 else msg[1:]):
            return not self.options[_O.ROUTER_MANDATORY]  # at HWM: drop, or wait when mandatory
        return True

    def received_from(self) -> Pipe | None:
        return self.fq.last_pipe

    def recv_from(self) -> tuple[Any, Pipe | None]:
        """The next raw message and the pipe it came from (no routing id added)."""
        msg = self.fq.recv()
        return msg, self.fq.last_pipe

    def xrecv(self) -> Any:
        msg = self.fq.recv()
        if msg is None:
            return None
        rid = self.fq.last_pipe.routing_id  # type: ignore[union-attr]  # set by a recv
        if msg.__class__ is list:
            return [rid, *msg]
        return [rid, msg]

    def xhas_in(self) -> bool:
        return self.fq.has_in()

    def xhas_out(self) -> bool:
        if not self.options[_O.ROUTER_MANDATORY]:
            return True
        return any(pipe.check_write() for pipe in self.out.values())


class Req(Dealer):
    socket_type = SocketType.REQ
    options_accepted = frozenset({_O.REQ_CORRELATE, _O.REQ_RELAXED, _O.PROBE_ROUTER})
    lock_step = borrows_input = True
    passes_through = sends_through = False  # envelopes, and the request-reply lock step

    def __init__(self, options: dict[SocketOption, Any]) -> None:
        super().__init__(options)
        self.receiving_reply = False
        self.reply_pipe: Pipe | None = None
        self.request_id = random.getrandbits(32)

    def _check_send_state(self) -> None:
        if self.receiving_reply and not self.options[_O.REQ_RELAXED]:
            raise ZMQError(
                EFSM,
                "Operation cannot be accomplished in current state: a REQ socket must "
                "receive the reply before it sends the next request",
            )

    def xprepare_send(self, first: Any) -> bool:
        self._check_send_state()
        return self.lb.has_out()

    def turn_ends_with_last_part(self) -> bool:
        return not self.options[_O.REQ_RELAXED]

    def xsend(self, msg: Any) -> bool:
        if self.receiving_reply:
            self._check_send_state()
        if self.options[_O.REQ_CORRELATE]:
            request_id = (self.request_id + 1) & 0xFFFFFFFF
            envelope = [_REQUEST_ID.pack(request_id), b"", *parts_of(msg)]
        else:
            envelope = [b"", *msg] if msg.__class__ is list else [b"", msg]
        pipe = self.lb.send(envelope)
        if pipe is None:
            return False
        if self.options[_O.REQ_CORRELATE]:
            self.request_id = request_id
        self.reply_pipe = pipe
        self.receiving_reply = True
        return True

    def xrecv(self) -> Any:
        if not self.receiving_reply:
            raise ZMQError(
                EFSM,
                "Operation cannot be accomplished in current state: a REQ socket must "
                "send a request before it can receive",
            )
        while True:
            msg = self.fq.recv()
            if msg is None:
                return None
            if self.reply_pipe is not None and self.fq.last_pipe is not self.reply_pipe:
                continue  # a late reply from a peer we no longer wait for
            if (
                msg.__class__ is list
                and len(msg) == 2
                and not len(msg[0])
                and not self.options[_O.REQ_CORRELATE]
            ):
                reply = msg[1]  # the common reply: the delimiter and one part
            else:
                body = self._strip_envelope(parts_of(msg))
                if body is None:
                    continue  # malformed reply: dropped, as libzmq does
                reply = join_parts(body)
            self.receiving_reply = False
            self.reply_pipe = None
            return reply

    def _strip_envelope(self, parts: list[Any]) -> list[Any] | None:
        if self.options[_O.REQ_CORRELATE]:
            if len(parts) < 3 or as_bytes(parts[0]) != _REQUEST_ID.pack(self.request_id):
                return None
            parts = parts[1:]
        if len(parts) < 2 or len(parts[0]) != 0:
            return None
        return parts[1:]

    def xhas_in(self) -> bool:
        return self.receiving_reply and self.fq.has_in()

    def xhas_out(self) -> bool:
        if self.receiving_reply and not self.options[_O.REQ_RELAXED]:
            return False
        return self.lb.has_out()

    def terminated(self, pipe: Pipe) -> None:
        super().terminated(pipe)
        if pipe is self.reply_pipe:
            self.reply_pipe = None


class Rep(Router):
    socket_type = SocketType.REP
    # (libzmq's REP takes its ROUTER's options; only the connection's name is honoured here)
    options_accepted = frozenset({_O.CONNECT_ROUTING_ID})
    lock_step = borrows_input = True

    def __init__(self, options: dict[SocketOption, Any]) -> None:
        super().__init__(options)
        self.sending_reply = False
        self.reply_to: Pipe | None = None
        self.backtrace: list[Any] = []

    def xprepare_send(self, first: Any) -> bool:
        self._check_sending()
        return True

    def turn_ends_with_last_part(self) -> bool:
        return True

    def _check_sending(self) -> None:
        if not self.sending_reply:
            raise ZMQError(
                EFSM,
                "Operation cannot be accomplished in current state: a REP socket must "
                "receive a request before it can send a reply",
            )

    def xsend(self, msg: Any) -> bool:
        if not self.sending_reply:
            self._check_sending()
        pipe = self.reply_to
        if pipe is not None:  # (at HWM the reply is dropped)
            reply = [*self.backtrace, *msg] if msg.__class__ is list else [*self.backtrace, msg]
            lane = pipe.outbound
            queued = lane.queued
            try:
                pipe.write(reply)
            except BaseException:
                # Cut short by a signal handler's exception: a reply that went in is sent, as
                # with libzmq (a retried send would send it twice); one that did not is still
                # owed.  (Inline, not a call: a call's start is where a handler would run.)
                if lane.queued != queued:
                    self.sending_reply, self.reply_to, self.backtrace = False, None, []
                raise
        self.sending_reply, self.reply_to, self.backtrace = False, None, []
        return True

    def xrecv(self) -> Any:
        if self.sending_reply:
            raise ZMQError(
                EFSM,
                "Operation cannot be accomplished in current state: a REP socket must "
                "send its reply before it receives the next request",
            )
        while True:
            msg, pipe = self.recv_from()
            if msg is None:
                return None
            parts = parts_of(msg)
            if len(parts) > 1 and not len(parts[0]):  # a REQ's own envelope: no routing ids
                bottom: int | None = 0
            else:
                bottom = next((i for i, part in enumerate(parts[:-1]) if len(part) == 0), None)
            if bottom is None:
                continue  # no envelope delimiter: malformed, dropped
            self.backtrace = parts[: bottom + 1]
            self.reply_to = pipe
            self.sending_reply = True
            return join_parts(parts[bottom + 1 :])

    def xhas_in(self) -> bool:
        return not self.sending_reply and self.fq.has_in()

    def xhas_out(self) -> bool:
        return self.sending_reply
