"""``brokerless stream monitor NAME``: Storm's ``storm monitor`` against real runs of
``brokerless stream run`` (found by name, read over their control server)."""

from __future__ import annotations

import pytest

from .stream_topologies import wait_for
from .test_cli import brokerless, finish, interrupt, started
from .test_cli_stream import control, listed

HEADER = "topology\tcomponent\tparallelism\ttime-diff ms\t{}\tthroughput (Kt/s)"


def rows(lines: list[str]) -> list[tuple[str, str, int, int, int, float]]:
    """The figure lines, typed; each line's throughput must be its count over its time."""
    typed = []
    for line in lines:
        topology, component, parallelism, ms, count, rate = line.split("\t")
        assert float(rate) == pytest.approx(int(count) / int(ms), abs=5e-4), line
        typed.append((topology, component, int(parallelism), int(ms), int(count), float(rate)))
    return typed


@pytest.mark.timeout(120)
def test_monitor_prints_each_components_throughput_every_interval_and_knows_its_components():
    with started("stream", "run", "tests.test_cli_stream:endless", "--local") as run:
        wait_for(lambda: listed("endless"), timeout=60, what="ps to list the run")
        done = brokerless("stream", "monitor", "endless", "-i", "0.5", "-n", "3")
        assert done.returncode == 0, done.stderr.decode()
        header, *lines = done.stdout.decode().splitlines()
        assert header == HEADER.format("emitted")
        figures = rows(lines)
        # a line per spout and bolt (not the acker) in each of the 3 rounds, in order
        assert [(t, c, p) for t, c, p, *_ in figures] == [
            ("endless", "counter", 1),
            ("endless", "sink", 1),
        ] * 3
        # each round's figures newer than the round before's: a run takes them at most every
        # 0.5 s, so no two are closer than that
        assert all(ms >= 499 for _, _, _, ms, _, _ in figures)
        assert sum(count for _, c, _, _, count, _ in figures if c == "counter") > 0
        one = brokerless(
            "stream",
            "monitor",
            "endless",
            "-m",
            "sink",
            "-w",
            "transferred",
            "-i",
            "0.5",
            "-n",
            "1",
        )
        assert one.returncode == 0, one.stderr.decode()
        header, line = one.stdout.decode().splitlines()
        assert header == HEADER.format("transferred") and rows([line])[0][:3] == (
            "endless",
            "sink",
            1,
        )
        lacking = brokerless("stream", "monitor", "endless", "-m", "nope")
        assert (lacking.returncode, lacking.stdout) == (1, b"")
        assert lacking.stderr == (
            b"Error: the topology has no component 'nope' (its components: counter, sink)\n"
        )
        interrupt(run)
    gone = brokerless("stream", "monitor", "endless")
    assert (gone.returncode, gone.stderr) == (
        1,
        b"Error: no topology named 'endless' is running (running: none)\n",
    )


@pytest.mark.timeout(120)
def test_monitor_ends_with_the_run_and_on_ctrl_c():
    with started("stream", "run", "tests.test_cli_stream:endless", "--local") as run:
        wait_for(lambda: listed("endless"), timeout=60, what="ps to list the run")
        with started("stream", "monitor", "endless", "-m", "counter", "-i", "0.5") as first:
            assert first.stdout.readline().decode() == HEADER.format("emitted") + "\n"
            rows([first.stdout.readline().decode().rstrip("\n")])
            interrupt(first)  # Ctrl-C: status 130, no traceback
        with started("stream", "monitor", "endless", "-m", "counter", "-i", "0.5") as second:
            assert second.stdout.readline().decode() == HEADER.format("emitted") + "\n"
            rows([second.stdout.readline().decode().rstrip("\n")])
            control("kill", "endless", "-w", "0")
            out, err = finish(second)
            assert second.returncode == 0, err.decode()
            assert out.decode().endswith("topology 'endless' has stopped\n")
        finish(run)
    assert run.returncode == 0
