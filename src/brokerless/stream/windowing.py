"""Storm's windowed bolts: ``process_window`` gets windows of tuples, sliding or tumbling, by
count or by time.

Theory of operation
-------------------
A :class:`WindowedBolt` sets ``window_length`` and ``sliding_interval``, each a :class:`Count`
(tuples) or a :class:`Duration` (seconds of processing time), as class attributes or per
instance (keyword arguments, as Storm's ``withWindow``); with no ``sliding_interval`` the
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
window still holds them; and ``max_spout_pending`` must be at least what a Count window holds
(its length plus its Count interval, as Storm checks), or the spouts would stop emitting before
a window could fire and evict, and nothing would move but the timeouts.  In a checkpointed
topology the windows are in each checkpoint (``windows_snapshot``): a rollback takes them back
as they were, and the spouts replay what came after.  A :class:`StatefulWindowedBolt` (Storm's
stateful windowing) also has a ``KeyValueState``: each checkpoint keeps the state and the
windows together.

Event time (``timestamp_field``): a tuple's time is that field's value.
At each tick (every ``watermark_interval``) the *watermark* moves to the oldest of each input
stream's newest time, less ``lag``, once every input stream (``TopologyContext.sources``) has
sent; Duration windows are aligned on multiples of their interval, hold the tuples of (end -
length, end] in time order, and fire in order once the watermark reaches their end (windows
that would hold nothing are skipped); Count windows (both settings Counts, as Storm's watermark
count windows) fire at every interval-th tuple in time order that the watermark passed, holding
the last ``window_length`` tuples up to it.  A tuple at or behind the watermark is late: its
values go to ``late_tuple_stream``, anchored to it, or nowhere, and it is acked.  The watermark
moves only as tuples come: the last windows of a finite input wait, as in Storm, and a run to
completion does not wait for them.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .component import BufferingBolt, StatefulBolt, declared_streams
from .config import tick_problem
from .tuple import Fields, Tuple

if TYPE_CHECKING:
    from .config import Config

__all__ = ["Count", "Duration", "StatefulWindowedBolt", "TupleWindow", "WindowedBolt"]


@dataclass(frozen=True)
class Count:
    """A window length or sliding interval in tuples (Storm's ``BaseWindowedBolt.Count``)."""

    n: int

    def problem(self, zero: bool = False) -> str | None:
        n = self.n
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            return f"Count takes an integer >= 1, not {n!r}"
        return None


@dataclass(frozen=True)
class Duration:
    """A window length or sliding interval in seconds of processing time (Storm's
    ``BaseWindowedBolt.Duration``)."""

    seconds: float

    def problem(self, zero: bool = False) -> str | None:
        """What is wrong with it (None: nothing); ``zero``: 0 seconds will do."""
        if zero and self.seconds == 0 and not isinstance(self.seconds, bool):
            return None
        problem = tick_problem(self.seconds)
        if problem is not None or self.seconds is None:
            return f"Duration's seconds {problem or 'must not be None'}"
        return None


@dataclass(frozen=True)
class TupleWindow:
    """What ``process_window`` gets (Storm's ``TupleWindow``: ``get()``, ``getNew()``,
    ``getExpired()``, ``getEndTimestamp()``, ``getStartTimestamp()``)."""

    #: The tuples in the window, oldest first.
    tuples: list[Tuple]
    #: Those that came since the last window.
    new: list[Tuple]
    #: Those evicted since the last window (already acked).
    expired: list[Tuple]
    #: When the window fired (``time.time()``), or in event time the end of its span.
    end: float
    #: A Duration window's ``end`` less its length; None for a Count window (Storm's).
    start: float | None = None


class WindowedBolt(BufferingBolt):
    """A bolt that processes windows of tuples (Storm's ``BaseWindowedBolt``)::

        class Average(WindowedBolt):
            window_length = Duration(30)      # the last 30 s of tuples,
            sliding_interval = Duration(10)   # every 10 s (None: tumbling windows)
            outputs = ["average"]

            def process_window(self, window):
                values = [t[0] for t in window.tuples]
                self.emit([sum(values) / len(values)])

    With ``timestamp_field`` the windows are in event time (see the module doc).  The
    settings may also be given per instance, as keyword arguments (``partial(Average,
    window_length=Duration(60))``), as Storm's ``withWindow``.  Implement
    ``process_window``; do not override ``process`` or ``process_tick``."""

    #: How much a window holds: a :class:`Count` of tuples or a :class:`Duration`.
    window_length: Count | Duration | None = None
    #: How often a window fires; None: when the last one is full (tumbling windows).
    sliding_interval: Count | Duration | None = None
    #: Event time: the input field holding each tuple's time, in seconds (``time.time()``'s
    #: unit); None: processing time (when the tuple came).
    timestamp_field: str | None = None
    #: Event time: how late a tuple may come, behind the newest of its stream (Storm's lag).
    lag: Duration = Duration(0)
    #: Event time: how often the watermark is computed (Storm's watermark interval).
    watermark_interval: Duration = Duration(1.0)
    #: Event time: the declared stream a late tuple's values go to; None: dropped (acked).
    late_tuple_stream: str | None = None

    _buffer: deque[tuple[float, Tuple]] | None = None  # (its time, the tuple)
    _new = 0  # processing time: tuples since the last window
    _expired: list[Tuple] | None = None  # evicted since the last window
    _newest: dict[tuple[str, str], float] | None = None  # event time: per input stream
    _watermark: float | None = None  # event time: no tuple older than this is taken
    _next_end: float | None = None  # event time: the end of the next window

    def __init__(
        self,
        *,
        window_length: Count | Duration | None = None,
        sliding_interval: Count | Duration | None = None,
        timestamp_field: str | None = None,
        lag: Duration | None = None,
        watermark_interval: Duration | None = None,
        late_tuple_stream: str | None = None,
    ) -> None:
        """Each setting given overrides the class attribute of its name for this instance,
        as Storm's ``withWindow``, ``withTumblingWindow`` (a length alone), ``withTimestampField``,
        ``withLag``, ``withWatermarkInterval`` and ``withLateTupleStream`` do: one class can
        serve several windows, e.g. ``partial(SumBolt, window_length=Count(30),
        sliding_interval=Count(10))``."""
        settings = {
            "window_length": window_length,
            "sliding_interval": sliding_interval,
            "timestamp_field": timestamp_field,
            "lag": lag,
            "watermark_interval": watermark_interval,
            "late_tuple_stream": late_tuple_stream,
        }
        for name, value in settings.items():
            if value is not None:
                setattr(self, name, value)

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
        return (
            bool(self._buffer)
            and isinstance(self.window_length, Duration)
            and self.timestamp_field is None
        )

    def resolve_tick_secs(self, declared: float | None, config: Config) -> float | None:
        length, interval = self.window_length, self.sliding_interval
        event_time = self.timestamp_field is not None
        settings = [("window_length", length), ("sliding_interval", interval)]
        if event_time:
            settings += [("lag", self.lag), ("watermark_interval", self.watermark_interval)]
        for name, value in settings:
            if value is None and name == "sliding_interval":
                continue
            times = name in ("lag", "watermark_interval")
            if not isinstance(value, Duration if times else Count | Duration):
                kind = "a Duration" if times else "a Count or a Duration"
                raise ValueError(f"{name} must be {kind}, not {value!r}")
            problem = value.problem(zero=name == "lag")
            if problem is not None:
                raise ValueError(f"{name}: {problem}")
        if event_time and interval is not None and type(interval) is not type(length):
            raise ValueError(
                "in event time window_length and sliding_interval must be both Durations or "
                f"both Counts, not {length!r} and {interval!r}"
            )
        late = self.late_tuple_stream
        if event_time and late is not None and late not in declared_streams(self.outputs):
            raise ValueError(f"late_tuple_stream {late!r} is not among its declared outputs")
        if declared is not None:
            raise ValueError(
                "a WindowedBolt's windows set its tick tuples: drop tick_tuple_freq_secs"
            )
        interval = interval or length
        waits = [length, interval] + ([self.lag, self.watermark_interval] if event_time else [])
        span = sum(v.seconds for v in waits if isinstance(v, Duration))
        if config.num_ackers != 0 and span > config.message_timeout_secs:
            raise ValueError(
                f"its tuples can wait {span:g} s in its windows (window length plus sliding "
                f"interval{', lag and watermark interval' if event_time else ''}), more than "
                f"message_timeout_secs ({config.message_timeout_secs:g} s): they would time "
                "out while a window holds them; raise message_timeout_secs"
            )
        counts = [v.n for v in (length, self.sliding_interval) if isinstance(v, Count)]
        pending = config.max_spout_pending
        if config.num_ackers != 0 and pending is not None and sum(counts) > pending:
            raise ValueError(
                f"its windows hold up to {sum(counts)} tuples (window length plus sliding "
                f"interval, in tuples), more than max_spout_pending ({pending}): the spouts "
                "would stop emitting before a window could fire and let its tuples go, and the "
                "windows would stall; raise max_spout_pending, or make it None"
            )
        if event_time:
            return self.watermark_interval.seconds
        if isinstance(interval, Duration):
            return interval.seconds
        if isinstance(length, Duration):
            return length.seconds
        return config.tick_tuple_freq_secs

    def process(self, tup: Tuple) -> None:
        buffer = self._buffer
        if buffer is None:
            buffer = self._buffer = deque()
        if self.timestamp_field is not None:
            self._take(buffer, tup)
            return
        buffer.append((time.monotonic(), tup))
        self._new += 1
        interval = self._interval
        if isinstance(interval, Count) and self._new >= interval.n:
            self._fire()

    def process_tick(self, tup: Tuple) -> None:
        if self.timestamp_field is not None:
            self._advance()
        elif isinstance(self._interval, Duration):
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
        """Processing time: the window now."""
        buffer = self._buffer
        if buffer is None:
            buffer = self._buffer = deque()
        if self.sliding_interval is not None:  # (tumbling: all since the last window)
            self._evict(time.monotonic())
        if not buffer:
            return  # (as Storm's: an empty window is not processed)
        tuples = [tup for _, tup in buffer]
        new = tuples[len(tuples) - min(self._new, len(tuples)) :]
        self._new = 0
        self._process(buffer, tuples, new, time.time())
        if self.sliding_interval is None:  # tumbling: no later window holds them
            buffer.clear()
            for tup in tuples:
                self._expire(tup)

    def _process(
        self, buffer: deque[tuple[float, Tuple]], tuples: list[Tuple], new: list[Tuple], end: float
    ) -> None:
        """``process_window`` on ``tuples``, anchoring what it emits to them; if it raises,
        they are failed and dropped from ``buffer``."""
        length = self.window_length
        start = end - length.seconds if isinstance(length, Duration) else None
        window = TupleWindow(tuples, new, self._expired or [], end, start)
        self._expired = None
        self._anchors = tuples
        try:
            self.process_window(window)
        except Exception:
            _remove(buffer, tuples)
            if self.auto_fail:
                for tup in tuples:
                    self.fail(tup)
            raise
        finally:
            self._anchors = None

    # -- checkpoints -------------------------------------------------------------------------

    def windows_snapshot(self) -> list[Any]:
        """What a checkpoint keeps of the windows (``stateful.py``): each tuple kept, with its
        time (event time) or its age (processing time: another process has another clock),
        and the watermark's bookkeeping."""
        now = time.monotonic()
        event_time = self.timestamp_field is not None
        kept = [
            [t if event_time else now - t, list(tup.values), tup.component, tup.stream, tup.task]
            for t, tup in self._buffer or ()
        ]
        newest = [[c, s, ts] for (c, s), ts in (self._newest or {}).items()]
        return [kept, self._new, newest, self._watermark, self._next_end]

    def restore_windows(self, snapshot: list[Any], fields: Callable[[str, str], Fields]) -> None:
        """Take the windows back from a :meth:`windows_snapshot`; ``fields(component,
        stream)`` gives an input stream's fields."""
        kept, self._new, newest, self._watermark, self._next_end = snapshot
        now = time.monotonic()
        event_time = self.timestamp_field is not None
        self._buffer = deque(
            (t if event_time else now - t, Tuple(tuple(values), c, s, task, fields(c, s)))
            for t, values, c, s, task in kept
        )
        self._newest = {(c, s): ts for c, s, ts in newest} or None

    # -- event time --------------------------------------------------------------------------

    def _take(self, buffer: deque[tuple[float, Tuple]], tup: Tuple) -> None:
        """Keep ``tup`` by its timestamp, or pass it on as late."""
        ts = tup[self.timestamp_field]  # type: ignore[index]  # (event time: it is set)
        if isinstance(ts, bool) or not isinstance(ts, int | float):
            raise TypeError(
                f"{type(self).__name__}: field {self.timestamp_field!r} of {tup!r} is "
                f"{ts!r}, not a time in seconds"
            )
        newest = self._newest
        if newest is None:
            newest = self._newest = {}
        source = (tup.component, tup.stream)
        if ts > newest.get(source, float("-inf")):
            newest[source] = ts
        if self._watermark is not None and ts <= self._watermark:
            if self.late_tuple_stream is not None:
                self.emit(list(tup.values), [tup], self.late_tuple_stream)
            if self.auto_ack:
                self.ack(tup)
            return
        buffer.append((ts, tup))

    def _advance(self) -> None:
        """Move the watermark -- the oldest of each input stream's newest time, less the lag,
        once every input stream sent -- and fire every window that ends at or before it."""
        newest = self._newest
        sources = self._collector.context.sources
        if not newest or any(source not in newest for source in sources):
            return
        watermark = min(newest.values()) - self.lag.seconds
        if self._watermark is not None and watermark <= self._watermark:
            return
        self._watermark = watermark
        buffer = self._buffer
        assert buffer is not None
        if isinstance(self.window_length, Count):
            self._fire_counts(buffer, watermark, self.window_length.n)
            return
        assert isinstance(self.window_length, Duration)
        length = self.window_length.seconds
        interval = self._interval.seconds  # type: ignore[union-attr]  # (a Duration)
        while buffer:
            earliest = min(ts for ts, _ in buffer)
            end = self._next_end
            if end is None or end + length <= earliest:  # (skip windows that hold nothing)
                end = (earliest // interval + 1) * interval
            if end > watermark:
                self._next_end = end
                return
            self._next_end = end + interval
            self._fire_at(buffer, end, length, interval)

    def _fire_at(
        self, buffer: deque[tuple[float, Tuple]], end: float, length: float, interval: float
    ) -> None:
        """Event time: the window (end - length, end], then evict what no later one holds."""
        start = end - length
        inside = sorted(((ts, tup) for ts, tup in buffer if start < ts <= end), key=_time)
        if inside:
            tuples = [tup for _, tup in inside]
            new = [tup for ts, tup in inside if ts > end - interval]
            self._process(buffer, tuples, new, end)
        horizon = end + interval - length  # the next window starts after it
        kept = [item for item in buffer if item[0] > horizon]
        for _, tup in sorted((item for item in buffer if item[0] <= horizon), key=_time):
            self._expire(tup)
        buffer.clear()
        buffer.extend(kept)


    def _fire_counts(
        self, buffer: deque[tuple[float, Tuple]], watermark: float, length: int
    ) -> None:
        """Event time, Count windows (Storm's watermark count policies): every
        ``sliding_interval``-th tuple in time order up to the watermark, counted on from the
        last window's, fires a window of the last ``length`` tuples up to its time, those
        before them evicted first (a tumbling window's all evicted once processed)."""
        interval = self._interval
        assert isinstance(interval, Count)
        last = self._next_end  # the time of the last window's tuple
        ready = sorted(
            (item for item in buffer if item[0] <= watermark and (last is None or item[0] > last)),
            key=_time,
        )
        for at in [ts for ts, _ in ready[interval.n - 1 :: interval.n]]:
            upto = sorted((item for item in buffer if item[0] <= at), key=_time)
            tumbling = self.sliding_interval is None
            evicted = [tup for _, tup in ([] if tumbling else upto[:-length])]
            _remove(buffer, evicted)
            for tup in evicted:
                self._expire(tup)
            inside = upto[len(evicted) :]
            new = [tup for ts, tup in inside if last is None or ts > last]
            tuples = [tup for _, tup in inside]
            self._process(buffer, tuples, new, at)
            self._next_end = last = at
            if tumbling:  # no later window holds them
                _remove(buffer, tuples)
                for tup in tuples:
                    self._expire(tup)


def _remove(buffer: deque[tuple[float, Tuple]], tuples: list[Tuple]) -> None:
    """Take ``tuples`` out of ``buffer``."""
    if tuples:
        gone = set(map(id, tuples))
        kept = [item for item in buffer if id(item[1]) not in gone]
        buffer.clear()
        buffer.extend(kept)


def _time(item: tuple[float, Tuple]) -> float:
    return item[0]


class StatefulWindowedBolt(WindowedBolt, StatefulBolt):
    """A windowed bolt with a state the topology checkpoints (Storm's
    ``BaseStatefulWindowedBolt``): ``init_state(state)`` as a :class:`StatefulBolt`'s,
    ``process_window(window)`` as a :class:`WindowedBolt`'s.  Each checkpoint keeps the state
    and the windows together, so after a rollback both are as they were at the last complete
    checkpoint, and the spouts replay what came after."""
