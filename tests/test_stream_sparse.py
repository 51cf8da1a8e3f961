"""streamparse's class-based topology DSL (``brokerless.stream.sparse``): a topology written
for streamparse keeps its shape and runs as the same topology built with the builder."""

from __future__ import annotations

import collections
from typing import Any

import pytest

from brokerless.stream import Bolt, Stream, TopologyError, complete_topology
from brokerless.stream.examples import SENTENCES, CountBolt, SentenceSpout, SplitBolt
from brokerless.stream.grouping import All, Direct, Fields, Shuffle
from brokerless.stream.sparse import Grouping, Topology
from brokerless.stream.topology import load_topology

pytestmark = pytest.mark.timeout(60)


class WordCount(Topology):
    config = {"topology.workers": 2, "topology.message.timeout.secs": 45}
    sentence_spout = SentenceSpout.spec(par=2)
    split_bolt = SplitBolt.spec(inputs=[sentence_spout], par=2)
    count_bolt = CountBolt.spec(name="counter", inputs={split_bolt: Grouping.fields("word")}, par=2)


def test_a_streamparse_topology_class_is_the_topology_it_describes():
    topology = WordCount()
    assert topology.name == "WordCount" and WordCount.topology().name == "WordCount"
    plan = topology.build()
    assert list(plan.components) == ["sentence_spout", "split_bolt", "counter", "__acker"]
    assert plan.config.num_workers == 2 and plan.config.message_timeout_secs == 45
    assert [len(plan.components[c].executors) for c in ("split_bolt", "counter")] == [2, 2]
    assert isinstance(plan.components["split_bolt"].inputs[("sentence_spout", "default")], Shuffle)
    assert isinstance(plan.components["counter"].inputs[("split_bolt", "default")], Fields)
    assert load_topology(f"{__name__}:WordCount").name == "WordCount"  # brokerless stream run
    result = complete_topology(topology)
    counts = collections.Counter(w for s in SENTENCES for w in s.split())
    assert {w: n for w, n in result.emitted("counter") if n == counts[w]} == dict(counts)


class Router(Bolt):
    outputs = [Stream(["word"]), Stream(["word"], name="long"), Stream(["word"], "one", True)]


class Streams(Topology):
    words = SentenceSpout.spec()
    route = Router.spec(inputs=[words])
    long = CountBolt.spec(inputs={route["long"]: Grouping.ALL, route: Grouping.SHUFFLE})
    one = CountBolt.spec(inputs=[route["one"]])
    config = {"topology.tick.tuple.freq.secs": 5}
    ticked = CountBolt.spec(inputs=[route], config={"topology.tick.tuple.freq.secs": 1})


def test_stream_references_default_groupings_and_component_settings():
    plan = Streams().build()
    assert isinstance(plan.components["long"].inputs[("route", "long")], All)
    assert isinstance(plan.components["long"].inputs[("route", "default")], Shuffle)
    assert isinstance(plan.components["one"].inputs[("route", "one")], Direct)  # a direct one
    assert (plan.components["long"].tick_secs, plan.components["ticked"].tick_secs) == (5, 1)


def test_what_brokerless_cannot_take_is_refused_saying_what_it_takes():
    def topology(**attributes: Any) -> Any:
        return type("T", (Topology,), {"words": SentenceSpout.spec(), **attributes})

    with pytest.raises(TopologyError, match=r"'topology.debug' is not a Storm setting.*workers"):
        topology(config={"topology.debug": True})()
    with pytest.raises(TopologyError, match="a spout takes no inputs"):
        topology(other=SentenceSpout.spec(inputs=[SentenceSpout.spec()]))()
    with pytest.raises(TopologyError, match="is not a component of it"):
        topology(split=SplitBolt.spec(inputs=[SentenceSpout.spec()]))()
    with pytest.raises(TopologyError, match="the grouping of an input is a Grouping"):
        topology(split=SplitBolt.spec(inputs={SentenceSpout.spec(): "shuffle"}))()
    with pytest.raises(TopologyError, match="not a component setting brokerless has"):
        topology(split=SplitBolt.spec(inputs=[], config={"topology.workers": 2}))()
