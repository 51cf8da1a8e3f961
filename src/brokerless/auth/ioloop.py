"""Deprecated (as in pyzmq 25): ZAP authentication on tornado's IOLoop.

Tornado runs on asyncio, so :class:`~brokerless.auth.asyncio.AsyncioAuthenticator` serves it;
:class:`IOLoopAuthenticator` is that class under its old name.  Importing this module warns.
"""

from __future__ import annotations

import warnings
from typing import Any

from ..context import Context
from .asyncio import AsyncioAuthenticator

warnings.warn(
    "zmq.auth.ioloop.IOLoopAuthenticator is deprecated. Use zmq.auth.asyncio.AsyncioAuthenticator",
    DeprecationWarning,
    stacklevel=2,
)


class IOLoopAuthenticator(AsyncioAuthenticator):
    """:class:`AsyncioAuthenticator`; ``io_loop`` is deprecated and ignored."""

    def __init__(
        self,
        context: Context[Any] | None = None,
        encoding: str = "utf-8",
        log: Any = None,
        io_loop: Any = None,
    ) -> None:
        if io_loop is not None:
            warnings.warn(
                f"{type(self).__name__}(io_loop) is deprecated and ignored",
                DeprecationWarning,
                stacklevel=2,
            )
        super().__init__(context=context, encoding=encoding, log=log)


__all__ = ["IOLoopAuthenticator"]
