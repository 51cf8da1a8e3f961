"""brokerless's version, and the libzmq version whose behaviour it follows (pyzmq's names).

``pyzmq_version()`` is brokerless's own version: brokerless stands in for pyzmq, with
pyzmq 27's API.  ``zmq_version()`` is the libzmq release whose behaviour it reproduces.
"""

from __future__ import annotations

import re

__version__ = "0.1.0"
#: The source revision (pyzmq's name); empty for a release.
__revision__ = ""

_parts = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)\.?(.*)", __version__)
assert _parts is not None, f"unexpected version {__version__!r}"
VERSION_MAJOR = int(_parts[1])
VERSION_MINOR = int(_parts[2])
VERSION_PATCH = int(_parts[3])
#: What follows the three numbers (``dev0`` in ``1.2.3.dev0``); empty for a release.
VERSION_EXTRA = _parts[4]

#: The version as numbers; a pre-release gets ``inf`` fourth, as pyzmq's does.
version_info: tuple[int, int, int] | tuple[int, int, int, float] = (
    (VERSION_MAJOR, VERSION_MINOR, VERSION_PATCH, float("inf"))
    if VERSION_EXTRA
    else (VERSION_MAJOR, VERSION_MINOR, VERSION_PATCH)
)

#: The libzmq version whose behaviour brokerless follows.
LIBZMQ_COMPAT = (4, 3, 5)


def pyzmq_version() -> str:
    """brokerless's version as a string (with the revision, when there is one)."""
    return f"{__version__}+{__revision__[:6]}" if __revision__ else __version__


def pyzmq_version_info() -> tuple[int, int, int] | tuple[int, int, int, float]:
    """brokerless's version as numbers (see :data:`version_info`)."""
    return version_info


def zmq_version_info() -> tuple[int, int, int]:
    """The libzmq version whose behaviour brokerless follows."""
    return LIBZMQ_COMPAT


def zmq_version() -> str:
    return ".".join(map(str, LIBZMQ_COMPAT))


__all__ = [
    "__revision__",
    "__version__",
    "pyzmq_version",
    "pyzmq_version_info",
    "zmq_version",
    "zmq_version_info",
]
