"""Options as attributes: ``sock.linger = 0``, ``sock.SNDHWM``, ``ctx.io_threads``, ``ctx.linger``.

pyzmq answers these through ``__getattr__``/``__setattr__``, which type checkers cannot see.
Here each option is a typed descriptor in a class body, written out for every option by
``tools/gen_constants.py`` (``option_attrs_generated.py``); these are the descriptors it uses.
Reading an option that cannot be read (EINVAL: write-only, or not for this socket type) raises
AttributeError, as pyzmq does, so ``hasattr`` and ``unittest.mock`` work; everything else
raises what ``getsockopt``/``setsockopt`` raise.  Reads are typed (``int`` or ``bytes``); what
may be assigned is left to the run-time check, as pyzmq's ``__setattr__`` leaves it, so code
type-checked against pyzmq checks the same here.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MethodType
from typing import Any, Generic, Protocol, TypeVar, overload

from .constants import ContextOption, SocketOption
from .errno import EINVAL
from .error import ZMQError

V = TypeVar("V")


class _Sockopts(Protocol):
    def getsockopt(self, option: int) -> Any: ...
    def setsockopt(self, option: int, optval: Any) -> None: ...


class _Ctxopts(Protocol):
    sockopts: dict[int, Any]

    def get(self, option: int) -> int: ...
    def set(self, option: int, value: int) -> None: ...


def _read(get: Callable[[int], Any], option: SocketOption | ContextOption) -> Any:
    """``get(option)``, with EINVAL (unreadable here) turned into AttributeError."""
    try:
        return get(option)
    except ZMQError as exc:
        if exc.errno == EINVAL:
            raise AttributeError(f"{option.name} cannot be read here: {exc}") from exc
        raise


def declared(cls: type, name: str) -> bool:
    """Whether ``name`` is defined or declared (annotated) in ``cls`` or a base: an ordinary
    attribute, which pyzmq's attribute setter assigns as such (anything else must be an
    option)."""
    return any(
        name in vars(base) or name in vars(base).get("__annotations__", {}) for base in cls.__mro__
    )


class SocketOptionAttr(Generic[V]):
    """``sock.<option>``: ``getsockopt``/``setsockopt`` of one socket option."""

    __slots__ = ("option",)

    def __init__(self, option: SocketOption) -> None:
        self.option = option

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> SocketOptionAttr[V]: ...
    @overload
    def __get__(self, obj: _Sockopts, owner: type | None = None) -> V: ...
    def __get__(self, obj: _Sockopts | None, owner: type | None = None) -> Any:
        return self if obj is None else _read(obj.getsockopt, self.option)

    def __set__(self, obj: _Sockopts, value: Any) -> None:
        obj.setsockopt(self.option, value)


class ContextOptionAttr:
    """``ctx.<context option>``: ``ctx.get``/``ctx.set``."""

    __slots__ = ("option",)

    def __init__(self, option: ContextOption) -> None:
        self.option = option

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> ContextOptionAttr: ...
    @overload
    def __get__(self, obj: _Ctxopts, owner: type | None = None) -> int: ...
    def __get__(self, obj: _Ctxopts | None, owner: type | None = None) -> Any:
        return self if obj is None else _read(obj.get, self.option)

    def __set__(self, obj: _Ctxopts, value: int) -> None:
        obj.set(self.option, value)


class DefaultOptionAttr(Generic[V]):
    """``ctx.<socket option>``: the default for sockets the context creates afterwards
    (``ctx.sockopts``); ``del ctx.linger`` removes it."""

    __slots__ = ("option",)

    def __init__(self, option: SocketOption) -> None:
        self.option = option

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> DefaultOptionAttr[V]: ...
    @overload
    def __get__(self, obj: _Ctxopts, owner: type | None = None) -> V: ...
    def __get__(self, obj: _Ctxopts | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        try:
            return obj.sockopts[self.option]
        except KeyError:
            raise AttributeError(f"no default {self.option.name} is set on this context") from None

    def __set__(self, obj: _Ctxopts, value: Any) -> None:
        obj.sockopts[self.option] = value

    def __delete__(self, obj: _Ctxopts) -> None:
        try:
            del obj.sockopts[self.option]
        except KeyError:
            raise AttributeError(f"no default {self.option.name} is set on this context") from None


class TopicMethod:
    """``sub.subscribe(topic)``, and the spelling pyzmq also takes: ``sub.subscribe = topic``
    (a method that assignment calls too)."""

    def __init__(self, method: Callable[[Any, str | bytes], None]) -> None:
        self.method = method
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> TopicMethod: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> Callable[[str | bytes], None]: ...
    def __get__(self, obj: object | None, owner: type | None = None) -> Any:
        return self if obj is None else MethodType(self.method, obj)

    def __set__(self, obj: object, topic: str | bytes) -> None:
        self.method(obj, topic)
