"""JSON to and from UTF-8 bytes (pyzmq's ``zmq.utils.jsonapi``), with the standard library."""

from __future__ import annotations

import json
from typing import Any

#: The JSON module in use (pyzmq keeps the name for old code that asks).
jsonmod = json


def dumps(o: object, **kwargs: Any) -> bytes:
    """``o`` as JSON, UTF-8 encoded; keyword arguments go to :func:`json.dumps`."""
    return json.dumps(o, **kwargs).encode("utf-8")


def loads(s: bytes | str, **kwargs: Any) -> Any:
    """The object in JSON ``s`` (bytes are UTF-8); keyword arguments go to :func:`json.loads`."""
    if isinstance(s, bytes):
        s = s.decode("utf-8")
    return json.loads(s, **kwargs)


__all__ = ["dumps", "loads"]
