"""Starting and stopping: no thread outlives its topology, Ctrl-C stops it cleanly, and a
component that cannot start fails its tuples instead of stalling the topology."""

from __future__ import annotations

import _thread
import threading
from functools import partial

import pytest

from brokerless.stream import Config, Topology, all_, complete_topology, run_local

from .stream_topologies import BrokenPrepare, Counter, Recorder, Relay, Sink, ValueSpout, wait_for


def endless():
    return (
        Topology("endless")
        .spout("counter", Counter, parallelism=2)
        .bolt("relay", Relay, parallelism=2, inputs={"counter": all_()})
        .bolt("sink", Sink, parallelism=2, inputs={"relay": all_()})
    )


def threads_of(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(name + ":")]


@pytest.mark.parametrize("workers", [1, 2])
def test_stopping_a_busy_topology_ends_every_thread(workers):
    with run_local(endless(), workers=workers) as run:
        wait_for(lambda: run.statistics()["sink"].processed > 1000, what="tuples to flow")
        assert threads_of("endless")
    assert run.hung_threads == []
    assert threads_of("endless") == []


def test_ctrl_c_while_waiting_stops_the_topology():
    run = run_local(endless())

    def press_ctrl_c():
        wait_for(lambda: run.statistics()["sink"].processed > 100, what="tuples to flow")
        _thread.interrupt_main()

    presser = threading.Thread(target=press_ctrl_c)
    with pytest.raises(KeyboardInterrupt), run:
        presser.start()
        run.wait_until_done(timeout=30)  # endless: only Ctrl-C ends this wait
    presser.join(10)
    assert threads_of("endless") == [] and run.hung_threads == []


def test_a_bolt_that_cannot_prepare_fails_its_tuples_and_says_why():
    topo = (
        Topology("broken")
        .spout("spout", partial(ValueSpout, range(6), replay=False))
        .bolt("broken", BrokenPrepare, parallelism=2, inputs={"spout": all_()})
        .bolt("fine", Recorder, inputs={"spout": all_()})
    )
    result = complete_topology(topo, timeout=20)
    tasks = topo.build().components["broken"].tasks
    assert sorted((e.component, e.task) for e in result.errors) == [("broken", t) for t in tasks]
    assert all("no database today" in e.error and "prepare" in e.traceback
               for e in result.errors)
    assert sorted(m for (m,) in result.emitted("spout", "failed")) == list(range(6))
    assert len(result.emitted("fine")) == 6  # the rest of the topology ran


class _Fatal(BaseException):
    """Not an Exception: passes every ``except Exception``."""


class _CleanupRaises(Relay):
    def cleanup(self):
        raise _Fatal("cleanup could not finish")


class _CleanupRecords(Sink):
    def __init__(self, cleaned):
        self.cleaned = cleaned

    def cleanup(self):
        self.cleaned.append("sink")


@pytest.mark.parametrize("threads", ["shared", "per_executor"])
def test_a_cleanup_that_raises_past_exception_leaves_the_others_to_close(threads):
    cleaned = []
    topo = (
        Topology("fatal", Config(executor_threads=threads))
        .spout("counter", Counter)
        .bolt("relay", _CleanupRaises, inputs={"counter": all_()})
        .bolt("sink", partial(_CleanupRecords, cleaned), inputs={"relay": all_()})
    )
    with run_local(topo) as run:
        wait_for(lambda: run.statistics()["sink"].processed > 100, what="tuples to flow")
    assert cleaned == ["sink"]
    assert run.hung_threads == []
    assert threads_of("fatal") == []
    assert any("cleanup could not finish" in e.error for e in run.errors())
