"""storm-starter's SlidingWindowTopology: Storm's windowed bolts on tuple counts.

    brokerless stream run storm_starter.sliding_window:topology --emitted tumblingavg

``slidingsum`` sums the values of the last 30 tuples every 10 tuples (a sliding window: it adds
the window's new tuples and takes off the expired ones); ``tumblingavg`` averages each 3 sums
(a tumbling window).  As Storm's ``new SlidingWindowSumBolt().withWindow(Count.of(30),
Count.of(10))`` sets the windows of one instance, ``partial(SlidingWindowSumBolt,
window_length=Count(30), sliding_interval=Count(10))`` makes bolts with those windows (a class
may also set ``window_length`` and ``sliding_interval`` as class attributes).
``process_window`` is Storm's ``execute(TupleWindow)``: ``window.tuples``, ``window.new`` and
``window.expired`` are its ``get()``, ``getNew()`` and ``getExpired()``.

A tuple is acked when it has left every window.  The last 30 tuples of a finite input never
leave ``slidingsum``'s window (no newer tuple comes), so they are acked only when they time
out: a run to completion ends ``message_timeout_secs`` after the last tuple, which this
topology sets to 5 s.
"""

from __future__ import annotations

from functools import partial

from brokerless.stream import (
    Config,
    Count,
    Topology,
    TupleWindow,
    WindowedBolt,
    complete_topology,
)

from .spouts import IntegerSpout


class SlidingWindowSumBolt(WindowedBolt):
    """The sum of each window's values, kept up to date from its new and expired tuples."""

    outputs = ["sum"]

    total = 0

    def process_window(self, window: TupleWindow) -> None:
        self.total += sum(tup[0] for tup in window.new)
        self.total -= sum(tup[0] for tup in window.expired)
        self.emit([self.total])


class TumblingWindowAvgBolt(WindowedBolt):
    outputs = ["avg"]

    def process_window(self, window: TupleWindow) -> None:
        values = [tup[0] for tup in window.tuples]
        self.emit([sum(values) // len(values)])


topology = (
    Topology("sliding-window", Config(message_timeout_secs=5))
    .spout("integer", IntegerSpout)
    .bolt("slidingsum", partial(SlidingWindowSumBolt, window_length=Count(30),
                                sliding_interval=Count(10)), inputs=["integer"])
    # a length and no sliding interval: tumbling windows (Storm's withTumblingWindow)
    .bolt("tumblingavg", partial(TumblingWindowAvgBolt, window_length=Count(3)),
          inputs=["slidingsum"])
)

if __name__ == "__main__":
    result = complete_topology(topology)
    print("sums:", result.emitted("slidingsum"))
    print("averages:", result.emitted("tumblingavg"))
