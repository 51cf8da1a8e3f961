"""Topology definitions: validation errors name the component, plans and placement."""

from __future__ import annotations

import pytest

from brokerless.stream import (
    Bolt,
    Config,
    Spout,
    Stream,
    Topology,
    TopologyError,
    all_,
    complete_topology,
    direct,
    fields,
    partial_key,
    shuffle,
)
from brokerless.stream.assignment import assign
from brokerless.stream.routing import routing_map

from .stream_topologies import Recorder, Relay, Source


class Words(Spout):
    outputs = [Stream(["word", "n"]), Stream(["word"], name="direct-out", direct=True)]


class Count(Bolt):
    outputs = ["word", "count"]


def base():
    return Topology("t").spout("words", Words)


MISTAKES = [
    (
        "unknown component",
        lambda: base().bolt("count", Count, inputs={"wrods": shuffle()}),
        ["'count'", "unknown component 'wrods'"],
    ),
    (
        "unknown stream",
        lambda: base().bolt("count", Count, inputs={("words", "nope"): shuffle()}),
        ["'count'", "stream 'nope' of 'words'"],
    ),
    (
        "unknown field",
        lambda: base().bolt("count", Count, inputs={"words": fields("wrd")}),
        ["'count'", "unknown field(s) ['wrd']", "['word', 'n']"],
    ),
    (
        "unknown partial-key field",
        lambda: base().bolt("count", Count, inputs={"words": partial_key("word", "x")}),
        ["'count'", "['x']"],
    ),
    (
        "direct grouping on a regular stream",
        lambda: base().bolt("count", Count, inputs={"words": direct()}),
        ["'count'", "not a direct stream"],
    ),
    (
        "regular grouping on a direct stream",
        lambda: base().bolt("count", Count, inputs={("words", "direct-out"): shuffle()}),
        ["'count'", "direct stream 'direct-out'", "direct()"],
    ),
    (
        "zero parallelism",
        lambda: base().bolt("count", Count, parallelism=0, inputs={"words": shuffle()}),
        ["'count'", "parallelism must be an integer >= 1"],
    ),
    (
        "fewer tasks than executors",
        lambda: base().bolt("count", Count, parallelism=3, tasks=2, inputs={"words": shuffle()}),
        ["'count'", "tasks must be an integer >= parallelism"],
    ),
    (
        "cycle with no spout",
        lambda: (
            base()
            .bolt("a", Relay, inputs={"b": shuffle()})
            .bolt("b", Relay, inputs={"a": shuffle()})
        ),
        ["'a'", "no spout feeds it"],
    ),
    (
        "duplicate name",
        lambda: base().bolt("words", Count, inputs={"words": shuffle()}),
        ["'words'", "declared twice"],
    ),
    (
        "reserved name",
        lambda: base().bolt("__acker", Count, inputs={"words": shuffle()}),
        ["'__acker'", "reserved"],
    ),
    ("no inputs", lambda: base().bolt("count", Count, inputs={}), ["'count'", "no inputs"]),
    (
        "grouping not called",
        lambda: base().bolt("count", Count, inputs={"words": shuffle}),
        ["'count'", "call it"],
    ),
    ("bolt added as a spout", lambda: base().spout("count", Count), ["'count'", "not a Spout"]),
    (
        "spout added as a bolt",
        lambda: base().bolt("count", Words, inputs={"words": shuffle()}),
        ["'count'", "not a Bolt"],
    ),
    (
        "bad outputs",
        lambda: base().bolt(
            "count", type("Bad", (Bolt,), {"outputs": ["a", "a"]}), inputs={"words": shuffle()}
        ),
        ["'count'", "declares a field twice"],
    ),
    (
        "factory raises",
        lambda: base().bolt("count", lambda: 1 / 0, inputs={"words": shuffle()}),
        ["'count'", "ZeroDivisionError"],
    ),
    ("no spout", lambda: Topology("t"), ["no spout"]),
]


@pytest.mark.parametrize("mistake,make,needles", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_mistakes_are_reported_when_built_naming_the_component(mistake, make, needles):
    topology = make()  # declaring never raises: the whole topology is checked at once
    with pytest.raises(TopologyError) as info:
        topology.build()
    message = str(info.value)
    assert message.startswith("topology 't':")
    for needle in needles:
        assert needle in message


@pytest.mark.parametrize(
    "setting",
    [
        {"max_spout_pending": 0},
        {"message_timeout_secs": 0},
        {"num_ackers": -1},
        {"executor_queue_size": 0},
        {"num_workers": 0},
        {"executor_threads": "pool"},
        {"worker_gc_threshold": 0},
        {"worker_gc_threshold": "700"},
        {"worker_gc_threshold": 2**31},
        {"worker_cpus": "all"},
        {"worker_cpus": []},
        {"worker_cpus": [set()]},
        {"worker_cpus": [{-1}]},
        {"worker_cpus": [{True}]},
        {"worker_cpus": ["01"]},
        {"worker_cpus": 0},
    ],
)
def test_bad_config_is_reported_when_built(setting):
    name = next(iter(setting))
    with pytest.raises(TopologyError, match=name):
        base().bolt("count", Count, inputs={"words": shuffle()}).build(Config(**setting))


def test_plan_numbers_tasks_and_splits_them_over_executors():
    plan = (
        base()
        .bolt("count", Count, parallelism=2, tasks=5, inputs={"words": fields("word")})
        .build(Config(num_workers=3))
    )
    assert plan.components["words"].tasks == (1,)
    assert plan.components["count"].tasks == (2, 3, 4, 5, 6)
    assert plan.acker_tasks == (7, 8, 9)  # one acker per worker by default
    count_executors = [plan.executors[e].tasks for e in plan.components["count"].executors]
    assert count_executors == [(2, 3, 4), (5, 6)]
    assert routing_map(plan, "words") == {
        "default": {"count": plan.components["count"].inputs[("words", "default")]},
        "direct-out": {},
    }


def test_inputs_may_be_a_list_of_names_meaning_shuffle():
    plan = base().bolt("count", Count, inputs=["words"]).build()
    assert type(plan.components["count"].inputs[("words", "default")]).__name__ == "Shuffle"


def test_assignment_is_a_deterministic_spread_of_executors():
    topo = (
        Topology("spread")
        .spout("src", Source, parallelism=3)
        .bolt("a", Relay, parallelism=3, inputs={"src": shuffle()})
        .bolt("b", Recorder, parallelism=2, tasks=4, inputs={"a": shuffle()})
    )
    plan = topo.build(Config(num_workers=3))
    first = assign(plan, 3)
    again = assign(topo.build(Config(num_workers=3)), 3)
    assert first == again
    for name in ("src", "a"):
        assert {first.task_worker[t] for t in plan.components[name].tasks} == {0, 1, 2}
    assert set(first.task_worker.values()) == {0, 1, 2}
    assert set(first.tasks(0)) | set(first.tasks(1)) | set(first.tasks(2)) == set(
        plan.task_component
    )


def test_edges_inside_a_cycle_are_marked_non_blocking():
    plan = (
        Topology("cycle")
        .spout("src", Source)
        .bolt("a", Relay, inputs={"src": shuffle(), "b": shuffle()})
        .bolt("b", Relay, inputs={"a": shuffle()})
        .bolt("c", Relay, inputs={"b": shuffle()})
        .build()
    )
    assert plan.cycle_edges == {("a", "b"), ("b", "a")}


def test_with_component_replaces_only_that_component():
    topo = base().bolt("count", Count, inputs={"words": shuffle()})
    other = topo.with_component("count", Recorder)
    assert topo.build().components["count"].factory is Count
    assert other.build().components["count"].factory is Recorder
    with pytest.raises(TopologyError, match="no component 'nope'"):
        topo.with_component("nope", Recorder)


class _Types(Bolt):
    """Emits ``[its worker, the type of the input's value, the value used as a dict key]``."""

    outputs = ["worker", "type", "looked_up"]

    def prepare(self, conf, context):
        self.worker = context.worker_index
        self.table = {("user", 1): "found"}

    def process(self, tup):
        self.emit([self.worker, type(tup["value"]).__name__, self.table.get(tup["value"])])


def test_a_tuple_value_is_a_tuple_in_every_worker():
    """A bolt gets the types its spout emitted whether the tuple came from its own worker (the
    objects themselves) or from another (serialized): with the default msgpack a tuple came
    back a list, and using it as a dict key raised TypeError -- in one worker only."""
    topo = (
        Topology("types")
        .spout("source", Source)
        .bolt("types", _Types, parallelism=4, inputs={"source": all_()})
    )
    result = complete_topology(topo, {"source": [[("user", 1)]]}, workers=2, timeout=30)
    seen = result.emitted("types")
    assert {worker for worker, _, _ in seen} == {0, 1}  # both workers had a task
    assert sorted(map(list, seen)) == sorted([w, "tuple", "found"] for w, _, _ in seen)


class _OutputFields(Bolt):
    """Emits, for each tuple, the output fields its context gives for (component, stream)."""

    outputs = [Stream(["fields"]), Stream(["line", "reason"], name="errors")]

    def prepare(self, conf, context):
        self.context = context

    def process(self, tup):
        component, stream = tup[0]
        try:
            found = list(self.context.get_component_output_fields(component, stream))
        except KeyError as exc:
            found = str(exc)
        self.emit([found])


def test_a_context_gives_any_component_s_output_fields():
    """Storm's ``TopologyContext.getComponentOutputFields(componentId, streamId)`` (a join or
    a generic bolt reads its inputs' fields with it); brokerless's context had no way to."""
    asked = [["s", "default"], ["b", "default"], ["b", "errors"], ["b", "nope"], ["x", "default"]]
    topo = Topology("fields").spout("s", Source).bolt("b", _OutputFields, inputs=["s"])
    result = complete_topology(topo, {"s": [[pair] for pair in asked]})
    assert result.emitted("b") == [
        [["value"]],
        [["fields"]],
        [["line", "reason"]],
        ["\"'b' declares no stream 'nope'; it declares ['default', 'errors']\""],
        ["\"no component 'x'; the components are ['b', 's']\""],
    ]


def test_a_config_is_made_from_storm_s_conf_with_its_names_and_units():
    """A Storm topology's conf (``conf.setNumWorkers(2)``, ``conf.put("my.key", ...)``) as it
    is: Storm's names and units, the user's own keys kept as settings."""
    config = Config.from_storm(
        {
            "topology.workers": 2,
            "topology.max.spout.pending": 10,
            "topology.state.checkpoint.interval.ms": 500,
            "my.key": "v",
        },
        executor_threads="per_executor",
    )
    assert (config.num_workers, config.max_spout_pending) == (2, 10)
    assert config.checkpoint_interval_secs == 0.5
    assert (config.settings, config.executor_threads) == ({"my.key": "v"}, "per_executor")
    with pytest.raises(ValueError, match=r"config 'topology.debug' is not a Storm setting"):
        Config.from_storm({"topology.debug": True})


class _ReadsConf(Bolt):
    """Emits what its ``conf`` says under Storm's names, as a Storm bolt reads them."""

    outputs = ["timeout", "interval", "mine", "absent", "missing"]

    def prepare(self, conf, context):
        self.said = [
            conf["topology.message.timeout.secs"],
            conf["topology.state.checkpoint.interval.ms"],
            conf["my.key"],
            conf.get("no.such.key", "default"),
        ]
        try:
            conf["no.such.key"]
        except KeyError as exc:
            self.said.append(exc.args[0])

    def process(self, tup):
        self.emit(self.said)


def test_a_component_reads_its_conf_by_storm_s_names():
    """``conf.get(Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS)`` and ``conf.get("my.key")`` in a
    Storm bolt's ``prepare``: a brokerless bolt's conf answered neither (TypeError: not
    subscriptable) -- its own keys were only in ``conf.settings``."""
    config = Config(
        message_timeout_secs=12.0, checkpoint_interval_secs=0.25, settings={"my.key": 3}
    )
    topo = (
        Topology("conf", config)
        .spout("source", Source)
        .bolt("reads", _ReadsConf, inputs=["source"])
    )
    [said] = complete_topology(topo, {"source": [["x"]]}, timeout=30).emitted("reads")
    assert said[:4] == [12.0, 250.0, 3, "default"]
    assert said[4] == (
        "'no.such.key' is neither a Storm setting brokerless has (['topology.acker.executors', "
        "'topology.executor.receive.buffer.size', 'topology.max.spout.pending', "
        "'topology.message.timeout.secs', 'topology.state.checkpoint.interval.ms', "
        "'topology.tick.tuple.freq.secs', 'topology.workers']) nor a key of the topology's own "
        "settings (['my.key'])"
    )
