"""storm-starter's WordCountTopology: sentences, split into words, counted per word.

    brokerless stream run storm_starter.word_count:topology --workers 2 --emitted count

In Storm the split bolt is a multilang bolt (``ShellBolt`` running ``splitsentence.py``); here
it is a plain Python bolt in the same process as the others.  The fields grouping sends every
occurrence of a word to the same ``count`` task, so each task's counts are totals.
"""

from __future__ import annotations

from brokerless.stream import (
    Bolt,
    Config,
    Topology,
    TopologyContext,
    Tuple,
    complete_topology,
    fields,
    shuffle,
)
from brokerless.stream.examples import final_counts

from .spouts import SentenceSpout


class SplitSentence(Bolt):
    outputs = ["word"]

    def process(self, tup: Tuple) -> None:
        for word in tup["sentence"].split(" "):
            self.emit([word])


class WordCount(Bolt):
    outputs = ["word", "count"]

    def prepare(self, conf: Config, context: TopologyContext) -> None:
        self.counts: dict[str, int] = {}

    def process(self, tup: Tuple) -> None:
        word = tup["word"]
        self.counts[word] = count = self.counts.get(word, 0) + 1
        self.emit([word, count])


topology = (
    Topology("word-count", Config(num_workers=3))
    .spout("spout", SentenceSpout, parallelism=5)
    .bolt("split", SplitSentence, parallelism=8, inputs={"spout": shuffle()})
    .bolt("count", WordCount, parallelism=12, inputs={"split": fields("word")})
)

if __name__ == "__main__":
    counts = final_counts(complete_topology(topology).emitted("count"))
    print(sorted(counts.items(), key=lambda item: (-item[1], item[0])))  # [('the', 4), ...]
