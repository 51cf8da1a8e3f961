"""pyzmq's ``zmq.sugar.attrsettr``: the mixin that turns ``obj.linger`` into ``obj.get(LINGER)``
and ``obj.linger = 0`` into ``obj.set(LINGER, 0)``, for classes that define ``get``/``set``.

brokerless's own Socket and Context do not use it: their options are typed descriptors (see
:mod:`brokerless.option_attrs`).  It is here for user classes built on pyzmq's mixin.
"""

from __future__ import annotations

from typing import Any

from ..constants import ContextOption, SocketOption
from ..errno import EFAULT, EINVAL
from ..error import ZMQError
from ..option_attrs import declared

OptValT = int | bytes | str


def _option(owner: object, name: str) -> tuple[str, int]:
    """The socket or context option ``name`` upper-cased names, or AttributeError."""
    upper = name.upper()
    for options in (SocketOption, ContextOption):  # BLOCKY, in both, is the flat SocketOption
        if upper in options.__members__:
            return upper, options.__members__[upper]
    raise AttributeError(f"{type(owner).__name__} has no such option: {upper}")


class AttributeSetter:
    """Attributes that are not otherwise defined are options: read by ``self.get(option)``,
    written by ``self.set(option, value)``; a name that is no socket or context option is an
    AttributeError.  (pyzmq looks the name up among all its constants, so ``obj.push = 1`` there
    sets option 8, RATE; here, as on brokerless's Socket, it is an AttributeError.)

    Assignment to a name already on the instance, or defined or declared (annotated) in the
    class or a base, is ordinary assignment.  Reading an option ``get`` refuses with EINVAL or
    EFAULT (write-only) is an AttributeError, so ``hasattr`` is false for it.
    """

    def __setattr__(self, key: str, value: Any) -> None:
        if key in getattr(self, "__dict__", ()) or declared(type(self), key):
            object.__setattr__(self, key, value)
            return
        name, option = _option(self, key)
        self._set_attr_opt(name, option, value)

    def __getattr__(self, key: str) -> OptValT:
        name, option = _option(self, key)
        try:
            return self._get_attr_opt(name, option)
        except ZMQError as exc:
            if exc.errno in (EINVAL, EFAULT):
                raise AttributeError(f"{key} is a write-only option here") from exc
            raise

    def _set_attr_opt(self, name: str, opt: int, value: Any) -> None:
        """How an option attribute is written (``name`` is the option's upper-case name)."""
        self.set(opt, value)

    def _get_attr_opt(self, name: str, opt: int) -> OptValT:
        """How an option attribute is read."""
        return self.get(opt)

    def get(self, option: int) -> OptValT:
        """Read ``option``: for the subclass to define."""
        raise NotImplementedError(f"{type(self).__name__} does not define get()")

    def set(self, option: int, value: Any) -> None:
        """Write ``option``: for the subclass to define."""
        raise NotImplementedError(f"{type(self).__name__} does not define set()")


__all__ = ["AttributeSetter"]
