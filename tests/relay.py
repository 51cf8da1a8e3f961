"""A TCP relay on 127.0.0.1 that loses bytes when a test says so: what a broken connection
does to the messages in flight on it.

``Relay(port)`` forwards each connection made to ``relay.port`` to ``port``.  ``swallow()``
makes the connections open now drop what their client sends from then on (``swallowed`` is
set once some was); ``cut()`` closes them.  Connections made later are forwarded whole.
``lose(send)`` does both around ``send()``: what it sends is lost with its connection.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable


class Relay:
    def __init__(self, port: int) -> None:
        self._target = ("127.0.0.1", port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.swallowed = threading.Event()
        self._lock = threading.Lock()
        self._open: list[tuple[socket.socket, socket.socket]] = []
        self._swallowing: set[int] = set()  # id() of the client sockets that lose what they send
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def swallow(self) -> None:
        with self._lock:
            self._swallowing.update(id(client) for client, _ in self._open)

    def lose(self, send: Callable[[], object]) -> None:
        """Swallow what ``send()`` sends, then cut the connection it went on."""
        self.swallow()
        send()
        assert self.swallowed.wait(10), "nothing was sent to swallow"
        self.cut()

    def cut(self) -> None:
        with self._lock:
            pairs, self._open = self._open, []
            self._swallowing.clear()
        for pair in pairs:
            for sock in pair:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:  # its pump has closed it already
                    pass

    def close(self) -> None:
        self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self.cut()
        for thread in self._threads:
            thread.join(10)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            server = socket.create_connection(self._target)
            with self._lock:
                self._open.append((client, server))
            for source, sink in ((client, server), (server, client)):
                thread = threading.Thread(target=self._pump, args=(source, sink), daemon=True)
                self._threads.append(thread)
                thread.start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with source:
            while True:
                try:
                    data = source.recv(65536)
                except OSError:
                    data = b""
                if not data:
                    break
                if id(source) in self._swallowing:
                    self.swallowed.set()
                    continue
                try:
                    sink.sendall(data)
                except OSError:
                    break
        try:
            sink.shutdown(socket.SHUT_RDWR)
        except OSError:  # closed already
            pass
