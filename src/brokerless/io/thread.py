"""An I/O thread: a selector loop, a command mailbox and timers.

Theory of operation
-------------------
Everything that lives in an I/O thread (listeners, connectors, sessions, engines) is touched
only by that thread.  Other threads reach it with ``call_soon(fn, arg)``, which queues the call
in the thread's :class:`~brokerless.mailbox.Mailbox` and wakes the selector through the
mailbox's descriptor.  Each loop turn waits in ``select`` until a descriptor is ready, a call is
queued, or the next timer is due; then it runs the ready handlers, the queued calls and the due
timers, in that order.  ``stop`` lets it finish the turn and exit; the owner joins it.
"""

from __future__ import annotations

import heapq
import itertools
import selectors
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from ..mailbox import Mailbox


class Timer:
    """A pending call; ``cancel()`` makes it a no-op and lets go of the callback at once (a
    cancelled timer stays queued until it is due: it must not keep what the callback holds,
    e.g. a closed connection's engine and its buffers, alive until then)."""

    __slots__ = ("callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        self.callback = _nothing


def _nothing() -> None:
    pass


class IOThread:
    """One reactor thread; see the module docstring."""

    def __init__(self, name: str = "brokerless-io") -> None:
        self._selector = selectors.DefaultSelector()
        self._mailbox = Mailbox()
        self._mailbox.use_fd()
        self._selector.register(self._mailbox.fileno(), selectors.EVENT_READ, None)
        self._timers: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        self._running = True
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # -- used from any thread -----------------------------------------------------------------

    def call_soon(self, fn: Callable[[Any], None], arg: Any = None) -> None:
        """Run ``fn(arg)`` in the I/O thread."""
        self._mailbox.send(fn, arg)

    def call_and_wait(self, fn: Callable[[Any], None], arg: Any = None) -> None:
        """Run ``fn(arg)`` in the I/O thread and return once it ran (for synchronous results
        such as an endpoint being free again after ``unbind``)."""
        done = threading.Event()

        def run(_: Any) -> None:
            try:
                fn(arg)
            finally:
                done.set()

        self.call_soon(run)
        while not done.wait(1.0):
            if not self._thread.is_alive():
                return

    def stop(self) -> None:
        self.call_soon(self._stop)

    def join(self, timeout: float | None = None) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def is_current(self) -> bool:
        return threading.current_thread() is self._thread

    # -- used from the I/O thread -------------------------------------------------------------

    def register(self, fileobj: Any, events: int, handler: Callable[[int], None]) -> None:
        self._selector.register(fileobj, events, handler)

    def modify(self, fileobj: Any, events: int, handler: Callable[[int], None]) -> None:
        self._selector.modify(fileobj, events, handler)

    def unregister(self, fileobj: Any) -> None:
        try:
            self._selector.unregister(fileobj)
        except (KeyError, ValueError):
            pass

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        timer = Timer(time.monotonic() + delay, callback)
        heapq.heappush(self._timers, (timer.when, next(self._seq), timer))
        return timer

    def _stop(self, _: Any = None) -> None:
        self._running = False

    def _dispatch(self, fn: Callable[[Any], None], arg: Any) -> None:
        self._guarded(fn, arg)

    @staticmethod
    def _guarded(fn: Callable[..., None], *args: Any) -> None:
        """Run one handler.  An exception there is a bug: it is reported loudly (traceback on
        stderr), but it must not take every other connection of the thread down with it."""
        try:
            fn(*args)
        except Exception:  # reported on stderr, not swallowed
            traceback.print_exc()

    def _run(self) -> None:
        select = self._selector.select
        mailbox = self._mailbox
        mailbox_fd = mailbox.fileno()
        try:
            while self._running:
                timeout = None
                if self._timers:
                    timeout = max(0.0, self._timers[0][0] - time.monotonic())
                if mailbox.commands:
                    timeout = 0
                for key, mask in select(timeout):
                    if key.fd == mailbox_fd:
                        mailbox.clear_fd()
                    else:
                        self._guarded(key.data, mask)
                mailbox.process(self._dispatch)
                self._run_timers()
        finally:
            self._selector.close()
            mailbox.close()

    def _run_timers(self) -> None:
        now = time.monotonic()
        timers = self._timers
        while timers and timers[0][0] <= now:
            _, _, timer = heapq.heappop(timers)
            if not timer.cancelled:
                self._guarded(timer.callback)
