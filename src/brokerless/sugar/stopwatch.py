"""pyzmq's deprecated ``zmq.Stopwatch``: use :func:`time.monotonic` instead."""

from __future__ import annotations

import time
import warnings


class Stopwatch:
    """Microseconds between ``start()`` and ``stop()`` (deprecated, as in pyzmq)."""

    def __init__(self) -> None:
        warnings.warn(
            "zmq.Stopwatch is deprecated: use time.monotonic and friends",
            DeprecationWarning,
            stacklevel=2,
        )
        self._start = 0.0

    def start(self) -> None:
        self._start = time.monotonic()

    def stop(self) -> int:
        """Microseconds since ``start()``."""
        return int(1e6 * (time.monotonic() - self._start))


__all__ = ["Stopwatch"]
