"""Which CPUs a multi-process run's workers keep to (``Config.worker_cpus``): each worker
process and every thread in it on the CPUs it was given, the scheduler's choice by default,
local mode leaving the calling process alone, clear errors for a bad setting."""

from __future__ import annotations

import os

import pytest

from brokerless.stream import Config, Topology, shuffle
from brokerless.stream.affinity import worker_cpu_sets
from brokerless.stream.multiprocess import run_multiprocess
from brokerless.stream.testing import complete_topology

from .stream_topologies import ReportAffinity, Source

pytestmark = pytest.mark.timeout(120)
ALLOWED = sorted(os.sched_getaffinity(0))  # what this process (the driver) may use
VALUES = {"values": [[i] for i in range(40)]}


def _topology(config: Config) -> Topology:
    return (
        Topology("affinity", config)
        .spout("values", Source)
        .bolt("report", ReportAffinity, parallelism=4, inputs={"values": shuffle()})
    )


def _thread_cpus_by_worker(config: Config, mode: str = "multiprocess") -> dict[int, set]:
    """Run the topology; for each worker, the CPU sets its threads had (as tuples)."""
    result = complete_topology(
        _topology(config), VALUES, mode=mode, workers=2, config=config, timeout=60
    )
    assert result.errors == []
    reports = result.emitted("report")
    assert sorted(value for value, _, _ in reports) == list(range(40))
    seen: dict[int, set] = {}
    for _, worker, thread_cpus in reports:
        seen.setdefault(worker, set()).update(tuple(cpus) for cpus in thread_cpus)
    return seen


def test_spread_keeps_each_worker_and_every_thread_in_it_to_a_cpu_of_its_own():
    seen = _thread_cpus_by_worker(Config(num_workers=2, worker_cpus="spread"))
    assert seen == {i: {(ALLOWED[i % len(ALLOWED)],)} for i in range(2)}
    assert len(ALLOWED) < 2 or seen[0] != seen[1]


def test_a_list_gives_worker_i_the_set_at_i_modulo_its_length():
    cpus = [set(ALLOWED), {ALLOWED[-1]}]
    seen = _thread_cpus_by_worker(Config(num_workers=2, worker_cpus=cpus))
    assert seen == {0: {tuple(ALLOWED)}, 1: {(ALLOWED[-1],)}}
    assert worker_cpu_sets([{ALLOWED[0]}], 3) == [frozenset({ALLOWED[0]})] * 3


def test_by_default_workers_run_wherever_the_driver_may():
    assert Config().worker_cpus is None
    seen = _thread_cpus_by_worker(Config(num_workers=2))
    assert seen == {0: {tuple(ALLOWED)}, 1: {tuple(ALLOWED)}}


def test_local_mode_leaves_the_calling_process_alone():
    seen = _thread_cpus_by_worker(Config(num_workers=2, worker_cpus="spread"), mode="local")
    assert set(seen) == {0, 1}  # local mode's two in-process workers
    assert os.sched_getaffinity(0) == set(ALLOWED)


def test_cpus_this_process_may_not_use_are_refused_before_any_worker_starts():
    outside = max(ALLOWED) + 1000
    config = Config(num_workers=2, worker_cpus=[{ALLOWED[0]}, {outside}])
    with pytest.raises(ValueError, match=rf"CPU\(s\) \[{outside}\].*may not use") as info:
        run_multiprocess(_topology(config), workers=2, config=config)
    assert str(ALLOWED) in str(info.value)  # says which it may use
