"""ZAP authentication served on the running asyncio loop (pyzmq's ``zmq.auth.asyncio``).

:meth:`AsyncioAuthenticator.start`, called with the loop running or set, binds the ZAP socket
(a plain socket, also in an asyncio Context) and starts a task that waits for requests with an
asyncio :class:`~brokerless.asyncio.Poller` and answers each in turn;
:meth:`~AsyncioAuthenticator.stop` cancels the task and closes the socket.
"""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

from ..asyncio import Poller
from ..constants import PollEvent
from ..context import Context
from .base import Authenticator


class AsyncioAuthenticator(Authenticator):
    """An :class:`Authenticator` answering ZAP requests in a task on the running asyncio loop.

    ``loop`` is deprecated and ignored, as in pyzmq: the task runs on the loop running (or set)
    when :meth:`start` is called.
    """

    def __init__(
        self,
        context: Context[Any] | None = None,
        loop: Any = None,
        encoding: str = "utf-8",
        log: Any = None,
    ) -> None:
        super().__init__(context, encoding, log)
        if loop is not None:
            warnings.warn(
                f"{type(self).__name__}(loop) is deprecated and ignored",
                DeprecationWarning,
                stacklevel=2,
            )
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Bind the ZAP socket and serve it from a task on the running loop -- or, as pyzmq's
        (``asyncio.ensure_future``), on the loop set for this thread, which runs it once it
        runs (``start()`` then ``loop.run_until_complete(...)``, tornado's ``run_sync``)."""
        super().start()
        self._task = asyncio.ensure_future(self._serve())

    async def _serve(self) -> None:
        zap = self.zap_socket
        assert zap is not None, "started"
        poller = Poller()
        poller.register(zap, PollEvent.POLLIN)
        while True:
            if dict(await poller.poll()).get(zap):
                await self.handle_zap_message(zap.recv_multipart())

    def stop(self) -> None:
        """Cancel the task and close the ZAP socket."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        super().stop()


__all__ = ["AsyncioAuthenticator"]
