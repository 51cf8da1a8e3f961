"""Placement of executors on workers (``stream/assignment.py``): balanced, each component spread,
a chain kept together where balance allows, ackers beside the spouts."""

from __future__ import annotations

import collections

from hypothesis import given, settings
from hypothesis import strategies as st

from brokerless.stream import Config, Topology, shuffle
from brokerless.stream.assignment import assign
from brokerless.stream.plan import ACKER

from .stream_topologies import Relay, Source


def chain(length: int, parallelism: int = 1, **config: object) -> Topology:
    """spout -> b1 -> b2 -> ... (``length`` components), each of ``parallelism`` executors."""
    topo = Topology("chain", Config(**config)).spout("c0", Source, parallelism=parallelism)
    for i in range(1, length):
        topo = topo.bolt(f"c{i}", Relay, parallelism=parallelism, inputs={f"c{i - 1}": shuffle()})
    return topo


def workers_of(plan, assignment, component):
    return [assignment.executor_worker[e] for e in plan.components[component].executors]


def test_a_chain_of_single_executors_crosses_workers_once():
    plan = chain(3).build(Config(num_workers=2))
    placed = assign(plan, 2)
    # the spout alone, both bolts together: a tuple crosses once on its way, not twice
    assert [workers_of(plan, placed, c) for c in ("c0", "c1", "c2")] == [[0], [1], [1]]
    assert sorted(workers_of(plan, placed, ACKER)) == [0, 1]


def test_a_longer_chain_crosses_fewer_times_than_the_round_robin_deal():
    plan = chain(4).build(Config(num_workers=2))
    placed = assign(plan, 2)
    # greedy, in declaration order: two crossings (round-robin's 0, 1, 0, 1 made three)
    assert [workers_of(plan, placed, f"c{i}")[0] for i in range(4)] == [0, 1, 1, 0]


def test_components_with_an_executor_per_worker_are_dealt_as_storm_deals_them():
    plan = chain(3, parallelism=2).build(Config(num_workers=2))
    placed = assign(plan, 2)
    assert [workers_of(plan, placed, f"c{i}") for i in range(3)] == [[0, 1]] * 3


def test_a_single_acker_is_placed_with_the_spout():
    for num_workers in (2, 3):
        plan = chain(3).build(Config(num_workers=num_workers, num_ackers=1))
        placed = assign(plan, num_workers)
        assert workers_of(plan, placed, ACKER) == workers_of(plan, placed, "c0") == [0]


def test_ackers_go_first_where_the_spouts_are():
    topo = (
        Topology("two-spouts", Config(num_workers=3, num_ackers=2))
        .spout("a", Source)
        .spout("b", Source)
        .bolt("x", Relay, inputs={"a": shuffle(), "b": shuffle()})
    )
    plan = topo.build()
    placed = assign(plan, 3)
    spouts = {workers_of(plan, placed, "a")[0], workers_of(plan, placed, "b")[0]}
    assert len(spouts) == 2 and set(workers_of(plan, placed, ACKER)) == spouts


def test_ackers_follow_a_spout_that_is_not_on_the_first_worker():
    topo = (
        Topology("spout-last", Config(num_workers=2, num_ackers=1))
        .bolt("x", Relay, inputs={"s": shuffle()})
        .spout("s", Source)
    )
    plan = topo.build()
    placed = assign(plan, 2)
    assert workers_of(plan, placed, "x") == [0]
    assert workers_of(plan, placed, ACKER) == workers_of(plan, placed, "s") == [1]


@st.composite
def topologies(draw):
    """A random acyclic topology: spouts, then bolts each subscribing to earlier components."""
    spouts = draw(st.integers(1, 3))
    bolts = draw(st.integers(0, 5))
    topo = Topology("random", Config(num_ackers=draw(st.none() | st.integers(0, 4))))
    names = []
    for i in range(spouts):
        names.append(f"s{i}")
        topo = topo.spout(names[-1], Source, parallelism=draw(st.integers(1, 4)))
    for i in range(bolts):
        inputs = draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
        name = f"b{i}"
        topo = topo.bolt(
            name,
            Relay,
            parallelism=draw(st.integers(1, 4)),
            inputs=dict.fromkeys(inputs, shuffle()),
        )
        names.append(name)
    return topo


@settings(max_examples=200, deadline=None)
@given(topologies(), st.integers(1, 5))
def test_every_placement_is_balanced_spread_and_deterministic(topo, num_workers):
    plan = topo.build(topo.config.replace(num_workers=num_workers))
    placed = assign(plan, num_workers)
    assert placed == assign(topo.build(topo.config.replace(num_workers=num_workers)), num_workers)
    assert len(placed.executor_worker) == len(plan.executors)
    assert set(placed.executor_worker) <= set(range(num_workers))

    def spread(executors):
        counts = collections.Counter(placed.executor_worker[e] for e in executors)
        per_worker = [counts[w] for w in range(num_workers)]
        return max(per_worker) - min(per_worker)

    components = [c for c in plan.components.values() if c.name != ACKER]
    assert spread([e for c in components for e in c.executors]) <= 1
    for component in plan.components.values():
        assert spread(component.executors) <= 1, component.name
    for task, worker in placed.task_worker.items():
        (executor,) = [e for e in plan.executors if task in e.tasks]
        assert placed.executor_worker[executor.id] == worker
