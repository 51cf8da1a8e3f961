"""A worker's process's interpreter settings (``Config.worker_gc_threshold``,
``Config.worker_switch_interval``): set in worker processes while they run, restored after,
never changed in local mode."""

from __future__ import annotations

import gc
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction

import numpy
import pytest

from brokerless.stream import Config, Topology, TopologyError, shuffle
from brokerless.stream.interpreter import worker_interpreter
from brokerless.stream.testing import complete_topology

from .stream_topologies import ReportInterpreter, Source

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def before():
    """The process's thresholds and switch interval, put back after the test."""
    thresholds, interval = gc.get_threshold(), sys.getswitchinterval()
    yield thresholds, interval
    gc.set_threshold(*thresholds)
    sys.setswitchinterval(interval)


def test_the_settings_hold_inside_and_the_old_ones_come_back_after(before):
    thresholds, _ = before
    with worker_interpreter(thresholds[0] + 12_345, 0.0042):
        assert gc.get_threshold() == (thresholds[0] + 12_345, *thresholds[1:])
        assert sys.getswitchinterval() == pytest.approx(0.0042)
    assert (gc.get_threshold(), sys.getswitchinterval()) == before


def test_the_old_settings_come_back_when_the_body_raises(before):
    with pytest.raises(KeyError), worker_interpreter(54_321, 0.0031):
        raise KeyError("the worker failed")
    assert (gc.get_threshold(), sys.getswitchinterval()) == before


def test_none_changes_nothing(before):
    thresholds, interval = before
    changed = (thresholds[0] + 1, *thresholds[1:])  # not the defaults, to see them stay
    gc.set_threshold(*changed)
    sys.setswitchinterval(interval * 2)
    with worker_interpreter(None, None):
        assert gc.get_threshold() == changed
        assert sys.getswitchinterval() == pytest.approx(interval * 2)
    assert gc.get_threshold() == changed
    assert sys.getswitchinterval() == pytest.approx(interval * 2)


def test_each_setting_is_left_alone_when_only_the_other_is_given(before):
    thresholds, interval = before
    with worker_interpreter(None, 0.0042):
        assert gc.get_threshold() == thresholds
    with worker_interpreter(thresholds[0] + 7, None):
        assert sys.getswitchinterval() == interval


@pytest.mark.parametrize(
    "bad",
    [0, -0.001, 1e-9, 1e300, 10**400, float("inf"), float("nan"), True, "0.002", Decimal("0.002")],
)
def test_a_bad_switch_interval_is_refused_when_built(bad):
    # (sys.setswitchinterval would take 1e-9 and 1e300 and switch every microsecond, and
    # 10**400 would fail the worker at its start)
    topo = _topology(Config(worker_switch_interval=bad))
    with pytest.raises(
        TopologyError, match=r"worker_switch_interval must be None or a number of seconds from"
    ):
        topo.build()


@pytest.mark.parametrize("good", [1, 1e-6, 1e6, 0.5, numpy.float32(0.004), Fraction(1, 250)])
def test_any_real_number_of_seconds_in_range_is_taken_and_applied(good, before):
    _topology(Config(worker_switch_interval=good)).build()
    with worker_interpreter(None, good):
        assert sys.getswitchinterval() == pytest.approx(float(good))


def _topology(config: Config | None = None) -> Topology:
    return (
        Topology("interpreter", config or Config())
        .spout("values", Source)
        .bolt("report", ReportInterpreter, parallelism=2, inputs={"values": shuffle()})
    )


def _seen(result) -> set[tuple[int, float]]:
    assert result.errors == []
    assert sorted(v for v, _, _, _ in result.emitted("report")) == list(range(20))
    return {(threshold, interval) for _, threshold, interval, _ in result.emitted("report")}


def test_worker_processes_run_with_the_configured_settings():
    values = {"values": [[i] for i in range(20)]}
    assert (Config().worker_gc_threshold, Config().worker_switch_interval) == (50_000, 0.002)
    result = complete_topology(_topology(), values, mode="multiprocess", workers=2, timeout=60)
    assert _seen(result) == {(50_000, 0.002)}
    config = Config(worker_gc_threshold=None, worker_switch_interval=None)
    result = complete_topology(
        _topology(config), values, mode="multiprocess", workers=2, config=config, timeout=60
    )
    fresh = subprocess.run(
        [
            sys.executable,
            "-c",
            "import gc, sys; print(gc.get_threshold()[0], sys.getswitchinterval())",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    threshold, interval = fresh.stdout.split()
    assert _seen(result) == {(int(threshold), float(interval))}  # None: Python's own defaults


def test_local_mode_leaves_the_calling_process_alone(before):
    thresholds, interval = before
    result = complete_topology(_topology(), {"values": [[i] for i in range(20)]}, timeout=30)
    assert _seen(result) == {(thresholds[0], interval)}
    assert (gc.get_threshold(), sys.getswitchinterval()) == before
