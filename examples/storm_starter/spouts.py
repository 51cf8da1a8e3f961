"""storm-starter's spouts, bounded and deterministic: each run ends by itself
(``exhausted``) with the same output.

- :class:`WordSpout`: Storm's ``TestWordSpout`` (its five names), each word of a fixed list once.
- :class:`SentenceSpout`: ``RandomSentenceSpout``'s sentences, each once.
- :class:`IntegerSpout`: ``RandomIntegerSpout``'s ``[value, ts, msgid]`` tuples, from a seeded
  generator, with event times ``interval`` seconds apart; replayable, so that it can feed a
  checkpointed topology.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from brokerless.stream import ReplayableSpout
from brokerless.stream.examples import ListSpout

#: TestWordSpout's words
NAMES = ["nathan", "mike", "jackson", "golda", "bertels"]

#: RandomSentenceSpout's sentences
SENTENCES = [
    "the cow jumped over the moon",
    "an apple a day keeps the doctor away",
    "four score and seven years ago",
    "snow white and the seven dwarfs",
    "i am at two with nature",
]


class WordSpout(ListSpout):
    outputs = ["word"]

    def __init__(self, words: Sequence[str] = NAMES * 4) -> None:
        super().__init__(words)


class SentenceSpout(ListSpout):
    outputs = ["sentence"]

    def __init__(self, sentences: Sequence[str] = SENTENCES) -> None:
        super().__init__(sentences)


class IntegerSpout(ReplayableSpout):
    """``count`` tuples ``[value, ts, msgid]``: ``value`` in [0, 1000) from ``random.Random
    (seed)``, ``ts`` = ``start`` + i * ``interval`` (seconds: Storm's is milliseconds),
    ``msgid`` = i + 1 (the message id).  One task emits them in order; its position is how
    many it emitted."""

    outputs = ["value", "ts", "msgid"]

    def __init__(
        self, count: int = 100, seed: int = 0, start: float = 1_000_000.0, interval: float = 0.1
    ) -> None:
        rng = random.Random(seed)
        self.tuples = [[rng.randrange(1000), start + i * interval, i + 1] for i in range(count)]
        self.next = 0

    def next_tuple(self) -> None:
        if self.next < len(self.tuples):
            values = self.tuples[self.next]
            self.next += 1
            self.emit(values, msg_id=values[2])

    def exhausted(self) -> bool:
        return self.next >= len(self.tuples)

    def position(self) -> int:
        return self.next

    def seek(self, position: int) -> None:
        self.next = position
