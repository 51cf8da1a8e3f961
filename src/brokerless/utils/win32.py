"""Ctrl-C while blocked on Windows (``zmq.utils.win32``), as pyzmq has it.

On Windows the interpreter turns Ctrl-C into ``KeyboardInterrupt`` only when control comes back
to it, so a thread blocked in a wait that has no timeout never sees it.
:class:`allow_interrupt` installs a console control handler (``SetConsoleCtrlHandler``) for the
``with`` block that calls ``action`` on Ctrl-C -- typically something that wakes the wait, such
as sending to a PAIR socket the loop polls -- and then lets the interpreter's own handler run.
Elsewhere SIGINT already interrupts a blocking brokerless call, so it installs nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

_CTRL_C_EVENT = 0


class allow_interrupt:
    """``with allow_interrupt(action): ...`` calls ``action()`` (which must not raise) on
    Ctrl-C on Windows; a no-op on other systems."""

    def __init__(self, action: Callable[[], Any] | None = None) -> None:
        self.action = action or (lambda: None)
        self._handler: Any = None
        if sys.platform == "win32":
            self._handler = _console_handler(self.action)

    def __enter__(self) -> None:
        if self._handler is not None:
            _set_console_ctrl_handler(self._handler, add=True)

    def __exit__(self, *exc_info: object) -> None:
        if self._handler is not None:
            _set_console_ctrl_handler(self._handler, add=False)


def _console_handler(action: Callable[[], Any]) -> Any:
    """A PHANDLER_ROUTINE that runs ``action`` on Ctrl-C and reports the event unhandled, so
    the next handler (the interpreter's, which raises KeyboardInterrupt) runs too."""
    import ctypes
    from ctypes import wintypes

    def handler(event: int) -> int:
        if event == _CTRL_C_EVENT:
            action()
        return 0

    # (not a decorator: the prototype is Windows-only, so untyped where mypy runs elsewhere)
    prototype = ctypes.WINFUNCTYPE(wintypes.BOOL, wintypes.DWORD)  # type: ignore[attr-defined]
    return prototype(handler)


def _set_console_ctrl_handler(handler: Any, add: bool) -> None:
    import ctypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    if not kernel32.SetConsoleCtrlHandler(handler, add):
        raise ctypes.WinError(ctypes.get_last_error())  # type: ignore[attr-defined]


__all__ = ["allow_interrupt"]
