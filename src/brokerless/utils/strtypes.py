"""pyzmq's deprecated Python 2 string helpers (``zmq.utils.strtypes``), for code that still
imports them.  Use ``str.encode`` and ``bytes.decode``."""

from __future__ import annotations

import warnings

bytes = bytes  # the names old code imports from here
unicode = str
basestring = (str,)


def _deprecated() -> None:
    warnings.warn(
        "zmq.utils.strtypes is deprecated (as in pyzmq 23): use str.encode and bytes.decode",
        DeprecationWarning,
        stacklevel=3,
    )


def cast_bytes(s: str | bytes, encoding: str = "utf8", errors: str = "strict") -> bytes:
    """``s`` as bytes (``str`` is encoded)."""
    _deprecated()
    if isinstance(s, bytes):
        return s
    if isinstance(s, str):
        return s.encode(encoding, errors)
    raise TypeError(f"expected str or bytes, not {type(s).__name__}")


def cast_unicode(s: str | bytes, encoding: str = "utf8", errors: str = "strict") -> str:
    """``s`` as str (``bytes`` are decoded)."""
    _deprecated()
    if isinstance(s, str):
        return s
    if isinstance(s, bytes):
        return s.decode(encoding, errors)
    raise TypeError(f"expected str or bytes, not {type(s).__name__}")


b = asbytes = cast_bytes
u = cast_unicode

__all__ = ["asbytes", "b", "basestring", "bytes", "cast_bytes", "cast_unicode", "u", "unicode"]
