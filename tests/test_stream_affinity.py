"""Which CPUs a multi-process run's workers keep to (``Config.worker_cpus``): each worker
process and every thread in it on the CPUs it was given, the scheduler's choice by default,
local mode leaving the calling process alone, clear errors for a bad setting."""

from __future__ import annotations

import os
import signal
from functools import partial

import pytest

from brokerless.stream import Config, SequenceSpout, Topology, fields, shuffle
from brokerless.stream.affinity import worker_cpu_sets
from brokerless.stream.multiprocess import run_multiprocess
from brokerless.stream.testing import complete_topology

from .stream_topologies import (
    ReportAffinity,
    Source,
    StatefulCount,
    WordSplit,
    threads_cpus,
    wait_for,
)

pytestmark = pytest.mark.timeout(120)
ALLOWED = sorted(os.sched_getaffinity(0))  # what this process (the driver) may use
VALUES = {"values": [[i] for i in range(40)]}
#: On one CPU a worker kept to it cannot be told from one left alone.
two_cpus = pytest.mark.skipif(len(ALLOWED) < 2, reason="needs 2 CPUs to tell kept from not")


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


@two_cpus
def test_spread_keeps_each_worker_and_every_thread_in_it_to_a_cpu_of_its_own():
    seen = _thread_cpus_by_worker(Config(num_workers=2, worker_cpus="spread"))
    assert seen == {0: {(ALLOWED[0],)}, 1: {(ALLOWED[1],)}}


@two_cpus
def test_a_list_gives_worker_i_the_set_at_i_modulo_its_length():
    cpus = [{ALLOWED[1]}, {ALLOWED[0]}]  # the reverse of spread's
    seen = _thread_cpus_by_worker(Config(num_workers=2, worker_cpus=cpus))
    assert seen == {0: {(ALLOWED[1],)}, 1: {(ALLOWED[0],)}}
    first, second = frozenset({ALLOWED[0]}), frozenset({ALLOWED[1]})
    assert worker_cpu_sets([{ALLOWED[0]}, {ALLOWED[1]}], 3) == [first, second, first]
    assert worker_cpu_sets("spread", len(ALLOWED) + 1)[-1] == first


@two_cpus
def test_a_restarted_attempt_keeps_its_new_workers_to_their_cpus():
    config = Config(num_workers=2, checkpoint_interval_secs=0.05, worker_cpus="spread")
    sentences = [[f"s{i} the cow jumped over the moon"] for i in range(3000)]
    topology = (
        Topology("affinity-restart", config)
        .spout("sentences", partial(SequenceSpout, sentences, ["sentence"]), parallelism=2)
        .bolt("split", WordSplit, parallelism=2, inputs={"sentences": shuffle()})
        .bolt("count", StatefulCount, parallelism=2, inputs={"split": fields("word")})
    )
    with run_multiprocess(topology) as run:
        wait_for(lambda: run.checkpoint_statistics().completed >= 1, what="a checkpoint")
        os.kill(run.pids[1], signal.SIGKILL)
        run.wait_until_done(60)
        assert run.attempt == 2 and run.errors() == []
        assert [threads_cpus(pid) for pid in run.pids] == [{(ALLOWED[0],)}, {(ALLOWED[1],)}]


def test_by_default_workers_run_wherever_the_driver_may():
    assert Config().worker_cpus is None
    seen = _thread_cpus_by_worker(Config(num_workers=2))
    assert seen == {0: {tuple(ALLOWED)}, 1: {tuple(ALLOWED)}}


def test_local_mode_leaves_the_calling_process_alone():
    seen = _thread_cpus_by_worker(Config(num_workers=2, worker_cpus="spread"), mode="local")
    # (local mode's two workers are in this process: every thread of it, as it was)
    assert seen == {0: {tuple(ALLOWED)}, 1: {tuple(ALLOWED)}}
    assert threads_cpus(os.getpid()) == {tuple(ALLOWED)}


def test_cpus_this_process_may_not_use_are_refused_before_any_worker_starts():
    outside = max(ALLOWED) + 1000
    config = Config(num_workers=2, worker_cpus=[{ALLOWED[0]}, {outside}])
    with pytest.raises(ValueError, match=rf"CPU\(s\) \[{outside}\].*may not use") as info:
        run_multiprocess(_topology(config), workers=2, config=config)
    assert str(ALLOWED) in str(info.value)  # says which it may use
