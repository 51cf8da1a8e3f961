"""Storm's windowed bolts (``WindowedBolt``): sliding and tumbling windows by count and by
time, their tuples acked as they leave every window, what a window emits anchored to all of
them, and the settings Storm refuses refused when the topology is built."""

from __future__ import annotations

import itertools
from functools import partial
from typing import Any

import pytest

from brokerless.stream import (
    Config,
    Count,
    Duration,
    SequenceSpout,
    StatefulBolt,
    Topology,
    TopologyError,
    WindowedBolt,
    complete_topology,
    shuffle,
)

from .stream_topologies import FailAll, ValueSpout

pytestmark = pytest.mark.timeout(60)


class Windows(WindowedBolt):
    """Emits each window as ``[values, new values, expired values]``."""

    outputs = ["values", "new", "expired"]

    def process_window(self, window: Any) -> None:
        self.emit(
            [
                [t[0] for t in window.tuples],
                [t[0] for t in window.new],
                [t[0] for t in window.expired],
            ]
        )


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


class Counting(StatefulBolt):
    def process(self, tup: Any) -> None:
        pass


def test_windows_storm_refuses_are_refused_when_the_topology_is_built():
    with pytest.raises(TopologyError, match="window_length must be a Count or a Duration"):
        windowed(NoLength, [1]).build()
    with pytest.raises(TopologyError, match=r"window_length: Count takes an integer >= 1"):
        windowed(ZeroCount, [1]).build()
    with pytest.raises(TopologyError, match=r"\(35 s\) is more than message_timeout_secs"):
        windowed(Long, [1]).build()
    windowed(Long, [1], message_timeout_secs=40).build()
    windowed(Long, [1], num_ackers=0).build()  # no acking: no timeout to outlast
    with pytest.raises(TopologyError, match="drop tick_tuple_freq_secs"):
        windowed(Tumbling, [1]).bolt(
            "again", Tumbling, inputs=["values"], tick_tuple_freq_secs=1
        ).build()
    plan = windowed(SlidingTime, [1]).bolt("t", TumblingTime, inputs=["values"]).build()
    assert (plan.components["window"].tick_secs, plan.components["t"].tick_secs) == (0.1, 0.1)
    checkpointed = (
        Topology("checkpointed")
        .spout("values", partial(SequenceSpout, [[1]]))
        .bolt("window", Tumbling, inputs=["values"])
        .bolt("state", Counting, inputs=["window"])
    )
    with pytest.raises(TopologyError, match="'window' is a WindowedBolt and it has stateful"):
        checkpointed.build()
