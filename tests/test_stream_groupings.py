"""One test per grouping: which tasks receive which tuples."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys

import pytest

from brokerless.stream import (
    Bolt,
    Spout,
    Stream,
    Topology,
    all_,
    complete_topology,
    custom,
    direct,
    fields,
    global_,
    local_or_shuffle,
    none,
    partial_key,
    shuffle,
)
from brokerless.stream.assignment import assign
from brokerless.stream.serializer import stable_hash

from .stream_topologies import KeySource, Recorder, ReportSent, Source

SINK_TASKS = 4


def received(topology, tuples, **kwargs):
    """Run ``topology`` (spout "src", recording bolt "sink") on ``tuples``; returns the
    (sink task, source task, values) triples and the plan."""
    result = complete_topology(topology, {"src": tuples}, timeout=20, **kwargs)
    assert result.errors == []
    return [(task, source, values) for task, source, values in result.emitted("sink")]


def two_stage(grouping, spout=Source, spout_tasks=1, sink_tasks=SINK_TASKS):
    return (
        Topology("groupings")
        .spout("src", spout, parallelism=spout_tasks)
        .bolt("sink", Recorder, parallelism=2, tasks=sink_tasks, inputs={"src": grouping})
    )


def sink_tasks(topology):
    return topology.build().components["sink"].tasks


@pytest.mark.parametrize("grouping", [shuffle, none])
def test_shuffle_and_none_spread_evenly_over_all_tasks(grouping):
    topo = two_stage(grouping())
    got = received(topo, [[i] for i in range(40)])
    per_task = collections.Counter(task for task, _, _ in got)
    assert sorted(per_task) == list(sink_tasks(topo))
    assert set(per_task.values()) == {10}  # round-robin in a shuffled order
    assert sorted(v for _, _, (v,) in got) == list(range(40))  # each tuple once


def test_fields_sends_each_key_to_one_task_from_every_source_task():
    topo = two_stage(fields("key"), spout=KeySource, spout_tasks=3)
    keys = [f"key-{i}" for i in range(13)]  # 13: each key comes from every source task
    got = received(topo, [[k, n] for n in range(6) for k in keys])
    tasks_of_key = collections.defaultdict(set)
    sources_of_key = collections.defaultdict(set)
    for task, source, (key, _) in got:
        tasks_of_key[key].add(task)
        sources_of_key[key].add(source)
    assert all(len(t) == 1 for t in tasks_of_key.values())
    assert any(len(s) > 1 for s in sources_of_key.values())  # several emitters agreed
    assert len({t for ts in tasks_of_key.values() for t in ts}) > 1  # keys spread
    targets = sink_tasks(topo)
    for key, (task,) in tasks_of_key.items():
        assert task == targets[stable_hash([key]) % len(targets)]


def test_fields_hashing_is_the_same_in_another_process():
    keys = ["alpha", "beta", 42, 3.5, b"raw", ["nested", 1], None]
    here = [stable_hash([k]) for k in keys]
    code = (
        "import json, sys; from brokerless.stream.serializer import stable_hash; "
        f"keys = {keys!r}; print(json.dumps([stable_hash([k]) for k in keys]))"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=30, check=True)
    assert json.loads(out.stdout) == here
    assert len(set(here)) == len(keys)


def test_partial_key_sends_a_key_to_at_most_two_tasks_and_splits_a_hot_key():
    topo = two_stage(partial_key("key"), spout=KeySource)
    targets = sink_tasks(topo)
    # a hot key whose two candidate tasks differ
    hot = next(f"hot-{i}" for i in range(100)
               if stable_hash([f"hot-{i}"], 13) % 4 != stable_hash([f"hot-{i}"], 17) % 4)
    candidates = {targets[stable_hash([hot], seed) % len(targets)] for seed in (13, 17)}
    tuples = [[hot, n] for n in range(100)] + [[f"cold-{i}", 0] for i in range(20)]
    got = received(topo, tuples)
    tasks_of_key = collections.defaultdict(collections.Counter)
    for task, _, (key, _) in got:
        tasks_of_key[key][task] += 1
    assert all(len(t) <= 2 for t in tasks_of_key.values())
    assert set(tasks_of_key[hot]) == candidates
    assert all(count >= 40 for count in tasks_of_key[hot].values())  # load balanced


def test_all_delivers_every_tuple_to_every_task():
    topo = two_stage(all_())
    got = received(topo, [[i] for i in range(10)])
    tasks_of_value = collections.defaultdict(list)
    for task, _, (value,) in got:
        tasks_of_value[value].append(task)
    assert {v: sorted(t) for v, t in tasks_of_value.items()} == {
        v: list(sink_tasks(topo)) for v in range(10)
    }


def test_global_delivers_everything_to_the_lowest_task():
    topo = two_stage(global_(), spout_tasks=2)
    got = received(topo, [[i] for i in range(20)])
    assert {task for task, _, _ in got} == {min(sink_tasks(topo))}
    assert sorted(v for _, _, (v,) in got) == list(range(20))


class DirectSpout(Spout):
    """Sends value v to the sink task with index v % tasks, on a direct stream."""

    outputs = [Stream(["value"], name="to-one", direct=True)]

    def __init__(self, values):
        self.values = list(values)

    def open(self, conf, context):
        self.targets = context.get_component_tasks("sink")
        self.i = 0

    def next_tuple(self):
        if self.i < len(self.values):
            value = self.values[self.i]
            self.i += 1
            sent = self.emit_direct(self.targets[value % len(self.targets)], [value],
                                    stream="to-one", msg_id=value)
            assert sent == [self.targets[value % len(self.targets)]]

    def exhausted(self):
        return self.i >= len(self.values)


class PlainEmitOnDirect(Bolt):
    """Tries a plain emit on its direct stream, and an emit_direct to a task that does not
    subscribe; reports both errors on stream "errors"."""

    outputs = [Stream(["value"], name="to-one", direct=True), Stream(["error"], name="errors")]

    def process(self, tup):
        for attempt in (lambda: self.emit([1], stream="to-one"),
                        lambda: self.emit_direct(tup.task, [1], stream="to-one")):
            try:
                attempt()
            except ValueError as exc:
                self.emit([str(exc)], stream="errors")


def test_direct_reaches_exactly_the_chosen_task_and_plain_emit_is_refused():
    topo = (
        Topology("direct")
        .spout("src", lambda: DirectSpout(range(12)))
        .bolt("sink", Recorder, parallelism=2, tasks=3, inputs={("src", "to-one"): direct()})
        .bolt("misuse", PlainEmitOnDirect, inputs={"sink": shuffle()})
        .bolt("other", Recorder, inputs={("misuse", "to-one"): direct()})
    )
    result = complete_topology(topo, timeout=20)
    targets = sink_tasks(topo)
    got = result.emitted("sink")
    assert sorted((task, v) for task, _, (v,) in got) == sorted(
        (targets[v % 3], v) for v in range(12)
    )
    errors = [e for (e,) in result.emitted("misuse", "errors")]
    assert len(errors) == 24
    assert sum("without a task: use emit_direct" in e for e in errors) == 12
    assert sum("does not subscribe" in e for e in errors) == 12
    assert all("'misuse'" in e for e in errors)
    assert result.emitted("other") == []


def test_local_or_shuffle_keeps_tuples_in_the_emitters_worker():
    topo = two_stage(local_or_shuffle(), spout_tasks=2)
    plan = topo.build(topo.config.replace(num_workers=2, num_ackers=0))
    placement = assign(plan, 2).task_worker
    spout_workers = {placement[t] for t in plan.components["src"].tasks}
    sink_workers = collections.Counter(placement[t] for t in plan.components["sink"].tasks)
    assert spout_workers == {0, 1} and sink_workers == {0: 2, 1: 2}  # both have a choice
    got = received(topo, [[i] for i in range(40)], workers=2)
    assert len(got) == 40
    assert all(placement[task] == placement[source] for task, source, _ in got)
    assert len({task for task, _, _ in got}) == SINK_TASKS  # still spread within each worker


def test_local_or_shuffle_falls_back_to_all_tasks_when_none_is_local():
    topo = (
        Topology("fallback")
        .spout("src", Source)
        .bolt("sink", Recorder, parallelism=1, tasks=3, inputs={"src": local_or_shuffle()})
    )
    plan = topo.build(topo.config.replace(num_workers=2, num_ackers=0))
    placement = assign(plan, 2).task_worker
    assert placement[plan.components["src"].tasks[0]] != placement[
        plan.components["sink"].tasks[0]]
    got = received(topo, [[i] for i in range(9)], workers=2)
    assert collections.Counter(task for task, _, _ in got) == dict.fromkeys(
        plan.components["sink"].tasks, 3)


class ModuloGrouping:
    def prepare(self, context, stream, target_tasks):
        self.targets = target_tasks

    def choose_tasks(self, source_task, values):
        return [self.targets[values[0] % len(self.targets)]]


@pytest.mark.parametrize(
    "chooser",
    [lambda values, targets: [targets[values[0] % len(targets)]], ModuloGrouping],
    ids=["function", "class"],
)
def test_custom_grouping_decides_the_tasks(chooser):
    topo = two_stage(custom(chooser))
    targets = sink_tasks(topo)
    got = received(topo, [[i] for i in range(20)])
    assert sorted((task, v) for task, _, (v,) in got) == sorted(
        (targets[v % len(targets)], v) for v in range(20)
    )


def test_custom_grouping_choosing_a_foreign_task_fails_that_emit():
    topo = two_stage(custom(lambda values, targets: [max(targets) + 1]))
    result = complete_topology(topo, {"src": [[1]]}, timeout=20)
    assert result.emitted("sink") == []
    assert len(result.errors) == 1
    assert "chose task(s)" in result.errors[0].error


@pytest.mark.parametrize("grouping", [shuffle, lambda: fields("value"), all_],
                         ids=["shuffle", "fields", "all"])
def test_emit_returns_the_tasks_the_tuple_went_to(grouping):
    topo = (
        Topology("returned")
        .spout("src", Source)
        .bolt("report", ReportSent, inputs={"src": shuffle()})
        .bolt("sink", Recorder, parallelism=2, tasks=SINK_TASKS, inputs={"report": grouping()})
    )
    result = complete_topology(topo, {"src": [[i] for i in range(12)]}, timeout=20)
    arrived = collections.defaultdict(list)
    for task, _, (value,) in result.emitted("sink"):
        arrived[value].append(task)
    said = {value: tasks for value, tasks in result.emitted("report", "sent")}
    assert {v: sorted(t) for v, t in arrived.items()} == {v: sorted(t) for v, t in said.items()}
    assert len(said) == 12


class ClearSent(Bolt):
    """Re-emits its input, then empties the list of tasks that ``emit`` returned."""

    outputs = ["value"]

    def process(self, tup):
        self.emit([tup[0]]).clear()


@pytest.mark.parametrize("grouping", [shuffle, all_, global_], ids=["shuffle", "all", "global"])
def test_the_tasks_emit_returns_are_the_callers_to_change(grouping):
    # a grouping with one target may answer with the same list every time: emit hands out
    # a copy, or this bolt would empty where every later tuple goes
    topo = (
        Topology("returned")
        .spout("src", Source)
        .bolt("clear", ClearSent, inputs={"src": shuffle()})
        .bolt("sink", Recorder, inputs={"clear": grouping()})
    )
    result = complete_topology(topo, {"src": [[i] for i in range(5)]}, timeout=20)
    assert sorted(value for _, _, (value,) in result.emitted("sink")) == list(range(5))
