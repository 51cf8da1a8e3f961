"""An I/O thread: a poller loop (``poller.py``), a command mailbox and timers.

Theory of operation
-------------------
Everything that lives in an I/O thread (listeners, connectors, sessions, engines) is touched
only by that thread.  Other threads reach it with ``call_soon(fn, arg)``, which queues the call
in the thread's :class:`~brokerless.mailbox.Mailbox` and wakes the poller through the
mailbox's descriptor.  Each loop turn waits in ``poll`` until a descriptor is ready, a call is
queued, or the next timer is due; then it runs the queued calls, the ready handlers and the due
timers, in that order.  ``stop`` lets it finish the turn and exit; the owner joins it.

Calls before handlers keeps a burst together: a socket's thread that writes the first message
of a burst itself (direct output) and queues the rest for this thread has them written here
before a connection of this thread reads the first, so a peer in the same context receives the
burst in one piece, as it would from libzmq's batching, not its first message alone.  A
handler runs only if its descriptor is still registered with it, and is handed only the
reported events still watched for: a call (or an earlier handler) may have closed the
descriptor, stopped watching it, watched it for other events, or given its number to another
handler.

Memory: what a closed connection leaves here must be nothing, without waiting for the cyclic
garbage collector, or a stream of short connections grows the process without bound.

* The thread owns the one buffer its connections read into (``read_buffer``): decoding copies
  what it keeps, so a read buffer per connection would only cost memory.
* A cancelled :class:`Timer` drops its callback at once (a bound method would keep its object,
  e.g. a closed engine, alive until the timer was due, and make a reference cycle through the
  object's own timer table).  Cancelled timers stay in the heap until due or until they make
  up most of it; then the heap is rebuilt without them, so a flood of connections that each
  cancel a long timer (HANDSHAKE_IVL) cannot fill it.
* A loop turn's handlers run in their own call (``_turn``), so no local variable keeps
  the last handler (and its connection) alive while the thread waits for the next event.
"""

from __future__ import annotations

import heapq
import itertools
import os
import signal
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any

from ..mailbox import Mailbox
from .poller import READ, Poller, Registration, new_poller

#: Bytes one read of a connection takes at most (the size of each thread's read buffer).
READ_BUFFER_SIZE = 256 * 1024

#: The heap is rebuilt without its cancelled timers once they are at least this many and more
#: than half of it.
_COMPACT_MIN = 64


class Timer:
    """A pending call; ``cancel()`` makes it a no-op and lets go of the callback."""

    __slots__ = ("_thread", "callback", "when")

    def __init__(self, thread: IOThread, when: float, callback: Callable[[], None]) -> None:
        self._thread = thread
        self.when = when
        self.callback: Callable[[], None] | None = callback  # None once cancelled or run

    def cancel(self) -> None:
        if self.callback is not None:
            self.callback = None
            self._thread._timer_cancelled()


class IOThread:
    """One reactor thread; see the module docstring."""

    def __init__(
        self,
        name: str = "brokerless-io",
        cpus: frozenset[int] | None = None,
        poller: Callable[[], Poller] = new_poller,
    ) -> None:
        self._cpus = cpus  # the CPUs it keeps to (the context's THREAD_AFFINITY_CPU_ADD)
        self._poller = poller()
        # Watching descriptors (the I/O thread, and a socket's thread lending itself a
        # connection's input): the poller's own methods, one call less on paths that run once
        # a message (see poller.py).
        self.register: Callable[[Any, int, Callable[[int], None]], None] = self._poller.register
        self.modify: Callable[[Any, int, Callable[[int], None]], None] = self._poller.modify
        self.unregister: Callable[[Any], None] = self._poller.unregister
        self.watch: Callable[[Any, int, Callable[[int], None]], None] = self._poller.watch
        self._mailbox: Mailbox[Callable[[Any], None]] = Mailbox()
        self._mailbox.use_fd()
        self._poller.register(self._mailbox.fileno(), READ, None)
        self._timers: list[tuple[float, int, Timer]] = []
        self._cancelled = 0  # cancelled timers still in _timers
        self._seq = itertools.count()
        self.read_buffer = memoryview(bytearray(READ_BUFFER_SIZE))
        self._running = True
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()
        self._ident = self._thread.ident

    # -- used from any thread -----------------------------------------------------------------

    def call_soon(self, fn: Callable[[Any], None], arg: Any = None) -> None:
        """Run ``fn(arg)`` in the I/O thread."""
        self._mailbox.send(fn, arg)

    def call_and_wait(self, fn: Callable[[Any], None], arg: Any = None) -> None:
        """Run ``fn(arg)`` in the I/O thread and return once it ran (for synchronous results
        such as an endpoint being free again after ``unbind``).  Called from the I/O thread
        itself -- a socket the garbage collector finalized there, closing -- it cannot wait for
        itself: ``fn`` runs on the thread's next turn, as ``call_soon`` would."""
        if self.is_current:
            self.call_soon(fn, arg)
            return
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
        return threading.get_ident() == self._ident

    # -- used from the I/O thread -------------------------------------------------------------

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        timer = Timer(self, time.monotonic() + delay, callback)
        heapq.heappush(self._timers, (timer.when, next(self._seq), timer))
        return timer

    def _timer_cancelled(self) -> None:
        self._cancelled += 1
        timers = self._timers
        if self._cancelled >= _COMPACT_MIN and self._cancelled * 2 > len(timers):
            timers[:] = [entry for entry in timers if entry[2].callback is not None]
            heapq.heapify(timers)
            self._cancelled = 0

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

    def _keep_to_cpus(self) -> None:
        """Keep this thread to its CPUs, if it was given any (and the platform can)."""
        if self._cpus is None or not hasattr(os, "sched_setaffinity"):
            return
        try:
            os.sched_setaffinity(0, self._cpus)  # (0: this thread)
        except OSError as exc:  # none of them is a CPU this process may run on
            warnings.warn(
                f"{self._thread.name} cannot keep to CPUs {sorted(self._cpus)} "
                f"(THREAD_AFFINITY_CPU_ADD; {exc.strerror}): this process may run on "
                f"{sorted(os.sched_getaffinity(0))}; the thread runs on any of those",
                RuntimeWarning,
                stacklevel=1,
            )

    def _run(self) -> None:
        _block_signals()
        self._keep_to_cpus()
        poll = self._poller.poll
        mailbox = self._mailbox
        mailbox_fd = mailbox.fileno()
        try:
            while self._running:
                timeout = None
                if self._timers:
                    timeout = max(0.0, self._timers[0][0] - time.monotonic())
                if mailbox.commands:
                    timeout = 0
                self._turn(poll(timeout), mailbox_fd)
                self._run_timers()
        finally:
            self._poller.close()
            mailbox.close()

    def _turn(self, ready: list[tuple[int, int, Registration]], mailbox_fd: int) -> None:
        """The queued calls, then the ready handlers (see the module doc)."""
        mailbox = self._mailbox
        for fd, _, _ in ready:
            if fd == mailbox_fd:
                # Reset before the calls, never after: a call queued while ``process`` drains
                # (by a call, or by another thread) signals and is taken in the same drain, and
                # resetting that signal afterwards would leave the mailbox disarmed with
                # nothing to re-arm it -- no sender would wake this thread again.
                mailbox.clear_fd()
                break
        mailbox.process(self._dispatch)
        registered = self._poller.registrations
        for fd, mask, then in ready:
            if fd == mailbox_fd:
                continue
            now = registered.get(fd)  # as it is after the calls (see the module doc)
            if now is None:
                continue
            handler = now[2]
            if handler is not None and handler == then[2] and mask & now[1]:
                self._guarded(handler, mask & now[1])

    def _run_timers(self) -> None:
        now = time.monotonic()
        timers = self._timers
        while timers and timers[0][0] <= now:
            timer = heapq.heappop(timers)[2]
            callback = timer.callback
            if callback is None:
                self._cancelled -= 1
            else:
                timer.callback = None
                self._guarded(callback)


#: Signals a fault in the thread itself raises: never blocked (the kernel would kill the
#: process outright, before faulthandler could say where).
_FAULTS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT}


def _block_signals() -> None:
    """Keep signals sent to the process (Ctrl-C's SIGINT, SIGTERM) away from this thread, as
    libzmq's I/O threads do: the kernel hands such a signal to any thread that does not block
    it, and Python runs the handler in the main thread only when that thread next wakes -- a
    main thread asleep in an untimed ``recv`` would sleep through a Ctrl-C taken here."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals() - _FAULTS)
