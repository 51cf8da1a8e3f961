"""storm-starter's SlidingTupleTsTopology: windows in event time, on a timestamp field.

    brokerless stream run storm_starter.sliding_tuple_ts:topology --local --duration 5 \\
        --emitted slidingsum

``slidingsum`` sums the values of the last 5 seconds every 3 seconds, by each tuple's ``ts``
field (its event time, in seconds: Storm's is milliseconds), letting tuples come up to 5
seconds late (``lag``).  The spout's 120 tuples are 0.25 s apart in event time, 30 s in all,
however fast they come.

The windows fire as the watermark -- the newest ``ts`` less the lag -- passes their end, at
each tick (every ``watermark_interval``, 1 s).  Nothing moves the watermark past the last
tuples, so (as in Storm) their windows never fire and they are acked only when they time out:
a run to completion ends ``message_timeout_secs`` (30 s) after the last tuple.
"""

from __future__ import annotations

import time
from functools import partial

from brokerless.stream import Duration, Topology, run_local

from .sliding_window import SlidingWindowSumBolt
from .spouts import IntegerSpout


def sliding_tuple_ts(count: int = 120) -> Topology:
    return (
        Topology("sliding-tuple-ts")
        .spout("integer", partial(IntegerSpout, count, interval=0.25))
        .bolt("slidingsum", partial(SlidingWindowSumBolt, window_length=Duration(5),
                                    sliding_interval=Duration(3), timestamp_field="ts",
                                    lag=Duration(5)), inputs=["integer"])
    )


topology = sliding_tuple_ts()

if __name__ == "__main__":
    with run_local(topology, capture=True) as run:  # as Storm's LocalCluster: run a while
        time.sleep(5)
    print([values[0] for component, _, values in run.captured() if component == "slidingsum"])
