"""Storm's windowed bolts: ``process_window`` gets windows of tuples, sliding or tumbling, by
count or by time.

Theory of operation
-------------------
A :class:`WindowedBolt` sets ``window_length`` and ``sliding_interval``, each a :class:`Count`
(tuples) or a :class:`Duration` (seconds of processing time); with no ``sliding_interval`` the
windows tumble (the interval is the length).  ``process`` keeps each tuple with the time it
came.  A window *fires* after every ``sliding_interval`` tuples (a Count: in ``process``) or
at every tick (a Duration: the bolt's tick frequency is the interval).  Firing first *evicts*
what the window no longer holds -- tuples that came a ``window_length`` or more ago (a
Duration), or all but the last ``window_length`` (a Count) -- and acks them (``auto_ack``:
Storm acks a tuple when it has left every window), then calls ``process_window`` with a
:class:`TupleWindow`: the tuples in the window, those new since the last window, and those
evicted since (an empty window is skipped).  What it emits is anchored to every tuple of the
window (``auto_anchor``).  A tumbling window holds every tuple since the last one and evicts
them once processed.  A window whose ``process_window`` raised fails its tuples
(``auto_fail``) and drops them; the error is raised on, and reported.

A Duration window also evicts at each tick between windows (a Count interval with a Duration
length ticks every length), so its tuples are acked once no window can hold them, and a run to
completion waits for that (``holding``).  A Count window keeps its last tuples until newer
ones come, as Storm's: a finite input's last tuples are acked only by their timeout.  In an
acking topology ``message_timeout_secs`` must outlast a Duration window's length plus its
interval (Storm's rule, checked when the topology is built), or tuples would time out while a
window still holds them.  Windows are not checkpointed: a checkpointed topology refuses them.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from .component import BufferingBolt
from .config import tick_problem
from .tuple import Tuple

if TYPE_CHECKING:
    from .config import Config

__all__ = ["Count", "Duration", "TupleWindow", "WindowedBolt"]


@dataclass(frozen=True)
class Count:
    """A window length or sliding interval in tuples (Storm's ``BaseWindowedBolt.Count``)."""

    n: int

    def problem(self) -> str | None:
        n = self.n
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            return f"Count takes an integer >= 1, not {n!r}"
        return None


@dataclass(frozen=True)
class Duration:
    """A window length or sliding interval in seconds of processing time (Storm's
    ``BaseWindowedBolt.Duration``)."""

    seconds: float

    def problem(self) -> str | None:
        problem = tick_problem(self.seconds)
        if problem is not None or self.seconds is None:
            return f"Duration's seconds {problem or 'must not be None'}"
        return None


@dataclass(frozen=True)
class TupleWindow:
    """What ``process_window`` gets (Storm's ``TupleWindow``: ``get()``, ``getNew()``,
    ``getExpired()``, ``getEndTimestamp()``)."""

    #: The tuples in the window, oldest first.
    tuples: list[Tuple]
    #: Those that came since the last window.
    new: list[Tuple]
    #: Those evicted since the last window (already acked).
    expired: list[Tuple]
    #: When the window fired (``time.time()``).
    end: float


class WindowedBolt(BufferingBolt):
    """A bolt that processes windows of tuples (Storm's ``BaseWindowedBolt``)::

        class Average(WindowedBolt):
            window_length = Duration(30)      # the last 30 s of tuples,
            sliding_interval = Duration(10)   # every 10 s (None: tumbling windows)
            outputs = ["average"]

            def process_window(self, window):
                values = [t[0] for t in window.tuples]
                self.emit([sum(values) / len(values)])

    Implement ``process_window``; do not override ``process`` or ``process_tick``."""

    #: How much a window holds: a :class:`Count` of tuples or a :class:`Duration`.
    window_length: ClassVar[Count | Duration | None] = None
    #: How often a window fires; None: when the last one is full (tumbling windows).
    sliding_interval: ClassVar[Count | Duration | None] = None

    _buffer: deque[tuple[float, Tuple]] | None = None  # (when it came, the tuple)
    _new = 0  # tuples since the last window
    _expired: list[Tuple] | None = None  # evicted since the last window

    def process_window(self, window: TupleWindow) -> None:
        """Process one window (see :class:`TupleWindow`)."""
        raise NotImplementedError(f"{type(self).__name__} must implement process_window()")

    @property
    def _interval(self) -> Count | Duration:
        interval = self.sliding_interval or self.window_length
        assert interval is not None  # (checked when the topology was built)
        return interval

    @property
    def holding(self) -> bool:
        return bool(self._buffer) and isinstance(self.window_length, Duration)

    def resolve_tick_secs(self, declared: float | None, config: Config) -> float | None:
        length, interval = self.window_length, self.sliding_interval
        for name, value in (("window_length", length), ("sliding_interval", interval)):
            if value is None and name == "sliding_interval":
                continue
            if not isinstance(value, Count | Duration):
                raise ValueError(f"{name} must be a Count or a Duration, not {value!r}")
            problem = value.problem()
            if problem is not None:
                raise ValueError(f"{name}: {problem}")
        if declared is not None:
            raise ValueError(
                "a WindowedBolt's windows set its tick tuples: drop tick_tuple_freq_secs"
            )
        interval = interval or length
        span = sum(v.seconds for v in (length, interval) if isinstance(v, Duration))
        if config.num_ackers != 0 and span > config.message_timeout_secs:
            raise ValueError(
                f"its window length plus sliding interval ({span:g} s) is more than "
                f"message_timeout_secs ({config.message_timeout_secs:g} s): its tuples would "
                "time out while a window holds them; raise message_timeout_secs"
            )
        if isinstance(interval, Duration):
            return interval.seconds
        if isinstance(length, Duration):
            return length.seconds
        return config.tick_tuple_freq_secs

    def process(self, tup: Tuple) -> None:
        buffer = self._buffer
        if buffer is None:
            buffer = self._buffer = deque()
        buffer.append((time.monotonic(), tup))
        self._new += 1
        interval = self._interval
        if isinstance(interval, Count) and self._new >= interval.n:
            self._fire()

    def process_tick(self, tup: Tuple) -> None:
        if isinstance(self._interval, Duration):
            self._fire()
        elif self._buffer:
            self._evict(time.monotonic())

    def _evict(self, now: float) -> None:
        """Evict and ack what the window no longer holds."""
        buffer = self._buffer
        assert buffer is not None  # (process made it)
        length = self.window_length
        if isinstance(length, Count):
            while len(buffer) > length.n:
                self._expire(buffer.popleft()[1])
        else:
            assert length is not None  # (checked when the topology was built)
            horizon = now - length.seconds
            while buffer and buffer[0][0] <= horizon:
                self._expire(buffer.popleft()[1])

    def _expire(self, tup: Tuple) -> None:
        if self._expired is None:
            self._expired = []
        self._expired.append(tup)
        if self.auto_ack:
            self.ack(tup)

    def _fire(self) -> None:
        buffer = self._buffer
        if buffer is None:
            buffer = self._buffer = deque()
        if self.sliding_interval is not None:  # (tumbling: all since the last window)
            self._evict(time.monotonic())
        if not buffer:
            return  # (as Storm's: an empty window is not processed)
        tuples = [tup for _, tup in buffer]
        new = tuples[len(tuples) - min(self._new, len(tuples)) :]
        window = TupleWindow(tuples, new, self._expired or [], time.time())
        self._new, self._expired = 0, None
        self._anchors = tuples
        try:
            self.process_window(window)
        except Exception:
            buffer.clear()
            if self.auto_fail:
                for tup in tuples:
                    self.fail(tup)
            raise
        finally:
            self._anchors = None
        if self.sliding_interval is None:  # tumbling: no later window holds them
            buffer.clear()
            for tup in tuples:
                self._expire(tup)
