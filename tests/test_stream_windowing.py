"""Storm's windowed bolts (``WindowedBolt``): sliding and tumbling windows by count and by
time, their tuples acked as they leave every window, what a window emits anchored to all of
them, and the settings Storm refuses refused when the topology is built."""

from __future__ import annotations

import itertools
import threading
import time
from functools import partial
from typing import Any, ClassVar

import pytest

from brokerless.stream import (
    Config,
    Count,
    Duration,
    SequenceSpout,
    Spout,
    StatefulBolt,
    StatefulWindowedBolt,
    Stream,
    Topology,
    TopologyError,
    TupleWindow,
    WindowedBolt,
    complete_topology,
    read_state,
    run_local,
    shuffle,
)

from .stream_topologies import FailAll, Source, ValueSpout, Windows, wait_for

pytestmark = pytest.mark.timeout(60)


def windowed(bolt: Any, values: Any, **config: Any) -> Topology:
    return (
        Topology("windows", Config(**config))
        .spout("values", partial(ValueSpout, values, replay=False))
        .bolt("window", bolt, inputs={"values": shuffle()})
    )


def failed_and_acked(result: Any) -> tuple[list[int], list[int]]:
    failed = sorted(m for (m,) in result.emitted("values", "failed"))
    acked = sorted(m for m, _ in result.emitted("values", "acked"))
    return failed, acked


class Sliding(Windows):
    window_length = Count(5)
    sliding_interval = Count(2)


def test_a_sliding_count_window_holds_the_last_tuples_and_acks_those_it_evicts():
    """Storm's rules: every two tuples a window of the last five; a tuple is acked when it
    leaves the window, so the last five of a finite input are failed by their timeout."""
    result = complete_topology(windowed(Sliding, range(12), message_timeout_secs=1.0))
    assert result.emitted("window") == [
        [[0, 1], [0, 1], []],
        [[0, 1, 2, 3], [2, 3], []],
        [[1, 2, 3, 4, 5], [4, 5], [0]],
        [[3, 4, 5, 6, 7], [6, 7], [1, 2]],
        [[5, 6, 7, 8, 9], [8, 9], [3, 4]],
        [[7, 8, 9, 10, 11], [10, 11], [5, 6]],
    ]
    assert failed_and_acked(result) == (list(range(7, 12)), list(range(7)))


class Tumbling(Windows):
    window_length = Count(3)


def test_a_tumbling_count_window_acks_its_tuples_once_processed():
    result = complete_topology(windowed(Tumbling, range(9)))
    assert result.emitted("window") == [
        [[0, 1, 2], [0, 1, 2], []],
        [[3, 4, 5], [3, 4, 5], [0, 1, 2]],
        [[6, 7, 8], [6, 7, 8], [3, 4, 5]],
    ]
    assert failed_and_acked(result) == ([], list(range(9)))


def test_count_windows_that_max_spout_pending_would_stall_are_refused():
    """Storm refuses a window count (length + sliding interval) over
    ``topology.max.spout.pending``: a tuple is acked only when it leaves the window, so the
    spouts stop emitting before the window can fire and evict, and nothing moves but the
    timeouts.  brokerless took it: Count(5) sliding by 2 over 12 tuples under
    max_spout_pending=6 acked 2 of them, the 10 others failed by their timeouts, which alone
    moved the window on (a replaying spout would replay them for ever)."""
    with pytest.raises(TopologyError, match=r"hold up to 7 tuples .* max_spout_pending \(6\)"):
        windowed(Sliding, range(12), max_spout_pending=6).build()
    with pytest.raises(TopologyError, match=r"hold up to 3 tuples .* max_spout_pending \(2\)"):
        windowed(Tumbling, range(9), max_spout_pending=2).build()
    windowed(Sliding, range(12), max_spout_pending=6, num_ackers=0).build()  # nothing pending
    windowed(Sliding, range(12), max_spout_pending=None).build()
    # as many as the window holds will do: every window fires, the tuples it evicts are acked
    result = complete_topology(
        windowed(Sliding, range(12), max_spout_pending=7, message_timeout_secs=1.0)
    )
    assert len(result.emitted("window")) == 6
    assert failed_and_acked(result) == (list(range(7, 12)), list(range(7)))


def test_one_bolt_class_takes_its_windows_per_instance_as_storm_s_with_window():
    """Storm sets a bolt's windows on the instance (``new SumBolt().withWindow(Count.of(5),
    Count.of(2))``, ``.withTumblingWindow(...)``, ``.withTimestampField("ts")``), so one
    class serves several windows (storm-starter's SlidingWindowSumBolt does).  Here the
    settings are keyword arguments of the bolt, over its class attributes; brokerless's
    WindowedBolt took none (TypeError), so each window needed a subclass."""
    sliding = partial(Windows, window_length=Count(5), sliding_interval=Count(2))
    tumbling = partial(Windows, window_length=Count(3))
    topology = windowed(sliding, range(12), message_timeout_secs=1.0).bolt(
        "tumbling", tumbling, inputs=["values"]
    )
    result = complete_topology(topology)
    assert result.emitted("window") == complete_topology(
        windowed(Sliding, range(12), message_timeout_secs=1.0)
    ).emitted("window")
    assert [new for _, new, _ in result.emitted("tumbling")] == [[0, 1, 2], [3, 4, 5], [6, 7, 8],
                                                                 [9, 10, 11]]
    with pytest.raises(TopologyError, match="window_length must be a Count or a Duration"):
        windowed(partial(Windows, sliding_interval=Count(2)), [1]).build()
    late = partial(Windows, window_length=Duration(1), timestamp_field="ts", lag=Duration(1),
                   late_tuple_stream="late")
    with pytest.raises(TopologyError, match="late_tuple_stream 'late' is not among"):
        windowed(late, [1]).build()


class SlidingTime(Windows):
    window_length = Duration(1.0)
    sliding_interval = Duration(0.1)


class TumblingTime(Windows):
    window_length = Duration(0.1)


@pytest.mark.parametrize("ackers", [None, 0])
@pytest.mark.parametrize("bolt", [SlidingTime, TumblingTime])
def test_time_windows_see_every_tuple_new_once_and_a_run_ends_when_all_left(bolt, ackers):
    """Each tuple is new in exactly one window; tumbling windows are disjoint; every tuple
    is acked once it left its windows, and the run to completion waited for that (without
    acking too: then only the bolt knows it still holds tuples)."""
    values = range(2000)
    result = complete_topology(windowed(bolt, values, num_ackers=ackers))
    windows = result.emitted("window")
    assert sorted(itertools.chain.from_iterable(new for _, new, _ in windows)) == list(values)
    if bolt is TumblingTime:
        assert sorted(itertools.chain.from_iterable(w for w, _, _ in windows)) == list(values)
    else:
        assert any(len(w) > len(new) for w, new, _ in windows)  # windows overlap
    assert failed_and_acked(result) == ([], list(values))


class Bounds(WindowedBolt):
    """Emits each window's ``[start, end]``."""

    outputs = ["start", "end"]

    def process_window(self, window: TupleWindow) -> None:
        self.emit([window.start, window.end])


class CountBounds(Bounds):
    window_length = Count(2)


class TimeBounds(Bounds):
    window_length = Duration(0.5)
    sliding_interval = Duration(0.1)


class EventBounds(Bounds):
    window_length = Duration(10)
    sliding_interval = Duration(5)
    timestamp_field = "ts"
    watermark_interval = Duration(0.02)


def test_a_window_has_its_start_and_end_as_storm_s_tuple_window():
    """Storm's ``TupleWindow.getStartTimestamp()``: a time window's end less its length (a
    count window has none), beside ``getEndTimestamp()``.  brokerless's window had no start."""
    result = complete_topology(windowed(CountBounds, range(4)))
    assert [start for start, _ in result.emitted("window")] == [None, None]
    result = complete_topology(windowed(TimeBounds, range(10)))
    assert result.emitted("window")
    for start, end in result.emitted("window"):
        assert end - start == pytest.approx(0.5)
    topology = (
        Topology("event-bounds")
        .spout("values", partial(Phased, [1, 7, 12, 26], [], threading.Event()))
        .bolt("window", EventBounds, inputs={"values": shuffle()})
    )
    with run_local(topology, capture=True) as run:
        wait_for(lambda: len(captured(run, "window")) == 4, what="four windows")
    assert captured(run, "window") == [[-5, 5], [0, 10], [5, 15], [10, 20]]


class RaiseOnThree(Tumbling):
    def process_window(self, window: Any) -> None:
        if any(t[0] == 3 for t in window.tuples):
            raise ValueError("no threes")
        super().process_window(window)


def test_a_window_whose_processing_raised_fails_its_tuples():
    result = complete_topology(windowed(RaiseOnThree, range(9)))
    assert failed_and_acked(result) == ([3, 4, 5], [0, 1, 2, 6, 7, 8])
    assert [e.error for e in result.errors] == ["ValueError('no threes')"]


def test_what_a_window_emits_is_anchored_to_every_tuple_of_the_window():
    topology = windowed(Tumbling, range(9)).bolt("fail", FailAll, inputs={"window": shuffle()})
    assert failed_and_acked(complete_topology(topology)) == (list(range(9)), [])


class NoLength(Windows):
    pass


class ZeroCount(Windows):
    window_length = Count(0)


class Long(Windows):
    window_length = Duration(20)
    sliding_interval = Duration(15)


def test_windows_storm_refuses_are_refused_when_the_topology_is_built():
    with pytest.raises(TopologyError, match="window_length must be a Count or a Duration"):
        windowed(NoLength, [1]).build()
    with pytest.raises(TopologyError, match=r"window_length: Count takes an integer >= 1"):
        windowed(ZeroCount, [1]).build()
    with pytest.raises(
        TopologyError, match=r"can wait 35 s in its windows .* more than message_timeout_secs"
    ):
        windowed(Long, [1]).build()
    windowed(Long, [1], message_timeout_secs=40).build()
    windowed(Long, [1], num_ackers=0).build()  # no acking: no timeout to outlast
    with pytest.raises(TopologyError, match="drop tick_tuple_freq_secs"):
        windowed(Tumbling, [1]).bolt(
            "again", Tumbling, inputs=["values"], tick_tuple_freq_secs=1
        ).build()
    plan = windowed(SlidingTime, [1]).bolt("t", TumblingTime, inputs=["values"]).build()
    assert (plan.components["window"].tick_secs, plan.components["t"].tick_secs) == (0.1, 0.1)


class SumWindow(WindowedBolt):
    """Sums each tumbling window of ten values."""

    window_length = Count(10)
    outputs = ["key", "sum"]

    def process_window(self, window: Any) -> None:
        self.emit(["total", sum(t[0] for t in window.tuples)])


class Totals(StatefulBolt):
    def init_state(self, state: Any) -> None:
        self.state = state

    def process(self, tup: Any) -> None:
        self.state["total"] = self.state.get("total", 0) + tup[1]
        self.state["windows"] = self.state.get("windows", 0) + 1


class Paused(SequenceSpout):
    """A SequenceSpout whose tasks stop at position 751 until ``go`` is set, setting
    ``paused`` (local mode: the events are the test's)."""

    def __init__(self, values: Any, paused: threading.Event, go: threading.Event) -> None:
        super().__init__(values, ["value"])
        self.paused, self.go = paused, go

    def next_tuple(self) -> None:
        if self.position() >= 751 and not self.go.is_set():
            self.paused.set()
            return
        super().next_tuple()


VALUES = list(range(3000))


def state_after_a_lost_worker(name: str, bolts: Any, stateful: str) -> dict[Any, Any]:
    """Run a checkpointed topology of VALUES (two spout tasks that pause at 2 x 751 values,
    so the checkpoints taken then hold a window with 2 of its 10) through ``bolts(topology)``,
    lose a worker once two checkpoints completed during the pause, run on to the end; the
    final state of the bolt ``stateful``."""
    paused, go = threading.Event(), threading.Event()
    topology = Topology(name, Config(num_workers=2, checkpoint_interval_secs=0.05)).spout(
        "values", partial(Paused, [[v] for v in VALUES], paused, go), parallelism=2
    )
    with run_local(bolts(topology)) as run:
        assert paused.wait(30)
        first = run.checkpoint_statistics().completed
        wait_for(lambda: run.checkpoint_statistics().completed >= first + 2, what="checkpoints")
        run.kill_worker(0)
        go.set()
        run.wait_until_done(30)
        run.checkpoint()
        (state,) = read_state(run.checkpoint_dir, stateful).values()
        assert len(run.restarts) == 1
    return dict(state)


def test_windows_are_in_each_checkpoint_so_a_rollback_loses_no_tuple_they_held():
    """A windowed bolt in a checkpointed topology: its windows are snapshotted with each
    checkpoint and taken back at a rollback (the spouts replay what came after), so the
    state downstream is exact after a worker is lost.  Before, a checkpointed topology
    refused windowed bolts."""
    state = state_after_a_lost_worker(
        "windowed-totals",
        lambda topology: topology.bolt("window", SumWindow, inputs={"values": shuffle()}).bolt(
            "totals", Totals, inputs={"window": shuffle()}
        ),
        "totals",
    )
    assert state == {"total": sum(VALUES), "windows": 300}


class WindowTotals(StatefulWindowedBolt):
    """Sums each tumbling window of ten values into its own state."""

    window_length = Count(10)

    def init_state(self, state: Any) -> None:
        self.state = state

    def process_window(self, window: Any) -> None:
        self.state["total"] = self.state.get("total", 0) + sum(t[0] for t in window.tuples)
        self.state["windows"] = self.state.get("windows", 0) + 1


def test_a_stateful_windowed_bolt_keeps_its_state_and_its_windows_in_each_checkpoint():
    """Storm's stateful windowing: one bolt with windows and a state.  Its checkpoints hold
    both, so after a lost worker the state is exact: a rollback restoring the state without
    the windows would lose the tuples they held.  Before, such a bolt was refused."""
    state = state_after_a_lost_worker(
        "stateful-windows",
        lambda topology: topology.bolt("window", WindowTotals, inputs={"values": shuffle()}),
        "window",
    )
    assert state == {"total": sum(VALUES), "windows": 300}


# -- event time ---------------------------------------------------------------------------------


class Phased(Spout):
    """Emits ``[value, ts]`` for each timestamp of ``first`` (msg_id: the timestamp), then,
    once ``go`` is set, those of ``then``; records the msg_ids acked in ``acked``."""

    outputs = ["value", "ts"]

    def __init__(
        self, first: list[float], then: list[float], go: threading.Event, acked: Any = None
    ) -> None:
        self.todo = [*first]
        self.then, self.go, self.acked = then, go, acked

    def ack(self, msg_id: Any) -> None:
        if self.acked is not None:
            self.acked.append(msg_id)

    def next_tuple(self) -> None:
        if not self.todo and self.then and self.go.is_set():
            self.todo, self.then = self.then, []
        if self.todo:
            ts = self.todo.pop(0)
            self.emit([f"v{ts}", ts], msg_id=ts)


class EventWindows(Windows):
    window_length = Duration(10)
    timestamp_field = "ts"
    lag = Duration(5)
    watermark_interval = Duration(0.02)
    late_tuple_stream = "late"
    outputs = [Stream(["values", "new", "expired"]), Stream(["value", "ts"], name="late")]


def captured(run: Any, component: str, stream: str = "default") -> list[list[Any]]:
    return [list(v) for c, s, v in run.captured() if (c, s) == (component, stream)]


def test_event_time_windows_fire_as_the_watermark_passes_and_late_tuples_go_aside():
    """Storm's event time: windows of the tuples' own times, aligned on the interval, fired
    when the watermark (the newest time less the lag) passes their end, with the tuples in
    time order; one behind the watermark is late (to the late stream, acked)."""
    go, acked = threading.Event(), []
    topology = (
        Topology("event-time")
        .spout("values", partial(Phased, [1, 5, 3, 12, 11, 25], [2, 60], go, acked))
        .bolt("window", EventWindows, inputs={"values": shuffle()})
    )
    with run_local(topology, capture=True) as run:
        wait_for(lambda: len(captured(run, "window")) == 2, what="two windows")
        go.set()
        wait_for(lambda: len(captured(run, "window")) == 3, what="the third window")
        wait_for(lambda: captured(run, "window", "late"), what="the late tuple")
        wait_for(lambda: len(acked) == 7, what="the acks")
        windows = captured(run, "window")
        late = captured(run, "window", "late")
    assert windows == [
        [["v1", "v3", "v5"], ["v1", "v3", "v5"], []],  # (0, 10]: the watermark is 25 - 5
        [["v11", "v12"], ["v11", "v12"], ["v1", "v3", "v5"]],  # (10, 20]
        [["v25"], ["v25"], ["v11", "v12"]],  # (20, 30], once 60 - 5 passed it; then none
    ]
    assert late == [["v2", 2]]
    assert sorted(acked) == [1, 2, 3, 5, 11, 12, 25]  # evicted or late; 60 waits for a window


class SlowSource(Windows):
    """Counts its ticks (local mode)."""

    window_length = Duration(10)
    timestamp_field = "ts"
    watermark_interval = Duration(0.02)
    ticks: ClassVar[list[float]] = []

    def process_tick(self, tup: Any) -> None:
        self.ticks.append(time.monotonic())
        super().process_tick(tup)


def test_the_watermark_waits_for_every_input_stream():
    go = threading.Event()
    SlowSource.ticks.clear()
    topology = (
        Topology("two-streams")
        .spout("fast", partial(Phased, [1, 15, 30], [], go))
        .spout("slow", partial(Phased, [], [31], go))
        .bolt("window", SlowSource, inputs=["fast", "slow"])
    )
    with run_local(topology, capture=True) as run:
        wait_for(lambda: len(SlowSource.ticks) >= 10, what="ten ticks")
        assert captured(run, "window") == []  # "slow" sent nothing: no watermark
        go.set()
        wait_for(lambda: len(captured(run, "window")) == 3, what="three windows")
    assert captured(run, "window") == [  # the watermark: min(30, 31)
        [["v1"], ["v1"], []],
        [["v15"], ["v15"], ["v1"]],
        [["v30"], ["v30"], ["v15"]],
    ]


class EventCounts(Windows):
    window_length = Count(4)
    sliding_interval = Count(2)
    timestamp_field = "ts"
    lag = Duration(100)
    watermark_interval = Duration(0.02)


class EventCountsTumbling(EventCounts):
    window_length = Count(3)
    sliding_interval = None


def test_event_time_count_windows_fire_in_time_order_as_the_watermark_passes():
    """Storm's watermark count windows (a Count with a timestamp field): every interval-th
    tuple in time order, once the watermark passes it, fires a window of the last
    ``window_length`` tuples up to it.  brokerless refused them: event time took Durations
    only."""
    go = threading.Event()
    topology = (
        Topology("event-counts", Config(message_timeout_secs=300))
        .spout("values", partial(Phased, [3, 1, 2, 5, 4, 6, 7, 9, 8, 10, 20], [1000], go))
        .bolt("sliding", EventCounts, inputs=["values"])
        .bolt("tumbling", EventCountsTumbling, inputs=["values"])
    )
    with run_local(topology, capture=True) as run:
        wait_for(lambda: len(captured(run, "values")) == 11, what="the first tuples")
        go.set()  # ts 1000: the watermark moves to 900, past all but itself
        wait_for(lambda: len(captured(run, "sliding")) == 5, what="five windows")
        wait_for(lambda: len(captured(run, "tumbling")) == 3, what="three windows")

    def v(*ts: int) -> list[str]:
        return [f"v{t}" for t in ts]

    assert captured(run, "sliding") == [
        [v(1, 2), v(1, 2), []],
        [v(1, 2, 3, 4), v(3, 4), []],
        [v(3, 4, 5, 6), v(5, 6), v(1, 2)],
        [v(5, 6, 7, 8), v(7, 8), v(3, 4)],
        [v(7, 8, 9, 10), v(9, 10), v(5, 6)],
    ]
    assert captured(run, "tumbling") == [
        [v(1, 2, 3), v(1, 2, 3), []],
        [v(4, 5, 6), v(4, 5, 6), v(1, 2, 3)],
        [v(7, 8, 9), v(7, 8, 9), v(4, 5, 6)],
    ]


class CountAndDurationInEventTime(Windows):
    window_length = Count(10)
    sliding_interval = Duration(1)
    timestamp_field = "ts"


class UndeclaredLate(EventWindows):
    outputs = ["values", "new", "expired"]


class NegativeLag(EventWindows):
    lag = Duration(-1)


def test_event_time_settings_are_checked_when_the_topology_is_built():
    def build(bolt: Any, **config: Any) -> None:
        Topology("t", Config(**config)).spout("s", Source).bolt("w", bolt, inputs=["s"]).build()

    with pytest.raises(TopologyError, match=r"both Durations or both Counts, not Count\(n=10\)"):
        build(CountAndDurationInEventTime)
    with pytest.raises(TopologyError, match="late_tuple_stream 'late' is not among its declared"):
        build(UndeclaredLate)
    with pytest.raises(TopologyError, match="lag: Duration's seconds must be None or a number"):
        build(NegativeLag)
    with pytest.raises(TopologyError, match=r"wait 25\.02 s .*lag and watermark interval"):
        build(EventWindows, message_timeout_secs=20)
