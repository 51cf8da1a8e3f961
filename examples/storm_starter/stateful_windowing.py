"""storm-starter's StatefulWindowingTopology: a windowed bolt with checkpointed state.

    brokerless stream run storm_starter.stateful_windowing:topology --emitted sumbolt

``sumbolt`` (a :class:`StatefulWindowedBolt`: Storm's ``BaseStatefulWindowedBolt``) adds up
every tuple of each window of the last 5 tuples, every 3 tuples, keeping the sum in its
``KeyValueState``.  Each checkpoint keeps the state and the windows together, so after a lost
worker neither a window nor the sum counts a tuple twice.  Storm needs
``.withMessageIdField("msgid")`` for that (to recognise replayed tuples); here the windows
are in the checkpoint, and the option does not exist.

As in ``sliding_window``, the last tuples of a finite input stay in the window until they
time out: a run to completion ends ``message_timeout_secs`` (here 5 s) after the last one.
"""

from __future__ import annotations

from brokerless.stream import (
    Config,
    Count,
    KeyValueState,
    StatefulWindowedBolt,
    Topology,
    TupleWindow,
    complete_topology,
)

from .spouts import IntegerSpout


class WindowSumBolt(StatefulWindowedBolt):
    window_length = Count(5)
    sliding_interval = Count(3)
    outputs = ["sum"]

    def init_state(self, state: KeyValueState) -> None:
        self.state = state
        self.sum = state.get("sum", 0)

    def process_window(self, window: TupleWindow) -> None:
        self.sum += sum(tup["value"] for tup in window.tuples)
        self.state.put("sum", self.sum)
        self.emit([self.sum])


topology = (
    Topology("stateful-windowing", Config(message_timeout_secs=5))
    .spout("spout", IntegerSpout)
    .bolt("sumbolt", WindowSumBolt, inputs=["spout"])
)

if __name__ == "__main__":
    print(complete_topology(topology).emitted("sumbolt"))
