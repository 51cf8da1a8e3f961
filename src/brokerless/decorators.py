"""pyzmq's ``zmq.decorators``: run a function with a context or socket that is closed after.

    @context()
    @socket(zmq.PUSH)
    def work(ctx, push): ...

``context(name=None, *args, **kwargs)`` makes ``Context(*args, **kwargs)``; ``socket(name=None,
socket_type, *args, context_name="context", **kwargs)`` makes a socket of the context it finds
among the call's arguments (a keyword argument ``context_name``, else the first positional
Context), or else of ``Context.instance()``.  Each passes what it made as the keyword argument
``name`` (the first positional argument when it is a str), or else as the last positional
argument; the ``with`` block around the call closes it however the call ends.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .context import Context

if TYPE_CHECKING:
    from .socket import Socket

F = TypeVar("F", bound=Callable[..., Any])


def _split_name(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[str | None, tuple[Any, ...]]:
    """The name to pass the object under (``name=`` or a leading str), and the other args."""
    name = kwargs.pop("name", None)
    if name is None and args and isinstance(args[0], str):
        name, args = args[0], args[1:]
    return name, args


def _decorator(
    name: str | None,
    make: Callable[[tuple[Any, ...], dict[str, Any]], AbstractContextManager[Any]],
) -> Callable[[F], F]:
    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if name is not None and name in kwargs:
                raise TypeError(f"{func.__name__}() got multiple values for argument {name!r}")
            with make(args, kwargs) as obj:
                if name is None:
                    return func(*args, obj, **kwargs)
                return func(*args, **kwargs, **{name: obj})

        # functools.wraps gives the wrapper func's signature at run time; mypy cannot see that
        return cast(F, wrapper)

    return decorate


def context(*args: Any, **kwargs: Any) -> Callable[[F], F]:
    """Pass a new Context (made with the remaining arguments) to the decorated function."""
    name, args = _split_name(args, kwargs)
    return _decorator(name, lambda _args, _kwargs: Context(*args, **kwargs))


def socket(*args: Any, **kwargs: Any) -> Callable[[F], F]:
    """Pass a new socket (``ctx.socket(*remaining arguments)``) to the decorated function."""
    name, args = _split_name(args, kwargs)
    context_name = kwargs.pop("context_name", "context")

    def make(call_args: tuple[Any, ...], call_kwargs: dict[str, Any]) -> Socket[Any]:
        ctx = call_kwargs.get(context_name)
        if not isinstance(ctx, Context):
            ctx = next((a for a in call_args if isinstance(a, Context)), None)
        made: Socket[Any] = (ctx or Context.instance()).socket(*args, **kwargs)
        return made

    return _decorator(name, make)


__all__ = ["context", "socket"]
