"""User code a type checker must accept: pyzmq's send/recv helpers called on brokerless's
sockets, sync and gevent's (pyzmq's examples do this: heartbeat/ping.py, gevent/simple.py).
tests/test_typing.py runs ``mypy --strict`` over this file; nothing here runs."""

from __future__ import annotations

import brokerless as zmq
import brokerless.green as green

context = zmq.Context()
socket = context.socket(zmq.PUSH)
tracker: zmq.MessageTracker | None = socket.send_string("text")
socket.send_unicode("text")
socket.send_json({"a": 1}, zmq.NOBLOCK)
socket.send_pyobj([1, 2])
socket.send_serialized("x", lambda m: [m.encode()])
text: str = socket.recv_string()
text = socket.recv_unicode()
loaded = socket.recv_json()
obj = socket.recv_pyobj()
parts = socket.recv_serialized(lambda frames: frames)

green_socket = green.Context().socket(green.PUSH)
green_socket.send_json(["this", "is", "a", "list"])
green_socket.recv_json()
