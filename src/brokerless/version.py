"""Versions, by pyzmq's names: of the pyzmq API brokerless offers, and of the libzmq whose
behaviour it follows.

``__version__`` and ``pyzmq_version()`` answer with the pyzmq release whose API brokerless
implements (27.3.0): code written for pyzmq checks them to choose a path
(``zmq.pyzmq_version_info() >= (17, 0)``, ``LooseVersion(zmq.__version__) <= "14.5.0"``), and
must take the one for the API it gets -- as PyMySQL answers MySQLdb's ``version_info``.
brokerless's own release is :data:`BROKERLESS_VERSION` (the package's version).
``zmq_version()`` is the libzmq release whose behaviour it reproduces.
"""

from __future__ import annotations

import re

#: brokerless's own release.
BROKERLESS_VERSION = "0.1.0"
#: The pyzmq release whose API brokerless implements (see the module docstring).
__version__ = "27.3.0"
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
    """The pyzmq version whose API brokerless implements (with the revision, if one)."""
    return f"{__version__}+{__revision__[:6]}" if __revision__ else __version__


def pyzmq_version_info() -> tuple[int, int, int] | tuple[int, int, int, float]:
    """The same as numbers (see :data:`version_info`)."""
    return version_info


def zmq_version_info() -> tuple[int, int, int]:
    """The libzmq version whose behaviour brokerless follows."""
    return LIBZMQ_COMPAT


def zmq_version() -> str:
    return ".".join(map(str, LIBZMQ_COMPAT))


__all__ = [
    "BROKERLESS_VERSION",
    "__revision__",
    "__version__",
    "pyzmq_version",
    "pyzmq_version_info",
    "zmq_version",
    "zmq_version_info",
]
