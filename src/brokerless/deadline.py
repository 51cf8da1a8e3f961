"""Timeouts of blocking calls, as the milliseconds left to pass to each wait."""

from __future__ import annotations

import time


class Deadline:
    """The end of a wait of ``timeout_ms`` (None or negative: no end)."""

    __slots__ = ("_end",)

    def __init__(self, timeout_ms: float | None) -> None:
        self._end: float | None = None
        if timeout_ms is not None and timeout_ms >= 0:
            self._end = time.monotonic() + timeout_ms / 1000

    def wait_ms(self) -> int | None:
        """Milliseconds to wait now (-1: no limit, at least 1 otherwise); None once passed."""
        if self._end is None:
            return -1
        remaining = self._end - time.monotonic()
        if remaining <= 0:
            return None
        return max(1, int(remaining * 1000 + 0.999))
