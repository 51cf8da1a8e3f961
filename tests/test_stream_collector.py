"""The garbage collector's pace in a worker's process (``Config.worker_gc_threshold``): set in
worker processes while they run, restored after, never changed in local mode."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from brokerless.stream import Config, Topology, shuffle
from brokerless.stream.collector import collector_threshold
from brokerless.stream.testing import complete_topology

from .stream_topologies import ReportCollector, Source

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def thresholds():
    before = gc.get_threshold()
    yield before
    gc.set_threshold(*before)


def test_the_threshold_holds_inside_and_the_old_ones_come_back_after(thresholds):
    with collector_threshold(thresholds[0] + 12_345):
        assert gc.get_threshold() == (thresholds[0] + 12_345, *thresholds[1:])
    assert gc.get_threshold() == thresholds


def test_the_old_thresholds_come_back_when_the_body_raises(thresholds):
    with pytest.raises(KeyError), collector_threshold(54_321):
        raise KeyError("the worker failed")
    assert gc.get_threshold() == thresholds


def test_none_changes_nothing(thresholds):
    gc.set_threshold(thresholds[0] + 1, *thresholds[1:])  # not the default, to see it stay
    with collector_threshold(None):
        assert gc.get_threshold() == (thresholds[0] + 1, *thresholds[1:])
    assert gc.get_threshold() == (thresholds[0] + 1, *thresholds[1:])


def _topology(config: Config | None = None) -> Topology:
    return (
        Topology("collector", config or Config())
        .spout("values", Source)
        .bolt("report", ReportCollector, parallelism=2, inputs={"values": shuffle()})
    )


def _seen(result) -> set[int]:
    assert result.errors == []
    assert sorted(v for v, _, _ in result.emitted("report")) == list(range(20))
    return {threshold for _, threshold, _ in result.emitted("report")}


def test_worker_processes_run_at_the_configured_threshold():
    values = {"values": [[i] for i in range(20)]}
    assert Config().worker_gc_threshold == 50_000  # the default
    result = complete_topology(_topology(), values, mode="multiprocess", workers=2, timeout=60)
    assert _seen(result) == {50_000}
    config = Config(worker_gc_threshold=None)
    result = complete_topology(
        _topology(config), values, mode="multiprocess", workers=2, config=config, timeout=60
    )
    fresh = subprocess.run(
        [sys.executable, "-c", "import gc; print(gc.get_threshold()[0])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert _seen(result) == {int(fresh.stdout)}  # None: Python's own default


def test_local_mode_leaves_the_calling_process_alone(thresholds):
    result = complete_topology(_topology(), {"values": [[i] for i in range(20)]}, timeout=30)
    assert _seen(result) == {thresholds[0]}
    assert gc.get_threshold() == thresholds
