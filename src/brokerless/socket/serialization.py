"""pyzmq's serialisation helpers: strings, JSON, pickles and custom serialisers over
``send``/``recv`` and their multipart forms."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..utils import jsonapi

if TYPE_CHECKING:
    from ..frame import MessageTracker


class _Messaging(Protocol):
    """What the helpers build on: the socket's own calls, as :class:`Socket` has them (a type
    checker holds the socket a user calls a helper on to this: a parameter here that the
    socket lacks, ``**kwargs`` say, makes every helper "an invalid self argument")."""

    def send(
        self,
        data: Any,
        flags: int = ...,
        copy: bool = ...,
        track: bool = ...,
        routing_id: int | None = ...,
        group: str | None = ...,
    ) -> MessageTracker | None: ...

    def recv(self, flags: int = ...) -> bytes: ...

    def send_multipart(
        self, msg_parts: Sequence[Any], flags: int = ..., copy: bool = ..., track: bool = ...
    ) -> MessageTracker | None: ...

    def recv_multipart(self, flags: int = ..., copy: bool = ...) -> Any: ...


class SerializationMixin:
    """``send_string``/``recv_json``/... (pyzmq's ``zmq.sugar.socket`` helpers)."""

    __slots__ = ()

    def send_string(
        self: _Messaging,
        u: str,
        flags: int = 0,
        copy: bool = True,
        encoding: str = "utf-8",
        **kwargs: Any,
    ) -> MessageTracker | None:
        if not isinstance(u, str):
            raise TypeError("send_string needs a str; use send for bytes")
        return self.send(u.encode(encoding), flags=flags, copy=copy, **kwargs)

    send_unicode = send_string

    def recv_string(self: _Messaging, flags: int = 0, encoding: str = "utf-8") -> str:
        return self.recv(flags).decode(encoding)

    recv_unicode = recv_string

    def send_pyobj(
        self: _Messaging,
        obj: Any,
        flags: int = 0,
        protocol: int = pickle.DEFAULT_PROTOCOL,
        **kwargs: Any,
    ) -> MessageTracker | None:
        return self.send(pickle.dumps(obj, protocol), flags=flags, **kwargs)

    def recv_pyobj(self: _Messaging, flags: int = 0) -> Any:
        return pickle.loads(self.recv(flags))

    def send_json(
        self: _Messaging, obj: Any, flags: int = 0, **kwargs: Any
    ) -> MessageTracker | None:
        send_kwargs = {
            k: kwargs.pop(k) for k in ("copy", "track", "routing_id", "group") if k in kwargs
        }
        return self.send(jsonapi.dumps(obj, **kwargs), flags=flags, **send_kwargs)

    def recv_json(self: _Messaging, flags: int = 0, **kwargs: Any) -> Any:
        return jsonapi.loads(self.recv(flags), **kwargs)

    def send_serialized(
        self: _Messaging,
        msg: Any,
        serialize: Callable[[Any], Sequence[Any]],
        flags: int = 0,
        copy: bool = True,
        **kwargs: Any,
    ) -> MessageTracker | None:
        return self.send_multipart(serialize(msg), flags=flags, copy=copy, **kwargs)

    def recv_serialized(
        self: _Messaging, deserialize: Callable[[list[Any]], Any], flags: int = 0, copy: bool = True
    ) -> Any:
        return deserialize(self.recv_multipart(flags, copy=copy))
