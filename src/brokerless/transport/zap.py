"""A connection's line to the ZAP handler (RFC 27) bound at ``inproc://zeromq.zap.01``.

Theory of operation
-------------------
When a server mechanism pauses its handshake with a :class:`~brokerless.zmtp.ZapRequest`, the
engine asks its :class:`ZapClient`, which opens (once per connection, as libzmq's session does)
a pipe to the handler socket of the same context and writes the request there as one message,
delimiter first, as a DEALER would.  The handler (REP or ROUTER) answers on its thread; the
pipe's activation reaches the client through ``send_command``, and the I/O thread reads the reply
and hands its frames to the engine, which resumes the handshake.  Nothing blocks the I/O thread
meanwhile; the engine stops reading the connection until the answer is in.

No handler bound: the answer is None at once (the mechanism decides: PLAIN fails, NULL and CURVE
go on unless ZAP_ENFORCE_DOMAIN).  A handler that goes away before it answered counts as an
empty, so malformed, reply (PROTOCOL_ERROR_ZAP_MALFORMED_REPLY).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..mailbox import Command
from ..zmtp import ZapRequest
from ..zmtp.mechanisms.zap import ZAP_ENDPOINT

if TYPE_CHECKING:
    from ..io import IOThread
    from ..pipe import Pipe
    from .port import InprocNames

#: The answer when the handler left without replying.
HANDLER_GONE: list[bytes] = []


class ZapClient:
    """Asks the ZAP handler for one connection; ``on_reply(frames)`` runs on the I/O thread
    with the reply's frames, None when no handler is bound, or :data:`HANDLER_GONE`."""

    def __init__(
        self, io: IOThread, inproc: InprocNames, on_reply: Callable[[list[bytes] | None], None]
    ) -> None:
        self.io = io
        self._inproc = inproc
        self._on_reply = on_reply
        self._pipe: Pipe | None = None
        self._waiting = False

    def ask(self, request: ZapRequest, address: bytes) -> None:
        pipe = self._pipe
        if pipe is None:
            pipe = self._pipe = self._inproc.open_internal(ZAP_ENDPOINT[len("inproc://") :], self)
        if pipe is None:
            self._on_reply(None)
            return
        self._waiting = True
        pipe.force_write(request.frames(address))
        self._read()  # marks the reader asleep, so the reply is signalled

    def close(self) -> None:
        self._waiting = False
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            pipe.terminate()

    # -- pipe owner interface (send_command from any thread) -------------------------------

    def send_command(self, command: Command, arg: Any) -> None:
        self.io.call_soon(self._on_command, command)

    def _on_command(self, command: Command) -> None:
        if self._pipe is None:
            return
        if command is Command.PIPE_TERM:
            self._read()  # the reply may precede the end
            if self._pipe is not None and self._pipe.process_pipe_term():
                self.pipe_terminated(self._pipe)
        else:
            self._read()

    def pipe_terminated(self, pipe: Pipe) -> None:
        """The handler closed its end."""
        if pipe is self._pipe:
            self._pipe = None
            if self._waiting:
                self._waiting = False
                self._on_reply(HANDLER_GONE)

    def _read(self) -> None:
        pipe = self._pipe
        if pipe is None:
            return
        reply = pipe.read()
        if reply is None or not self._waiting:
            return
        self._waiting = False
        parts = reply if reply.__class__ is list else [reply]
        self._on_reply([p if p.__class__ is bytes else bytes(p) for p in parts])
