"""storm-starter's topologies, ported to brokerless.stream (examples/storm_starter/), run and
checked against what Storm's would output for the same input.

The ported spouts are bounded and deterministic, so each output is exact: computed here from
the spouts' input, independently of the bolts.  The windowed and tick-driven topologies run
in local mode until a probe bolt downstream has seen what they must output (each probe's
queue read with a timeout); the word count also runs as a user runs it, with
``brokerless stream run --workers 2``.
"""

from __future__ import annotations

import itertools
import json
import queue
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from brokerless.stream import Bolt, Topology, complete_topology, run_local
from brokerless.stream.examples import final_counts

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))

from storm_starter import (  # noqa: E402
    exclamation,
    rolling_top_words,
    single_join,
    sliding_tuple_ts,
    sliding_window,
    stateful,
    stateful_windowing,
    word_count,
)
from storm_starter.spouts import NAMES, SENTENCES, IntegerSpout  # noqa: E402

from .test_cli import BROKERLESS, ENV  # noqa: E402

pytestmark = pytest.mark.timeout(60)

#: IntegerSpout's default values, in order
VALUES = [value for value, _, _ in IntegerSpout().tuples]

_probed: queue.Queue[Any] = queue.Queue()


class Probe(Bolt):
    """Puts the first value of each tuple it gets on ``_probed`` (local mode: one process)."""

    def process(self, tup):
        _probed.put(tup[0])


def probe(topology: Topology, component: str, until: Callable[[list[Any]], bool]) -> list[Any]:
    """Run ``topology`` with a probe on ``component`` until ``until`` is true of what the
    probe saw (the first value of each tuple ``component`` emitted, in order); that."""
    while not _probed.empty():
        _probed.get_nowait()
    seen: list[Any] = []
    with run_local(topology.bolt("probe", Probe, inputs=[component])):
        while not until(seen):
            seen.append(_probed.get(timeout=20))
    return seen


def test_exclamation_topology_exclaims_every_word_twice():
    result = complete_topology(exclamation.topology)
    assert sorted(result.emitted("exclaim1")) == sorted([[w + "!!!"] for w in NAMES * 4])
    assert sorted(result.emitted("exclaim2")) == sorted([[w + "!!!!!!"] for w in NAMES * 4])
    assert result.statistics["word"].acked == 20 and result.statistics["word"].failed == 0


def test_word_count_topology_counts_every_word_in_one_task_each():
    expected = Counter(word for sentence in SENTENCES for word in sentence.split(" "))
    emitted = complete_topology(word_count.topology).emitted("count")
    # a running count per occurrence: each word's 1, 2, ... n, with n its total
    assert sorted(map(tuple, emitted)) == sorted(
        (word, i) for word, n in expected.items() for i in range(1, n + 1)
    )


def test_word_count_topology_runs_from_the_command_line_in_two_worker_processes():
    done = subprocess.run(
        [*BROKERLESS, "stream", "run", "storm_starter.word_count:topology", "--workers", "2",
         "--emitted", "count"],
        cwd=EXAMPLES, capture_output=True, env=ENV, timeout=50,
    )
    assert done.returncode == 0, done.stderr.decode()
    report = json.loads(done.stdout)
    assert report["mode"] == "multiprocess/ipc" and report["errors_total"] == 0
    expected = Counter(word for sentence in SENTENCES for word in sentence.split(" "))
    assert final_counts(report["emitted"]["count"]) == expected


@pytest.mark.parametrize("skewed", [False, True], ids=["RollingTopWords", "Skewed"])
def test_rolling_top_words_ranks_the_words_of_the_window(skewed):
    """The final ranker's rankings reach the top 3 of the window, with their counts (each
    word counted by one counter task -- skewed: by up to two, their counts summed by one
    aggregator task -- ranked by one intermediate ranker, merged by the one final ranker);
    the rankings before are empty or partial, never wrong."""
    words = ["a"] * 50 + ["b"] * 40 + ["c"] * 30 + ["d"] * 20 + ["e"]
    build = (rolling_top_words.skewed_rolling_top_words if skewed
             else rolling_top_words.rolling_top_words)
    topo = build(words, top_n=3, window_secs=3, emit_secs=1, rank_secs=0.5)
    top = [["a", 50], ["b", 40], ["c", 30]]
    seen = probe(topo, "finalRanker", lambda seen: bool(seen) and seen[-1] == top)
    for ranking in seen:
        assert ranking == sorted(ranking, key=lambda item: (-item[1], item[0]))
        assert all(count <= dict(top).get(word, 20) for word, count in ranking), seen


def test_sliding_window_topology_sums_sliding_and_averages_tumbling_count_windows():
    sums = [sum(VALUES[max(0, n - 30) : n]) for n in range(10, 101, 10)]
    averages = [sum(sums[i : i + 3]) // 3 for i in range(0, 9, 3)]
    # the last 30 tuples stay in the sliding window until they time out: not for long here
    result = complete_topology(sliding_window.topology.with_config(message_timeout_secs=1))
    assert result.emitted("slidingsum") == [[s] for s in sums]
    assert result.emitted("tumblingavg") == [[a] for a in averages]


def test_sliding_tuple_ts_topology_sums_event_time_windows_up_to_the_watermark():
    """Windows of 5 s every 3 s of the tuples' ``ts``, aligned on multiples of 3 s; with a
    lag of 5 s the watermark stops at the last ts less 5 s, so the windows ending by then
    are all that fire."""
    spout = IntegerSpout(120, interval=0.25)
    last = spout.tuples[-1][1]
    ends = range(1_000_002, int(last - 5) + 1, 3)
    expected = [sum(v for v, ts, _ in spout.tuples if end - 5 < ts <= end) for end in ends]
    assert len(expected) == 8
    seen = probe(sliding_tuple_ts.sliding_tuple_ts(), "slidingsum", lambda seen: len(seen) == 8)
    assert seen == expected


def test_single_join_example_joins_each_id_s_gender_and_age():
    """Both halves of an id meet in one of the join's two tasks (fields grouping on ``id``
    from both streams), each joined once and acked once joined."""
    result = complete_topology(single_join.topology)
    expected = [["male" if i % 2 == 0 else "female", i + 20] for i in range(10)]
    assert sorted(result.emitted("join")) == sorted(expected)
    assert result.statistics["gender"].acked == result.statistics["age"].acked == 10


def test_stateful_topology_sums_the_partial_sums():
    result = complete_topology(stateful.topology)
    partial_sums = list(itertools.accumulate(VALUES))
    assert result.emitted("partialsum") == [[s] for s in partial_sums]
    assert sorted(result.emitted("printer")) == sorted([[s] for s in partial_sums])
    # the printer's two tasks interleave: only the total's last running sum is fixed
    assert max(result.emitted("total")) == [sum(partial_sums)]


def test_stateful_windowing_topology_sums_every_window():
    windows = [VALUES[max(0, n - 5) : n] for n in range(3, 101, 3)]
    expected = list(itertools.accumulate(sum(w) for w in windows))
    topo = stateful_windowing.topology.with_config(message_timeout_secs=1)
    assert complete_topology(topo).emitted("sumbolt") == [[s] for s in expected]


def test_stream_list_shows_the_topologies_of_a_package_s_modules():
    """``brokerless stream list storm_starter`` printed nothing (and succeeded): it looked only
    at the package's own namespace.  Now it lists its modules' topologies, and says so on
    stderr when a module it was given defines none."""
    listed = subprocess.run(
        [*BROKERLESS, "stream", "list", "storm_starter", "storm_starter.spouts"],
        cwd=EXAMPLES, capture_output=True, env=ENV, timeout=50,
    )
    assert listed.returncode == 0, listed.stderr.decode()
    names = [line.split("\t")[0] for line in listed.stdout.decode().splitlines()]
    assert names == [
        f"storm_starter.{module}"
        for module in ["exclamation:topology", "rolling_top_words:topology",
                       "rolling_top_words:skewed", "single_join:topology",
                       "sliding_tuple_ts:topology", "sliding_window:topology",
                       "stateful:topology", "stateful_windowing:topology", "word_count:topology"]
    ]
    assert listed.stderr.decode() == (
        "storm_starter.spouts defines no topology (a Topology, or a streamparse Topology "
        "class, at its top level)\n"
    )
