"""``zmq.sugar.version``: version numbers (they are :mod:`brokerless.version`'s)."""

from ..version import (
    VERSION_EXTRA,
    VERSION_MAJOR,
    VERSION_MINOR,
    VERSION_PATCH,
    __revision__,
    __version__,
    pyzmq_version,
    pyzmq_version_info,
    version_info,
    zmq_version,
    zmq_version_info,
)

__all__ = [
    "VERSION_EXTRA",
    "VERSION_MAJOR",
    "VERSION_MINOR",
    "VERSION_PATCH",
    "__revision__",
    "__version__",
    "pyzmq_version",
    "pyzmq_version_info",
    "version_info",
    "zmq_version",
    "zmq_version_info",
]
