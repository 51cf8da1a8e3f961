"""storm-starter's SingleJoinExample: two streams joined on their common fields.

    brokerless stream run storm_starter.single_join:topology --emitted join

``gender`` emits ``[id, gender]`` and ``age`` emits ``[id, age]``; ``join`` (fields grouping
on ``id`` from both, so both halves of an id meet in one task) emits ``[gender, age]`` for each
id once it has both.  As Storm's ``SingleJoinBolt``, it works out from its context which
fields its inputs share (``context.sources``, Storm's ``getThisSources``, and
``get_component_output_fields``, its ``getComponentOutputFields``) and where each output
field comes from.  It acks both halves once joined (``auto_ack = False``: a half waits for the
other), and what it emits is anchored to both.  Storm's ``FeederSpout`` is a
:class:`FixedTupleSpout` here.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from brokerless.stream import (
    Bolt,
    Config,
    FixedTupleSpout,
    Stream,
    Topology,
    TopologyContext,
    Tuple,
    complete_topology,
    fields,
)


class SingleJoinBolt(Bolt):
    auto_ack = False  # a half is acked once joined

    def __init__(self, out_fields: Sequence[str]) -> None:
        self.out_fields = list(out_fields)
        self.outputs = self.out_fields

    def prepare(self, conf: Config, context: TopologyContext) -> None:
        self.sources = context.sources
        shared: set[str] | None = None
        self.locations: dict[str, tuple[str, str]] = {}
        for source in self.sources:
            source_fields = context.get_component_output_fields(*source)
            shared = set(source_fields) if shared is None else shared & set(source_fields)
            for field in source_fields:
                if field in self.out_fields:
                    self.locations[field] = source
        if len(self.locations) != len(self.out_fields):
            raise ValueError(f"cannot find all of {self.out_fields} among the sources' fields")
        self.id_fields = sorted(shared or ())
        self.pending: dict[tuple[object, ...], dict[tuple[str, str], Tuple]] = {}

    def process(self, tup: Tuple) -> None:
        key = tuple(tup[field] for field in self.id_fields)
        parts = self.pending.setdefault(key, {})
        source = (tup.component, tup.stream)
        if source in parts:
            raise ValueError(f"received the same side of a single join twice: {tup}")
        parts[source] = tup
        if len(parts) == len(self.sources):
            del self.pending[key]
            values = [parts[self.locations[field]][field] for field in self.out_fields]
            self.emit(values, anchors=list(parts.values()))
            for part in parts.values():
                self.ack(part)


GENDERS = [[i, "male" if i % 2 == 0 else "female"] for i in range(10)]
AGES = [[i, i + 20] for i in reversed(range(10))]

topology = (
    Topology("join-example")
    .spout("gender", partial(FixedTupleSpout, GENDERS, [Stream(["id", "gender"])]))
    .spout("age", partial(FixedTupleSpout, AGES, [Stream(["id", "age"])]))
    .bolt("join", partial(SingleJoinBolt, ["gender", "age"]), parallelism=2,
          inputs={"gender": fields("id"), "age": fields("id")})
)

if __name__ == "__main__":
    print(sorted(complete_topology(topology).emitted("join")))  # [['female', 21], ...]
