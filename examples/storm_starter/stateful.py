"""storm-starter's StatefulTopology: running sums kept in checkpointed state.

    brokerless stream run storm_starter.stateful:topology --emitted total

``partialsum`` adds up the spout's values, ``printer`` (two tasks) prints each running sum and
passes it on, and ``total`` adds those up.  Both sums are :class:`StatefulBolt` s: their
``KeyValueState`` is checkpointed (every ``checkpoint_interval_secs``), and after a lost
worker each is the state of the last complete checkpoint while the spout replays what came
after it -- Storm's default ``InMemoryKeyValueState`` would lose it; here checkpoints go to
``checkpoint_dir`` (a temporary one, unset).  The spout must be replayable
(``ReplayableSpout``: ``IntegerSpout`` replays from a position).
"""

from __future__ import annotations

import logging

from brokerless.stream import (
    Bolt,
    KeyValueState,
    StatefulBolt,
    Topology,
    Tuple,
    complete_topology,
)

from .spouts import IntegerSpout

log = logging.getLogger(__name__)


class StatefulSumBolt(StatefulBolt):
    outputs = ["value"]

    def init_state(self, state: KeyValueState) -> None:
        self.state = state
        self.sum = state.get("sum", 0)  # the last complete checkpoint's, or 0

    def process(self, tup: Tuple) -> None:
        self.sum += tup["value"]
        self.state.put("sum", self.sum)
        self.emit([self.sum])


class PrinterBolt(Bolt):
    outputs = ["value"]

    def process(self, tup: Tuple) -> None:
        log.info("got %s", tup)
        self.emit(list(tup.values))


topology = (
    Topology("stateful")
    .spout("spout", IntegerSpout)
    .bolt("partialsum", StatefulSumBolt, inputs=["spout"])
    .bolt("printer", PrinterBolt, parallelism=2, inputs=["partialsum"])
    .bolt("total", StatefulSumBolt, inputs=["printer"])
)

if __name__ == "__main__":
    print("total:", max(complete_topology(topology).emitted("total")))
