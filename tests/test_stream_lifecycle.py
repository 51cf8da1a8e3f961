"""Starting and stopping: no thread outlives its topology, Ctrl-C stops it cleanly, and a
component that cannot start is started again, its tuples waiting for it."""

from __future__ import annotations

import _thread
import threading
from functools import partial

import pytest

from brokerless.stream import (
    Bolt,
    Config,
    Spout,
    Topology,
    TopologyError,
    all_,
    complete_topology,
    run_local,
    shuffle,
)

from .stream_topologies import (
    BrokenPrepare,
    Counter,
    GatedValueSpout,
    NotYet,
    OpenNotYet,
    PausableCounter,
    PrepareNotYet,
    Recorder,
    Relay,
    Sink,
    TickReporter,
    ValueSpout,
    wait_for,
)


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


@pytest.mark.parametrize("threads", ["shared", "per_executor"])
def test_a_bolt_that_cannot_prepare_yet_is_started_again_and_its_tuples_wait(threads):
    """As Storm restarts a worker whose component died, a task whose ``prepare`` raises is
    started again (a new instance, after a back-off) and gets the tuples sent to it meanwhile.
    Before, it stayed broken and failed every tuple at once: a spout that replays its failures
    spun (a million ``fail`` calls in 3 s) and nothing got through."""
    service = NotYet(times=2)
    topo = (
        Topology("not-yet")
        .spout("spout", partial(ValueSpout, range(6)))
        .bolt("flaky", partial(PrepareNotYet, service), parallelism=2, inputs={"spout": all_()})
        .bolt("fine", Recorder, inputs={"spout": all_()})
    )
    result = complete_topology(topo, config=Config(executor_threads=threads), timeout=30)
    tasks = topo.build().components["flaky"].tasks
    assert service.calls == {task: 3 for task in tasks}  # two failures each, then started
    assert sorted((e.component, e.task) for e in result.errors) == sorted(
        ("flaky", t) for t in tasks for _ in range(2)
    )
    assert all("not up yet" in e.error and "prepare" in e.traceback for e in result.errors)
    assert result.emitted("spout", "failed") == []
    for task in tasks:
        assert sorted(v for t, _, (v,) in result.emitted("flaky") if t == task) == list(range(6))
    assert len(result.emitted("fine")) == 6


def test_a_spout_that_cannot_open_yet_is_started_again_and_the_run_waits_for_it():
    """A spout task whose ``open`` raises is started again; until it is, the run is not done.
    Before, it was dropped: a finite run ``completed`` at once with none of its input read."""
    service = NotYet(times=1)
    topo = (
        Topology("not-yet")
        .spout("spout", partial(OpenNotYet, service, range(10)), parallelism=2)
        .bolt("sink", Recorder, inputs={"spout": all_()})
    )
    result = complete_topology(topo, timeout=30)
    assert len(service.calls) == 2 and set(service.calls.values()) == {2}
    assert [e.component for e in result.errors] == ["spout", "spout"]
    assert sorted(v for _, _, (v,) in result.emitted("sink")) == list(range(10))


def test_a_task_that_never_starts_keeps_the_run_unfinished_and_says_why():
    """A component that can never start is tried again and again (each failure reported),
    and the run never looks finished: waiting for it times out, naming the error."""
    topo = (
        Topology("broken")
        .spout("spout", partial(ValueSpout, range(6)))
        .bolt("broken", BrokenPrepare, inputs={"spout": all_()})
    )
    with run_local(topo, capture=True) as run:
        with pytest.raises(TimeoutError, match="no database today"):
            run.wait_until_done(timeout=2.5)  # attempts at 0, 1 and 3 s: two by then
        assert len(run.errors()) >= 2
        assert run.statistics()["spout"].failed == 0  # its tuples wait


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


class _Idle(Spout):
    """Emits nothing, and records its life in ``events`` (``activate`` and ``deactivate``
    around ``next_tuple``)."""

    outputs = ["value"]

    def __init__(self, events):
        self.events = events

    def open(self, conf, context):
        self.events.append("open")

    def activate(self):
        self.events.append("activate")

    def next_tuple(self):
        if self.events[-1] != "next_tuple":
            self.events.append("next_tuple")

    def deactivate(self):
        self.events.append("deactivate")

    def close(self):
        self.events.append("close")


class _Ticked(Bolt):
    """Records each tick tuple it gets as (component, stream, rate, task) in ``ticks``."""

    outputs = ["value"]

    def __init__(self, ticks):
        self.ticks = ticks

    def prepare(self, conf, context):
        self.task = context.task_id

    def process_tick(self, tup):
        self.ticks.append((tup.component, tup.stream, tup["rate_secs"], self.task))


def test_a_spout_is_activated_before_its_first_next_tuple_and_deactivated_before_close():
    """Storm's ISpout.activate/deactivate: called once the topology is active (before
    ``next_tuple``) and when it is deactivated (``storm kill`` deactivates first).  brokerless
    had neither."""
    events = []
    topo = Topology("idle").spout("spout", partial(_Idle, events))
    with run_local(topo):
        wait_for(lambda: "next_tuple" in events, what="next_tuple")
    assert events == ["open", "activate", "next_tuple", "deactivate", "close"]


@pytest.mark.parametrize("threads", ["shared", "per_executor"])
def test_bolts_get_tick_tuples_at_their_frequency_even_with_no_input(threads):
    """Storm's tick tuples (``topology.tick.tuple.freq.secs``, and a component's own): from
    ``__system`` on ``__tick``, in ``process_tick``, also while no tuple comes.  brokerless
    had none."""
    events, ticks = [], []
    topo = (
        Topology("ticks", Config(tick_tuple_freq_secs=0.05, executor_threads=threads))
        .spout("spout", partial(_Idle, events))
        .bolt("default", partial(_Ticked, ticks), parallelism=2, inputs={"spout": all_()})
        .bolt("own", partial(_Ticked, ticks), inputs={"spout": all_()}, tick_tuple_freq_secs=0.02)
    )
    plan = topo.build()
    (own,) = plan.components["own"].tasks
    bolts = {*plan.components["default"].tasks, own}
    with run_local(topo):
        wait_for(lambda: {task for *_, task in ticks} == bolts, what="ticks to every task")
        wait_for(lambda: sum(t == own for *_, t in ticks) >= 5, what="five ticks")
    rates = {task: rate for _, _, rate, task in ticks}
    assert {(c, s) for c, s, _, _ in ticks} == {("__system", "__tick")}
    assert [rates[t] for t in plan.components["default"].tasks] == [0.05, 0.05]
    assert [rates[t] for t in plan.components["own"].tasks] == [0.02]
    assert Topology("none").spout("s", Counter).bolt("b", Sink, inputs=["s"]).build().components[
        "b"
    ].tick_secs is None


class _OwnTicks(Sink):
    """Sets its own tick frequency, as a Storm bolt's ``getComponentConfiguration`` does."""

    tick_tuple_freq_secs = 0.5


class _TicksFromInit(Sink):
    def __init__(self, emit_secs):
        self.tick_tuple_freq_secs = emit_secs


def test_a_bolt_sets_its_own_tick_frequency_and_its_declaration_overrides_it():
    """Storm's ``RollingCountBolt`` sets ``topology.tick.tuple.freq.secs`` in its
    ``getComponentConfiguration`` from its constructor's arguments; here a bolt's
    ``tick_tuple_freq_secs`` (class or instance attribute) is its own, over the topology's,
    and ``.bolt(..., tick_tuple_freq_secs=)`` overrides it, as Storm's ``addConfiguration``
    does.  brokerless ignored the attribute: such a bolt got no tick tuples."""
    topo = (
        Topology("own-ticks", Config(tick_tuple_freq_secs=5))
        .spout("s", Counter)
        .bolt("class", _OwnTicks, inputs=["s"])
        .bolt("init", partial(_TicksFromInit, 0.25), inputs=["s"])
        .bolt("declared", _OwnTicks, inputs=["s"], tick_tuple_freq_secs=2)
        .bolt("topology", Sink, inputs=["s"])
    )
    ticks = {n: c.tick_secs for n, c in topo.build().components.items() if c.kind == "bolt"}
    assert ticks == {"class": 0.5, "init": 0.25, "declared": 2, "topology": 5}
    bad = Topology("t").spout("s", Counter).bolt("b", partial(_TicksFromInit, 0), inputs=["s"])
    with pytest.raises(TopologyError, match="bolt 'b': its tick_tuple_freq_secs must be None or"):
        bad.build()


@pytest.mark.parametrize("rate", [0, -1, "5", True])
def test_a_tick_frequency_that_is_not_a_positive_number_is_refused(rate):
    with pytest.raises(TopologyError, match="tick_tuple_freq_secs must be None or a number"):
        Topology("t").spout("s", Counter).bolt(
            "b", Sink, inputs=["s"], tick_tuple_freq_secs=rate
        ).build()
    with pytest.raises(TopologyError, match="tick_tuple_freq_secs must be None or a number"):
        Topology("t", Config(tick_tuple_freq_secs=rate)).spout("s", Counter).build()


@pytest.mark.parametrize("mode", ["local", "multiprocess"])
def test_a_deactivated_topology_emits_nothing_until_it_is_activated(mode):
    """Storm's ``storm deactivate``/``activate``: ``run.deactivate()`` stops every spout's
    ``next_tuple`` (each gets ``deactivate()``) while the rest goes on; ``run.activate()``
    starts them again.  brokerless had neither."""
    from brokerless.stream import run_multiprocess

    topo = (
        Topology("pausable", Config(num_workers=2))
        .spout("spout", PausableCounter)
        .bolt("ticks", TickReporter, inputs={("spout", "life"): all_()}, tick_tuple_freq_secs=0.02)
    )
    run = run_local(topo, capture=True) if mode == "local" else run_multiprocess(topo, capture=True)

    def seen():
        return [(stream, values[0]) for c, stream, values in run.captured() if c != "ticks"]

    def ticks():
        return sum(c == "ticks" for c, _, _ in run.captured())

    with run:
        wait_for(lambda: len(seen()) > 5, timeout=30, what="values")
        run.deactivate()
        wait_for(lambda: ("life", "deactivate") in seen(), what="deactivate()")
        since = ticks()
        wait_for(lambda: ticks() >= since + 10, what="ten ticks while deactivated")
        events = seen()
        paused = events[events.index(("life", "deactivate")) + 1 :]
        assert paused == [], "emitted while deactivated"
        assert run.statistics()["spout"].emitted == len(events)
        run.activate()
        wait_for(lambda: seen()[len(events) :][:1] == [("life", "activate")], what="activate()")
        wait_for(lambda: len(seen()) > len(events) + 3, what="values again")
        assert run.active


class _Logs(Bolt):
    """Logs each input through streamparse's ``self.logger`` and ``self.log``."""

    def process(self, tup):
        self.logger.info("got %s", tup[0])
        self.log(f"warned {tup[0]}", level="warn")


def test_components_log_through_a_logger_of_their_own(caplog):
    """streamparse's ``self.logger`` and ``self.log(message, level)``: a logger named after
    the topology and the component.  brokerless had neither (AttributeError)."""
    topology = (
        Topology("logs")
        .spout("values", partial(ValueSpout, ["a", "b"]))
        .bolt("say", _Logs, inputs=["values"])
    )
    with caplog.at_level("INFO", logger="brokerless.stream.logs"):
        complete_topology(topology)
    said = sorted(
        (r.name, r.levelname, r.getMessage()) for r in caplog.records if r.name.endswith(".say")
    )
    assert said == [
        ("brokerless.stream.logs.say", "INFO", "got a"),
        ("brokerless.stream.logs.say", "INFO", "got b"),
        ("brokerless.stream.logs.say", "WARNING", "warned a"),
        ("brokerless.stream.logs.say", "WARNING", "warned b"),
    ]
    with pytest.raises(ValueError, match="level must be one of"):
        _Logs().log("x", level="loud")
    with pytest.raises(RuntimeError, match="needs a running topology"):
        _Logs().logger  # noqa: B018


def test_a_plain_local_run_that_loses_a_worker_starts_its_workers_again(tmp_path):
    """As in multi-process mode (and as Storm's supervisor does): the run starts a new set of
    workers, the spouts opening again, and finishes.  Before, ``kill_worker`` refused a
    topology without stateful bolts ("it cannot recover from a lost worker")."""
    gate = tmp_path / "gate"  # the spout stops at 100 tuples until it exists
    topology = (
        Topology("plain", Config(num_workers=2))
        .spout("values", partial(GatedValueSpout, range(1000), 100, str(gate)))
        .bolt("sink", Recorder, parallelism=2, inputs={"values": shuffle()})
    )
    with run_local(topology, capture=True) as run:
        wait_for(lambda: run.statistics()["sink"].processed >= 100, what="the first tuples")
        run.kill_worker(1)
        gate.touch()
        run.wait_until_done(30)
        assert run.attempt == 2 and run.restarts == ["attempt 1: worker 1: killed (kill_worker)"]
        got = sorted(v[2][0] for c, s, v in run.captured() if (c, s) == ("sink", "default"))
    assert got == list(range(1000))  # the new attempt's, each once
