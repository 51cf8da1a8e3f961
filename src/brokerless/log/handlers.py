"""Logging over a PUB socket: pyzmq's ``zmq.log.handlers`` (``PUBHandler``, ``TopicLogger``).

Each record goes out as two frames, ``[topic, message]``.  The topic is the handler's
``root_topic`` (when set), the level name, and the record's own subtopic, joined by dots: a
record ``"disk.full::no room left"`` logged at WARNING by a handler with root topic ``"app"``
is published as ``[b"app.WARNING.disk.full", b"..."]``, so subscribers filter by prefix.  The
message is formatted by the formatter for the record's level (``formatters``).

A record that cannot be sent (the socket was closed, its context terminated) goes to
``handleError``, as the logging module asks of handlers -- it prints the error when
``logging.raiseExceptions`` is set -- and the logging call returns.  pyzmq's handler lets the
ZMQError out of ``logger.info``, so a socket closed under a handler breaks every later log call
of the program.
"""

from __future__ import annotations

import copy
import logging
from typing import Any, cast

from ..constants import SocketType
from ..context import Context
from ..socket import Socket

#: What separates a record's subtopic from its text: ``log.info("topic::text")``.
TOPIC_DELIM = "::"

_DETAILED = "%(levelname)s %(filename)s:%(lineno)d - %(message)s\n"


class PUBHandler(logging.Handler):
    """Publish log records on a PUB socket (``interface_or_socket``: the socket, or an
    endpoint to bind a new one to, in ``context`` or a new Context)."""

    socket: Socket[Any]
    ctx: Context[Any]

    def __init__(
        self,
        interface_or_socket: str | Socket[Any],
        context: Context[Any] | None = None,
        root_topic: str = "",
    ) -> None:
        super().__init__()
        self.root_topic = root_topic
        self.formatters: dict[int, logging.Formatter | None] = {
            logging.DEBUG: logging.Formatter(_DETAILED),
            logging.INFO: logging.Formatter("%(message)s\n"),
            logging.WARNING: logging.Formatter(_DETAILED),
            logging.ERROR: logging.Formatter(
                "%(levelname)s %(filename)s:%(lineno)d - %(message)s - %(exc_info)s\n"
            ),
            logging.CRITICAL: logging.Formatter(_DETAILED),
        }
        if isinstance(interface_or_socket, Socket):
            self.socket = interface_or_socket
            self.ctx = cast("Context[Any]", interface_or_socket.context)
        else:
            self.ctx = context or Context()
            self.socket = self.ctx.socket(SocketType.PUB)
            self.socket.bind(interface_or_socket)

    @property
    def root_topic(self) -> str:
        """The first part of every topic this handler publishes ('' for none)."""
        return self._root_topic

    @root_topic.setter
    def root_topic(self, value: str | bytes) -> None:
        self.setRootTopic(value)

    def setRootTopic(self, root_topic: str | bytes) -> None:
        """Set :attr:`root_topic` (bytes are UTF-8)."""
        self._root_topic = root_topic.decode() if isinstance(root_topic, bytes) else root_topic

    def setFormatter(self, fmt: logging.Formatter | None, level: int = logging.NOTSET) -> None:
        """The formatter for ``level``, or for every level when none is given."""
        if level == logging.NOTSET:
            for known in self.formatters:
                self.formatters[known] = fmt
        else:
            self.formatters[level] = fmt

    def format(self, record: logging.LogRecord) -> str:
        formatter = self.formatters.get(record.levelno)
        return (formatter or logging.Formatter()).format(record)

    def emit(self, record: logging.LogRecord) -> None:
        subtopic, sep, text = str(record.msg).partition(TOPIC_DELIM)
        if sep:
            record = copy.copy(record)  # the caller's record keeps its message
            record.msg = text
        else:
            subtopic = ""
        parts = [self.root_topic, record.levelname, subtopic]
        topic = ".".join(part for part in parts if part)
        try:
            message = self.format(record).encode("utf-8")
            self.socket.send_multipart([topic.encode("utf-8", "replace"), message])
        except Exception:
            self.handleError(record)


class TopicLogger(logging.Logger):
    """A Logger whose methods take a topic first: ``log.debug("disk.full", "no room")`` logs
    ``"disk.full::no room"`` (for a :class:`PUBHandler`).

    Its methods' signatures are not Logger's (the topic comes first), as in pyzmq: hence the
    ``type: ignore`` on each."""

    def log(self, level: int, topic: str, msg: str, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        super().log(level, f"{topic}{TOPIC_DELIM}{msg}", *args, **kwargs)

    def debug(self, topic: str, msg: str, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        self.log(logging.DEBUG, topic, msg, *args, **kwargs)

    def info(self, topic: str, msg: str, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        self.log(logging.INFO, topic, msg, *args, **kwargs)

    def warning(self, topic: str, msg: str, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        self.log(logging.WARNING, topic, msg, *args, **kwargs)

    warn = warning  # type: ignore[assignment]

    def error(self, topic: str, msg: str, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        self.log(logging.ERROR, topic, msg, *args, **kwargs)

    def exception(self, topic: str, msg: str, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        kwargs.setdefault("exc_info", True)
        self.log(logging.ERROR, topic, msg, *args, **kwargs)

    def critical(self, topic: str, msg: str, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        self.log(logging.CRITICAL, topic, msg, *args, **kwargs)

    fatal = critical  # type: ignore[assignment]


__all__ = ["TOPIC_DELIM", "PUBHandler", "TopicLogger"]
