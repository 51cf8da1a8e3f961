"""ZAP authentication served by a background thread (pyzmq's ``zmq.auth.thread``).

The thread polls two sockets: the ZAP socket, whose requests it answers one at a time, and one
end of an inproc PAIR pipe on which :meth:`ThreadAuthenticator.stop` sends ``TERMINATE``.  A
CURVE callback may be a coroutine: each request is decided on an asyncio loop private to the
thread, so such a callback may await.  As with pyzmq, call ``stop()`` before the context is
terminated or destroyed: the thread's sockets are its own while it runs (a context ended
under it ends the thread, quietly, as pyzmq's).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from ..constants import PollEvent, SocketType
from ..context import Context
from ..error import ZMQError
from ..poll import Poller
from ..socket import Socket, SyncSocket
from .base import Authenticator

_TERMINATE = b"TERMINATE"


class AuthenticationThread(threading.Thread):
    """Serves an :class:`Authenticator`'s ZAP socket until ``TERMINATE`` comes on ``pipe``."""

    def __init__(self, authenticator: Authenticator, pipe: SyncSocket) -> None:
        super().__init__(daemon=True, name="brokerless-zap")
        self.authenticator = authenticator
        self.log = authenticator.log
        self.pipe = pipe
        self.started = threading.Event()

    def run(self) -> None:
        loop = asyncio.new_event_loop()
        try:
            self._serve(loop)
        finally:
            self.pipe.close()
            loop.close()

    def _serve(self, loop: asyncio.AbstractEventLoop) -> None:
        zap = self.authenticator.zap_socket
        assert zap is not None, "the Authenticator is started before its thread"
        poller = Poller()
        poller.register(self.pipe, PollEvent.POLLIN)
        poller.register(zap, PollEvent.POLLIN)
        self.started.set()
        while True:
            try:
                ready = dict(poller.poll())
                if self.pipe in ready and self._handle_pipe_message(self.pipe.recv_multipart()):
                    return
                if zap in ready:
                    message = zap.recv_multipart()
            except ZMQError as exc:  # its context was terminated or destroyed (as pyzmq's)
                self.log.debug("auth thread ends: %s", exc)
                return
            if zap in ready:
                loop.run_until_complete(self.authenticator.handle_zap_message(message))

    def _handle_pipe_message(self, msg: list[bytes]) -> bool:
        """Whether the command says to stop; an unknown one is answered ``ERROR``."""
        command = msg[0]
        self.log.debug("auth received API command %r", command)
        if command == _TERMINATE:
            return True
        self.log.error("Invalid auth command from API: %r", command)
        self.pipe.send(b"ERROR")
        return False


class ThreadAuthenticator(Authenticator):
    """An :class:`Authenticator` answering ZAP requests in a thread of its own."""

    def __init__(
        self, context: Context[Any] | None = None, encoding: str = "utf-8", log: Any = None
    ) -> None:
        super().__init__(context=context, encoding=encoding, log=log)
        self.pipe: SyncSocket | None = None
        self.pipe_endpoint = f"inproc://brokerless.auth.thread-{id(self):x}"
        self.thread: AuthenticationThread | None = None

    def start(self) -> None:
        """Bind the ZAP socket and start the thread; returns once the thread is serving."""
        super().start()
        self.pipe = self.context.socket(SocketType.PAIR, socket_class=Socket)
        self.pipe.linger = 1
        self.pipe.bind(self.pipe_endpoint)
        thread_pipe = self.context.socket(SocketType.PAIR, socket_class=Socket)
        thread_pipe.linger = 1
        thread_pipe.connect(self.pipe_endpoint)
        self.thread = AuthenticationThread(self, thread_pipe)
        self.thread.start()
        if not self.thread.started.wait(timeout=10):
            raise RuntimeError("Authenticator thread failed to start")

    def stop(self) -> None:
        """Stop the thread (after the request it is answering, if any), close the sockets."""
        if self.pipe is not None:
            if self.thread is not None and self.thread.is_alive():
                self.pipe.send(_TERMINATE)
                self.thread.join()
            self.thread = None
            self.pipe.close()
            self.pipe = None
        super().stop()

    def is_alive(self) -> bool:
        """Whether the thread is serving."""
        return self.thread is not None and self.thread.is_alive()


__all__ = ["ThreadAuthenticator"]
