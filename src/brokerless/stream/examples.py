"""Word count, the classic topology: sentences -> split -> count (fields grouping on word).

    python -m brokerless.stream run brokerless.stream.examples:word_count --workers 3

``word_count`` is the topology (over :data:`SENTENCES`); ``word_count_topology(sentences)``
builds one over any list of sentences.  The count bolt emits ``[word, running count]``;
:func:`final_counts` turns its emitted tuples into the totals.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import partial
from typing import Any

from .component import Bolt, Spout, TopologyContext
from .config import Config
from .grouping import fields, shuffle
from .topology import Topology
from .tuple import Tuple

SENTENCES = [
    "the cow jumped over the moon",
    "an apple a day keeps the doctor away",
    "four score and seven years ago",
    "snow white and the seven dwarfs",
    "i am at two with nature",
    "the quick brown fox jumps over the lazy dog",
    "to be or not to be that is the question",
    "all that glitters is not gold",
]


class ListSpout(Spout):
    """Emits each item of ``items`` once as a one-field tuple (task i of n takes items i,
    i + n, ...), reliably: a failed item is emitted again; exhausted once all are acked.
    Subclasses name the field (``outputs``)."""

    outputs: Sequence[str] = ["item"]

    def __init__(self, items: Sequence[Any]) -> None:
        self.items = list(items)

    def open(self, conf: Config, context: TopologyContext) -> None:
        n = len(context.get_component_tasks(context.component_id))
        self.todo = list(range(context.task_index, len(self.items), n))
        self.todo.reverse()
        self.in_flight: set[int] = set()

    def next_tuple(self) -> None:
        if self.todo:
            index = self.todo.pop()
            self.in_flight.add(index)
            self.emit([self.items[index]], msg_id=index)

    def ack(self, msg_id: Any) -> None:
        self.in_flight.discard(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.in_flight.discard(msg_id)
        self.todo.append(msg_id)

    def exhausted(self) -> bool:
        return not self.todo and not self.in_flight


class SentenceSpout(ListSpout):
    """Emits each sentence once, reliably (see :class:`ListSpout`)."""

    outputs = ["sentence"]

    def __init__(self, sentences: Sequence[str] = SENTENCES) -> None:
        super().__init__(sentences)


class SplitBolt(Bolt):
    outputs = ["word"]

    def process(self, tup: Tuple) -> None:
        for word in tup["sentence"].split():
            self.emit([word])


class CountBolt(Bolt):
    outputs = ["word", "count"]

    def prepare(self, conf: Config, context: TopologyContext) -> None:
        self.counts: dict[str, int] = {}

    def process(self, tup: Tuple) -> None:
        word = tup["word"]
        count = self.counts.get(word, 0) + 1
        self.counts[word] = count
        self.emit([word, count])


def word_count_topology(
    sentences: Sequence[str] = SENTENCES, *, parallelism: int = 2, count_tasks: int = 4
) -> Topology:
    return (
        Topology("word-count")
        .spout("sentences", partial(SentenceSpout, sentences), parallelism=parallelism)
        .bolt("split", SplitBolt, parallelism=parallelism, inputs={"sentences": shuffle()})
        .bolt("count", CountBolt, parallelism=parallelism, tasks=count_tasks,
              inputs={"split": fields("word")})
    )


word_count = word_count_topology()


def final_counts(emitted: Iterable[Sequence[Any]]) -> dict[str, int]:
    """Totals from the count bolt's ``[word, running count]`` tuples (each word is counted by
    one task, so its highest running count is its total)."""
    totals: dict[str, int] = {}
    for word, count in emitted:
        if count > totals.get(word, 0):
            totals[word] = count
    return totals
