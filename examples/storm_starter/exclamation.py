"""storm-starter's ExclamationTopology: words through two chained bolts, each adding "!!!".

    brokerless stream run storm_starter.exclamation:topology --emitted exclaim2

Storm's ``ExclamationBolt`` emits anchored to its input and acks it; here a bolt's emits are
anchored to the tuple being processed, and it is acked when ``process`` returns, by default.
"""

from __future__ import annotations

from brokerless.stream import Bolt, Topology, Tuple, complete_topology, shuffle

from .spouts import WordSpout


class ExclamationBolt(Bolt):
    outputs = ["word"]

    def process(self, tup: Tuple) -> None:
        self.emit([tup[0] + "!!!"])


topology = (
    Topology("exclamation")
    .spout("word", WordSpout, parallelism=2)
    .bolt("exclaim1", ExclamationBolt, parallelism=3, inputs={"word": shuffle()})
    .bolt("exclaim2", ExclamationBolt, parallelism=2, inputs={"exclaim1": shuffle()})
)

if __name__ == "__main__":
    for (word,) in complete_topology(topology).emitted("exclaim2"):
        print(word)  # nathan!!!!!!, mike!!!!!!, ...
