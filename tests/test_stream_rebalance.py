"""Storm's rebalance of a running topology (``TopologyRun.rebalance``): its workers and the
executors of a component change while it runs, and no tuple is lost or counted twice -- a
checkpointed word count's state stays exact, an acking spout's tuples are each acked once."""

from __future__ import annotations

import collections
from functools import partial
from pathlib import Path

import pytest

from brokerless.stream import Config, Topology, TopologyError, fields, run_local, shuffle
from brokerless.stream.multiprocess import run_multiprocess
from brokerless.stream.run import TopologyRun
from brokerless.stream.ui.server import ACTION_HEADER

from .live_input import counted
from .stream_topologies import (
    Counter,
    DurableSpout,
    GatedSequenceSpout,
    HoldValue,
    Relay,
    ReliableCounter,
    Sink,
    StatefulCount,
    WordSplit,
    acked_values,
    wait_for,
)
from .test_stream_ui import act, get, refused

pytestmark = pytest.mark.timeout(120)

SENTENCES = [f"s{i} the cow jumped over the moon {i % 7}" for i in range(3000)]
EXPECTED = collections.Counter(w for s in SENTENCES for w in s.split())
FIRST = 300  # sentences (or values) each spout task emits before the gate opens

MODES = {"local": run_local, "multiprocess": run_multiprocess}


def gated_word_count(gate: Path) -> Topology:
    """A checkpointed word count on two workers whose spout tasks stop after ``FIRST``
    sentences each until ``gate`` exists; ``count`` has four tasks on two executors."""
    return (
        Topology("rebalanced-word-count", Config(num_workers=2, checkpoint_interval_secs=0.05))
        .spout(
            "sentences",
            partial(GatedSequenceSpout, [[s] for s in SENTENCES], ["sentence"], FIRST, str(gate)),
            parallelism=2,
        )
        .bolt("split", WordSplit, parallelism=2, inputs={"sentences": shuffle()})
        .bolt("count", StatefulCount, parallelism=2, tasks=4, inputs={"split": fields("word")})
    )


def rebalance_word_count_mid_stream(run: TopologyRun, gate: Path) -> None:
    """Rebalance ``gated_word_count``'s run from 2 to 3 workers and ``count`` from 2 to 4
    executors once the first sentences are out, then let the rest through: the counts are
    exact, and the run says it has the new layout."""
    wait_for(
        lambda: run.statistics()["sentences"].emitted >= 2 * FIRST,
        timeout=60,
        what="the first sentences",
    )
    said = run.rebalance(wait=10, workers=3, parallelism={"count": 4})
    assert said == "workers 2 -> 3, 'count' executors 2 -> 4"
    gate.touch()
    run.wait_until_done(60)
    run.checkpoint()
    assert counted(run.checkpoint_dir) == EXPECTED
    stats = run.statistics()
    assert len(stats.workers) == 3 and stats["count"].executors == 4
    assert run.restarts == [f"attempt 1: rebalanced: {said}"] and run.attempt == 2
    assert run.active and run.rebalancing is None and run.errors() == []
    if run.mode != "local":
        assert len(run.worker_info) == 3


@pytest.mark.parametrize("mode", MODES)
def test_a_checkpointed_word_count_rebalanced_mid_stream_counts_exactly_what_was_sent(
    tmp_path, mode
):
    gate = tmp_path / "gate"
    with MODES[mode](gated_word_count(gate)) as run:
        rebalance_word_count_mid_stream(run, gate)


@pytest.mark.slow  # (a Spark start; the same swap as the multi-process one's)
@pytest.mark.timeout(300)
def test_a_checkpointed_word_count_rebalanced_on_spark_counts_exactly_what_was_sent(tmp_path):
    from brokerless.spark import run_on_spark

    gate = tmp_path / "gate"
    topology = gated_word_count(gate).with_config(checkpoint_dir=str(tmp_path / "checkpoints"))
    with run_on_spark(topology, master="local[3]") as run:
        # an in-process master never has more task slots: refused before anything stops
        with pytest.raises(TopologyError) as refused:
            run.rebalance(workers=4)
        assert str(refused.value) == (
            "topology 'rebalanced-word-count' cannot be rebalanced to 4 workers: its Spark "
            "master 'local[3]' has 3 task slots (one barrier task per worker), and a running "
            "topology keeps its master: rebalance to at most 3 workers"
        )
        assert run.attempt == 1 and run.active
        rebalance_word_count_mid_stream(run, gate)


def acking(log_dir: Path, gate: Path, n: int = 2000) -> Topology:
    return (
        Topology("rebalanced-acking", Config(num_workers=2))
        .spout("values", partial(DurableSpout, n, str(log_dir), FIRST, str(gate)), parallelism=2)
        .bolt("relay", Relay, parallelism=2, tasks=4, inputs={"values": shuffle()})
        .bolt("sink", Sink, inputs={"relay": shuffle()})
    )


def acks(log_dir: Path) -> collections.Counter[int]:
    return collections.Counter(v for log in log_dir.glob("acked-*") for v in acked_values(log))


@pytest.mark.parametrize("mode", MODES)
def test_an_acking_topology_rebalanced_mid_stream_acks_every_tuple_once(tmp_path, mode):
    gate, n = tmp_path / "gate", 2000
    with MODES[mode](acking(tmp_path, gate, n)) as run:
        wait_for(lambda: sum(acks(tmp_path).values()) >= FIRST, timeout=60, what="acks")
        run.rebalance(wait=10, workers=1, parallelism={"relay": 4})
        gate.touch()
        run.wait_until_done(60)
        assert run.statistics()["relay"].executors == 4 and run.attempt == 2
    assert acks(tmp_path) == collections.Counter(range(n))


def counting() -> Topology:
    return (
        Topology("counting")
        .spout("numbers", Counter)
        .bolt("relay", Relay, parallelism=2, tasks=3, inputs=["numbers"])
    )


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"parallelism": {"nope": 2}}, "parallelism of 'nope': it has no such component"),
        ({"parallelism": {"relay": 4}}, "parallelism of 'relay' must be at most its tasks (3)"),
        ({"parallelism": {"relay": 0}}, "parallelism of 'relay' must be an integer >= 1, not 0"),
        ({"workers": 0}, "workers must be an integer >= 1, not 0"),
        ({"workers": 1, "parallelism": {"relay": 2}}, "changes nothing"),
        ({}, "changes nothing"),
        ({"workers": 2, "wait": -1}, "wait must be a number of seconds >= 0, not -1"),
    ],
)
def test_bad_arguments_are_refused_before_anything_stops(arguments, error):
    with run_local(counting()) as run:
        with pytest.raises(ValueError) as refused:
            run.rebalance(**arguments)
        assert error in str(refused.value)
        assert run.active and run.attempt == 1 and run.restarts == [] and not run.rebalancing
        if "tasks" in error:
            assert isinstance(refused.value, TopologyError)
            assert "declare it with tasks=N" in str(refused.value)


def test_a_rebalance_is_no_lost_attempt_keeps_the_status_and_a_stopped_run_has_none():
    with run_local(counting(), max_attempts=1) as run:
        run.deactivate()
        run.rebalance(wait=0, workers=2)
        assert not run.active  # (Storm: back to the status it had)
        run.activate()
        run.rebalance(wait=0, workers=1, parallelism={"relay": 3})
        wait_for(lambda: run.statistics()["relay"].processed, what="tuples after rebalancing")
        assert run.failure is None and run.attempt == 3 and len(run.restarts) == 2
    with pytest.raises(RuntimeError, match="has stopped: nothing to rebalance"):
        run.rebalance(workers=2)


def test_the_control_server_rebalances_and_status_shows_the_new_layout():
    with run_local(counting(), ui=True) as run:
        api, header = run.ui.url + "api/", {ACTION_HEADER: "1"}
        assert get(api + "status")["workers"] == 1
        assert refused(api + "rebalance?workers=2")[0] == 403  # (the header: as for kill)
        code, reason = refused(api + "rebalance?executors=relay=9", **header)
        assert code == 400 and "at most its tasks (3)" in reason
        assert refused(api + "rebalance?executors=relay", **header) == (
            400,
            "executors='relay': give COMPONENT=N, N the number of executors",
        )
        said = act(api + "rebalance?workers=2&executors=relay%3D3&wait=0", **header)
        assert said == {"rebalancing": "workers 1 -> 2, 'relay' executors 2 -> 3", "wait_s": 0}
        wait_for(lambda: get(api + "status")["status"] == "active" and run.attempt == 2)
        assert get(api + "status")["workers"] == 2
        topology = get(api + "topology")
        assert topology["workers"] == 2
        relay = next(c for c in topology["components"] if c["name"] == "relay")
        assert len(relay["executors"]) == 3
        stats = wait_for(lambda: (s := get(api + "stats"))["attempts"]["attempt"] == 2 and s)
        assert stats["attempts"]["restarts"] == [
            "attempt 1: rebalanced: workers 1 -> 2, 'relay' executors 2 -> 3"
        ]
        run.stop()
        assert refused(api + "rebalance?workers=1", **header)[0] == 409


def test_spouts_deactivated_during_a_rebalance_stay_so_and_the_page_cannot_toggle_them():
    # value 0 is never acked: the rebalance waits its whole wait for it
    topology = (
        Topology("held")
        .spout("numbers", ReliableCounter)
        .bolt("hold", partial(HoldValue, 0), inputs=["numbers"])
    )
    with run_local(topology, ui=True) as run:
        api, header = run.ui.url + "api/", {ACTION_HEADER: "1"}
        assert run.rebalance(wait=5, workers=2, block=False) == "workers 1 -> 2"
        assert run.rebalancing == "workers 1 -> 2" and not run.active
        assert get(api + "status")["status"] == "rebalancing"
        code, reason = refused(api + "activate", **header)
        assert code == 409 and "is being rebalanced (workers 1 -> 2)" in reason
        with pytest.raises(RuntimeError, match="is being rebalanced already"):
            run.rebalance(workers=3)
        run.deactivate()  # (a kill does so too)
        wait_for(lambda: run.attempt == 2 and run.rebalancing is None, timeout=60)
        assert not run.active and get(api + "status") == dict(
            get(api + "status"), status="inactive", workers=2
        )
