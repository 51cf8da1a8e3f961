"""What every socket type implements: a strategy over the socket's pipes.

A pattern knows nothing of transports or threads.  The socket calls it from its owner thread:
``attach``/``terminated`` when pipes come and go, ``read_activated``/``write_activated`` when a
pipe wakes up, ``xsend``/``xrecv`` for whole messages, ``xhas_in``/``xhas_out`` for polling.
A message is a ``bytes``/``Frame`` (one part) or a ``list`` of parts.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ..constants import SocketOption, SocketType
from ..errno import ENOTSUP
from ..error import ZMQError
from ..pipe import Lane, Pipe


def first_frame(msg: Any) -> Any:
    return msg[0] if msg.__class__ is list else msg


def as_bytes(part: Any) -> bytes:
    return part if part.__class__ is bytes else bytes(part)


def parts_of(msg: Any) -> list[Any]:
    return msg if msg.__class__ is list else [msg]


def join_parts(parts: list[Any]) -> Any:
    """The pipe form of a list of parts: the part itself when there is one."""
    return parts[0] if len(parts) == 1 else parts


class Pattern:
    """Base of the socket types; the defaults refuse to send and to receive."""

    socket_type: ClassVar[SocketType]
    #: Type-specific options this socket type accepts (generic ones are always accepted).
    options_accepted: ClassVar[frozenset[SocketOption]] = frozenset()
    #: Each message sent is followed by a wait for one (REQ, REP): never a burst of sends.
    lock_step: ClassVar[bool] = False
    #: With one network peer, its thread about to block in ``recv`` reads that connection
    #: itself (the lent input, ``socket/waiting.py``): for every reply of a lock-step socket
    #: (REQ, REP), and for a PULL while its messages come as large frames.
    borrows_input: ClassVar[bool] = False
    #: With one pipe, what ``xrecv`` returns is the pipe's next message as it is (no envelope,
    #: no filter, nothing held back): the socket may then take it from the pipe itself.
    passes_through: ClassVar[bool] = False
    def recv_passes_through(self) -> bool:
        """Whether ``xrecv`` passes messages through now (``passes_through``, unless the
        pattern's state decides: a SUB subscribed to everything)."""
        return self.passes_through

    #: With one pipe, what ``xsend`` does with a message is write it to that pipe as it is
    #: (no envelope, no routing): the socket may then write it there itself.
    sends_through: ClassVar[bool] = False

    #: Every single-part message ``xsend`` takes now goes, as it is, to each of these pipes
    #: (with its outbound lane) that has room: the socket may then write them itself
    #: (``pipe.write_all``).  None when not (the default; a PUB keeps it, see ``refresh``).
    broadcast: tuple[tuple[Pipe, Lane], ...] | None = None

    def __init__(self, options: dict[SocketOption, Any]) -> None:
        self.options = options

    def refresh(self) -> None:
        """The socket's pipes or options changed: bring state derived from them up to date."""

    # pipes
    def attach(self, pipe: Pipe) -> bool | None:
        """Take a new pipe.  Return False to refuse it (the socket closes it)."""
        raise NotImplementedError

    def terminated(self, pipe: Pipe) -> None:
        raise NotImplementedError

    def read_activated(self, pipe: Pipe) -> None:
        pass

    def write_activated(self, pipe: Pipe) -> None:
        pass

    def hiccuped(self, pipe: Pipe) -> None:
        """The connection behind ``pipe`` was lost and is being re-established (libzmq's
        ``xhiccuped``); what the next connection must carry again is written now."""

    def greeting(self) -> tuple[Any, ...]:
        """Messages every new pipe starts with (subscriptions, a probe, a welcome message).

        Must be cheap and safe to call from another thread: a connecting socket writes the
        greeting of the socket it connects to into the new pipe, so the binder's messages are
        there before the binder's own thread gets round to attaching the pipe.
        """
        return ()

    def greet(self, pipe: Pipe) -> None:
        """Write the greeting into a pipe being attached, unless the connecter already did."""
        if pipe.greeted is None:
            for msg in self.greeting():
                pipe.force_write(msg)

    def check_connect(self) -> None:
        """Called by ``connect`` before anything is made: raise to refuse the connection."""

    # messages
    def xsend(self, msg: Any) -> bool:
        name = self.socket_type.name
        raise ZMQError(ENOTSUP, f"{name} sockets cannot send: the operation is not supported")

    def xrecv(self) -> Any:
        name = self.socket_type.name
        raise ZMQError(ENOTSUP, f"{name} sockets cannot receive: the operation is not supported")

    def xprepare_send(self, first: Any) -> bool:
        """Checks made at the first part of a multipart send; True when it may proceed now."""
        return self.xhas_out()

    def turn_ends_with_last_part(self) -> bool:
        """Whether a send must wait until the message received is read to its last part (REP;
        REQ unless REQ_RELAXED): libzmq hands the turn over only there."""
        return False

    def xhas_in(self) -> bool:
        return False

    def xhas_out(self) -> bool:
        return False

    def received_from(self) -> Pipe | None:
        """The pipe the last message received came from (its connection's properties go on
        frames received with ``copy=False``); None when not known."""
        return None

    def xsetsockopt(self, option: SocketOption, value: Any) -> None:
        """Apply a type-specific option (already stored in ``self.options``)."""
