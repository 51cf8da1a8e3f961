"""storm-starter's RollingTopWords: the top words of a sliding window, kept up to date.

    brokerless stream run storm_starter.rolling_top_words:topology --local --duration 12 \
        --emitted finalRanker

``counter`` (:class:`RollingCountBolt`, fields grouping on the word) counts each word in a
sliding window of ``window_secs`` made of slots; every ``emit_secs`` -- its tick tuples -- it
emits each word's count over the window and moves on a slot.  ``intermediateRanker`` tasks
(fields grouping on the word) rank the words they see and ``finalRanker`` (global grouping: one
task) merges their rankings; both emit their top ``top_n`` on their own ticks.

``skewed`` is storm-starter's SkewedRollingTopWords: the counters take the words by partial
key grouping and an ``aggregator`` sums each word's counts.

As Storm's ``getComponentConfiguration``, each bolt sets its own tick frequency
(``tick_tuple_freq_secs``, here from its constructor's arguments); a tick comes to
``process_tick`` rather than to ``execute`` with ``TupleUtils.isTick``.  A ranking is emitted
as a list of ``[word, count]`` pairs (Storm's ``Rankings`` object goes through Kryo; the default
serializer here is msgpack, which takes lists, dicts, strings and numbers).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from functools import partial
from typing import Any

from brokerless.stream import (
    Bolt,
    Config,
    Topology,
    TopologyContext,
    Tuple,
    fields,
    global_,
    partial_key,
    run_local,
)

from .spouts import NAMES, WordSpout

log = logging.getLogger(__name__)


class SlidingWindowCounter:
    """Counts of objects over the last ``slots`` slots (Storm's ``SlidingWindowCounter``):
    ``increment`` counts in the current slot; ``counts_then_advance`` gives the totals over
    all slots (objects whose total is 0 once, then forgets them) and wipes the oldest slot,
    which becomes the current one."""

    def __init__(self, slots: int) -> None:
        if slots < 2:
            raise ValueError(f"a sliding window counter needs at least 2 slots, not {slots}")
        self.slots = slots
        self.counts: dict[Any, list[int]] = {}
        self.head = 0

    def increment(self, obj: Any) -> None:
        self.counts.setdefault(obj, [0] * self.slots)[self.head] += 1

    def counts_then_advance(self) -> dict[Any, int]:
        totals = {obj: sum(slots) for obj, slots in self.counts.items()}
        for obj, total in totals.items():
            if total == 0:
                del self.counts[obj]
        self.head = (self.head + 1) % self.slots
        for slots in self.counts.values():
            slots[self.head] = 0
        return totals


class RollingCountBolt(Bolt):
    """Counts words over a sliding window of ``window_secs``, emitting ``[obj, count,
    actualWindowLengthInSeconds]`` for each word every ``emit_secs``."""

    outputs = ["obj", "count", "actualWindowLengthInSeconds"]

    def __init__(self, window_secs: float = 300, emit_secs: float = 60) -> None:
        self.window_secs = window_secs
        self.tick_tuple_freq_secs = emit_secs
        self.slots = round(window_secs / emit_secs)

    def prepare(self, conf: Config, context: TopologyContext) -> None:
        self.counter = SlidingWindowCounter(self.slots)
        self.ticks = deque([time.monotonic()], maxlen=self.slots + 1)  # NthLastModifiedTimeTracker

    def process(self, tup: Tuple) -> None:
        self.counter.increment(tup[0])

    def process_tick(self, tup: Tuple) -> None:
        counts = self.counter.counts_then_advance()
        self.ticks.append(time.monotonic())
        actual = round(self.ticks[-1] - self.ticks[0])
        if actual != round(self.window_secs):
            log.debug("actual window length is %d s, not %g s (as expected while starting)",
                      actual, self.window_secs)
        for obj, count in counts.items():
            self.emit([obj, count, actual])


class RollingCountAggBolt(Bolt):
    """Sums the rolling counts of each word that several counter tasks emit (a word's
    occurrences are split over two of them by partial key grouping), emitting ``[obj,
    count]``: each counter task's latest count of the word, summed."""

    outputs = ["obj", "count"]

    def prepare(self, conf: Config, context: TopologyContext) -> None:
        self.counts: dict[Any, dict[int | None, int]] = {}

    def process(self, tup: Tuple) -> None:
        obj = tup["obj"]
        by_task = self.counts.setdefault(obj, {})
        by_task[tup.task] = tup["count"]
        self.emit([obj, sum(by_task.values())])


class RankerBolt(Bolt):
    """Storm's ``AbstractRankerBolt``: keeps the top ``top_n`` objects by count and emits them
    as ``[[obj, count], ...]``, highest first, every ``emit_secs``."""

    outputs = ["rankings"]

    def __init__(self, top_n: int = 10, emit_secs: float = 2) -> None:
        if top_n < 1:
            raise ValueError(f"top_n must be >= 1, not {top_n}")
        self.top_n = top_n
        self.tick_tuple_freq_secs = emit_secs

    def prepare(self, conf: Config, context: TopologyContext) -> None:
        self.rankings: dict[Any, int] = {}

    def update(self, obj: Any, count: int) -> None:
        self.rankings[obj] = count
        if len(self.rankings) > self.top_n:
            del self.rankings[min(self.rankings, key=self.rankings.__getitem__)]

    def ranked(self) -> list[list[Any]]:
        return [[obj, count] for obj, count in
                sorted(self.rankings.items(), key=lambda item: (-item[1], item[0]))]

    def process_tick(self, tup: Tuple) -> None:
        self.emit([self.ranked()])


class IntermediateRankingsBolt(RankerBolt):
    def process(self, tup: Tuple) -> None:
        self.update(tup["obj"], tup["count"])


class TotalRankingsBolt(RankerBolt):
    def process(self, tup: Tuple) -> None:
        for obj, count in tup["rankings"]:
            self.update(obj, count)
        for obj in [obj for obj, count in self.rankings.items() if count == 0]:
            del self.rankings[obj]  # Rankings.pruneZeroCounts


def rolling_top_words(
    words: list[str] = NAMES * 20,
    *,
    top_n: int = 5,
    window_secs: float = 9,
    emit_secs: float = 3,
    rank_secs: float = 2,
) -> Topology:
    return (
        Topology("slidingWindowCounts")
        .spout("wordGenerator", partial(WordSpout, words), parallelism=5)
        .bolt("counter", partial(RollingCountBolt, window_secs, emit_secs), parallelism=4,
              inputs={"wordGenerator": fields("word")})
        .bolt("intermediateRanker", partial(IntermediateRankingsBolt, top_n, rank_secs),
              parallelism=4, inputs={"counter": fields("obj")})
        .bolt("finalRanker", partial(TotalRankingsBolt, top_n, rank_secs),
              inputs={"intermediateRanker": global_()})
    )


def skewed_rolling_top_words(
    words: list[str] = NAMES * 20,
    *,
    top_n: int = 5,
    window_secs: float = 9,
    emit_secs: float = 3,
    rank_secs: float = 2,
) -> Topology:
    """storm-starter's SkewedRollingTopWords: for words some of which are far more common
    than others, the counters take them by partial key grouping (each word over at most two
    counter tasks, the less loaded) and ``aggregator`` sums their counts."""
    return (
        Topology("skewedSlidingWindowCounts")
        .spout("wordGenerator", partial(WordSpout, words), parallelism=5)
        .bolt("counter", partial(RollingCountBolt, window_secs, emit_secs), parallelism=4,
              inputs={"wordGenerator": partial_key("word")})
        .bolt("aggregator", RollingCountAggBolt, parallelism=4, inputs={"counter": fields("obj")})
        .bolt("intermediateRanker", partial(IntermediateRankingsBolt, top_n, rank_secs),
              parallelism=4, inputs={"aggregator": fields("obj")})
        .bolt("finalRanker", partial(TotalRankingsBolt, top_n, rank_secs),
              inputs={"intermediateRanker": global_()})
    )


topology = rolling_top_words()
skewed = skewed_rolling_top_words()

if __name__ == "__main__":
    with run_local(topology, capture=True) as run:  # as Storm's LocalCluster: run a while
        time.sleep(10)
    for component, _, values in run.captured():
        if component == "finalRanker":
            print(values[0])  # [], then [['bertels', 20], ['golda', 20], ...]
