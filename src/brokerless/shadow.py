"""Shadows: a second Python object for a socket or context that exists already.

pyzmq's ``Socket.shadow(addr)``, ``Context.shadow(addr)``, ``Socket(other)``, ``copy.copy``
(Jupyter wraps sync sockets and contexts in async ones this way).  With libzmq a shadow wraps
the same C pointer and ``underlying`` is that pointer's address; here ``underlying`` is a number
this module maps back to the live object (weakly: the number goes with the object), so
``Socket.shadow(sock.underlying)`` finds ``sock``.  A number that names no live brokerless
object -- a pointer from pyzmq, pyczmq or a C extension -- is refused with EFAULT, libzmq's
answer for a bad pointer: there is no libzmq here to hand it to.

A shadow is the same socket or context: what one does, the other sees; closing either closes
it; dropping a shadow closes nothing.

- A context keeps its state in its ``__dict__``: a shadow context shares that dict
  (``context.py``), so the shadow's own class decides what its methods do.
- A socket keeps its state in slots, which cannot be shared: a shadow socket is an instance of
  :func:`face_class`, a subclass whose every attribute (methods included) is the shadowed
  socket's, except its own ``_shadow``, ``_shadow_obj`` and ``_shadowed``.
"""

from __future__ import annotations

import weakref
from typing import Any, TypeVar

from .errno import EFAULT
from .error import ZMQError

T = TypeVar("T")

_LIVE: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


def address(obj: object) -> int:
    """The number ``obj.underlying`` gives: :func:`resolve` maps it back to ``obj``."""
    key = id(obj)
    _LIVE[key] = obj
    return key


def foreign(what: str, why: str) -> ZMQError:
    """The error for something only libzmq could shadow."""
    return ZMQError(
        EFAULT,
        f"Bad address: {why}, not a live brokerless {what}; brokerless has no libzmq, so it "
        f"cannot shadow a {what} another library (pyzmq, pyczmq, a C extension) made",
    )


def resolve(target: object, kind: type[T]) -> T:
    """The original ``kind`` behind ``target``: one (or a shadow of one), or its ``underlying``."""
    if isinstance(target, kind):
        target = target.underlying  # type: ignore[attr-defined]  # a shadow's is its original's
    if isinstance(target, bool) or not isinstance(target, int):
        raise TypeError(
            f"shadow takes a {kind.__name__} or its .underlying, not {type(target).__name__}"
        )
    obj = _LIVE.get(target)
    if not isinstance(obj, kind):
        raise foreign(kind.__name__, f"{target:#x} is not the .underlying of any")
    return obj


# Read on the shadow itself; everything else is the shadowed socket's.
_OWN = frozenset({"__class__", "_shadow", "_shadow_obj", "_shadowed"})


class _Face:
    """Forwards attribute access to ``self._shadowed`` (see the module doc)."""

    __slots__ = ()

    def __getattribute__(self, name: str) -> Any:
        if name in _OWN:
            return object.__getattribute__(self, name)
        return getattr(object.__getattribute__(self, "_shadowed"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(object.__getattribute__(self, "_shadowed"), name, value)

    def __delattr__(self, name: str) -> None:
        delattr(object.__getattribute__(self, "_shadowed"), name)


_FACES: dict[type, type] = {}


def face_class(cls: type[T]) -> type[T]:
    """The subclass of ``cls`` (slotted, with ``_shadowed``) whose instances forward to the
    socket they shadow: ``isinstance(shadow, cls)`` holds and its repr names ``cls``."""
    if issubclass(cls, _Face):
        return cls
    face = _FACES.get(cls)
    if face is None:
        namespace = {
            "__slots__": (),
            "__module__": cls.__module__,
            "__qualname__": cls.__qualname__,
            # what repr names (pyzmq's rule: the class's own _repr_cls, else module.name)
            "_repr_cls": vars(cls).get("_repr_cls") or f"{cls.__module__}.{cls.__name__}",
        }
        face = _FACES[cls] = type(cls.__name__, (_Face, cls), namespace)
    return face
