"""The live topology UI's JSON endpoints (``/api/topology``, ``/api/stats``) and server, read
directly over HTTP; per-executor metrics; the ``ui=`` option of local and multi-process runs.
(The page itself runs in a real browser in test_stream_ui_browser.py; Spark's attempt history
in test_stream_ui_spark.py.)"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import asdict
from typing import Any

import pytest

from brokerless.stream import Bolt, Spout, Topology, fields, run_local, run_multiprocess, shuffle
from brokerless.stream.examples import SENTENCES, CountBolt, SplitBolt, word_count_topology
from brokerless.stream.ui import TopologyUI, parse_address
from brokerless.stream.ui.server import ACTION_HEADER

from .stream_topologies import wait_for


class PacedSentences(Spout):
    """Sentences forever, at most one every ``every`` seconds per task (so a test's counters
    keep moving without taking the CPU from everything else), reliably."""

    outputs = ["sentence"]

    def __init__(self, every: float = 0.005) -> None:
        self.every = every

    def open(self, conf: Any, context: Any) -> None:
        self.n = 0
        self.next_at = 0.0

    def next_tuple(self) -> None:
        now = time.monotonic()
        if now >= self.next_at:
            self.next_at = now + self.every
            self.n += 1
            self.emit([SENTENCES[self.n % len(SENTENCES)]], msg_id=self.n)


class FailEveryTenth(Bolt):
    outputs = ["word"]

    def prepare(self, conf: Any, context: Any) -> None:
        self.seen = 0

    def process(self, tup: Any) -> None:
        self.seen += 1
        if self.seen % 10 == 0:
            raise ValueError(f"sentence {self.seen} is the tenth")
        for word in tup["sentence"].split():
            self.emit([word])


def endless_word_count(split: Any = SplitBolt) -> Topology:
    return (
        Topology("live-word-count")
        .spout("sentences", PacedSentences, parallelism=2)
        .bolt("split", split, parallelism=2, inputs={"sentences": shuffle()})
        .bolt("count", CountBolt, parallelism=2, tasks=4, inputs={"split": fields("word")})
    )


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.headers["Content-Type"].startswith("application/json")
        return json.load(response)


def test_api_topology_describes_components_tasks_and_groupings():
    with run_local(word_count_topology(), ui=True) as run:
        described = get(run.ui.url + "api/topology")
    assert described["name"] == "word-count" and described["mode"] == "local"
    components = {c["name"]: c for c in described["components"]}
    assert {name: c["kind"] for name, c in components.items()} == {
        "sentences": "spout",
        "split": "bolt",
        "count": "bolt",
        "__acker": "acker",
    }
    assert components["count"]["executors"] == [
        {"executor": e, "tasks": list(run.plan.executors[e].tasks)}
        for e in run.plan.components["count"].executors
    ]
    assert [len(e["tasks"]) for e in components["count"]["executors"]] == [2, 2]
    assert components["__acker"]["system"] and not components["count"]["system"]
    assert components["sentences"]["latency"] == "complete latency"
    assert components["split"]["latency"] == "execute latency"
    assert components["split"]["streams"] == {"default": {"fields": ["word"], "direct": False}}
    assert sorted((e["source"], e["target"], e["grouping"]) for e in described["edges"]) == [
        ("sentences", "split", "shuffle()"),
        ("split", "count", "fields('word')"),
    ]


def test_api_stats_has_every_component_and_executor_and_agrees_with_statistics():
    with run_local(word_count_topology(), ui=True) as run:
        run.wait_until_done(30)
        stats = get(run.ui.url + "api/stats")
        expected = run.statistics()
    assert not stats["stopped"] and "stale" not in stats
    for name in ("sentences", "split", "count"):
        for key in ("emitted", "acked", "failed", "processed", "errors", "queue_depth_max"):
            assert stats["components"][name][key] == getattr(expected[name], key)
    assert stats["components"]["sentences"]["acked"] == len(SENTENCES)
    assert stats["components"]["sentences"]["latency_ms_mean"] > 0  # complete latency
    assert stats["components"]["split"]["latency_ms_mean"] > 0  # execute latency
    assert stats["components"]["split"]["process_latency_ms_mean"] > 0  # process latency
    assert stats["components"]["sentences"]["process_latency_ms_mean"] is None
    executors = stats["executors"]
    assert [e["executor"] for e in executors] == list(range(len(run.plan.executors)))
    for name in ("sentences", "split", "count"):
        rows = [e for e in executors if e["component"] == name]
        assert len(rows) == 2
        assert sum(e["processed"] for e in rows) == stats["components"][name]["processed"]
        assert sum(e["emitted"] for e in rows) == stats["components"][name]["emitted"]
    assert stats["workers"] == [asdict(w) for w in expected.workers]
    assert stats["attempts"]["attempt"] == 1 and stats["attempts"]["restarts"] == []
    # Storm UI's windows and capacity, per component and per executor
    for row in [*stats["components"].values(), *executors]:
        assert set(row["windows"]) == {"10m", "3h", "1d", "all-time"}
        assert row["windows"]["10m"]["processed"] == row["processed"]  # (a run of seconds)
        assert (row["capacity"] is None) == (row["kind"] != "bolt")
    # (its capacity only falls once the run is done: the same time in process, a longer span)
    assert 0 <= expected["split"].capacity <= stats["components"]["split"]["capacity"]


def test_api_stats_lists_errors_with_their_tracebacks():
    started = time.time()
    with run_local(endless_word_count(FailEveryTenth), ui=True) as run:
        url = run.ui.url + "api/stats"
        stats = wait_for(lambda: (s := get(url))["errors"] and s, timeout=30, what="an error")
    error = stats["errors"][0]
    assert started <= error["time"] <= time.time()  # when it happened, as Storm UI shows
    assert error["component"] == "split" and error["task"] in run.plan.components["split"].tasks
    assert error["error"].startswith("ValueError('sentence 10 is the tenth")
    assert "Traceback (most recent call last)" in error["traceback"]
    assert 'raise ValueError(f"sentence {self.seen} is the tenth")' in error["traceback"]
    assert stats["errors_total"] >= 1 and stats["components"]["split"]["errors"] >= 1


def test_api_stats_moves_while_the_topology_runs_and_stays_after_stop():
    with run_local(endless_word_count(), ui=True) as run:
        url = run.ui.url + "api/stats"
        first = get(url)["components"]["count"]["processed"]
        wait_for(
            lambda: get(url)["components"]["count"]["processed"] > first,
            timeout=30,
            what="the count bolt's counter to move",
        )
        run.stop()
        final = run.statistics()["count"].processed
        after = wait_for(lambda: (s := get(url))["stopped"] and s, timeout=10, what="stopped")
        assert after["components"]["count"]["processed"] == final
        url_after_stop = run.ui.url
    with pytest.raises(urllib.error.URLError):  # the with block closed the page
        urllib.request.urlopen(url_after_stop, timeout=5)


def test_a_multiprocess_run_serves_its_workers_figures():
    topology = word_count_topology()
    with run_multiprocess(topology, workers=2, ui=True) as run:
        run.wait_until_done(60)
        described = get(run.ui.url + "api/topology")
        stats = get(run.ui.url + "api/stats")
    assert described["mode"] == "multiprocess" and described["workers"] == 2
    assert stats["components"]["sentences"]["acked"] == len(SENTENCES)
    assert sorted({e["worker"] for e in stats["executors"]}) == [0, 1]
    assert [w["worker"] for w in stats["workers"]] == [0, 1]
    assert sorted(w["pid"] for w in stats["attempts"]["workers"]) == sorted(run.pids)


def test_the_page_is_served_and_nothing_else():
    with run_local(word_count_topology(), ui=True) as run:
        with urllib.request.urlopen(run.ui.url, timeout=10) as response:
            page = response.read().decode()
        assert response.headers["Content-Type"].startswith("text/html")
        assert 'fetch("api/stats"' in page and "<svg" in page
        assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")  # nothing remote
        for path in ("api/nope", "../../etc/passwd", "static/index.html"):
            with pytest.raises(urllib.error.HTTPError) as missing:
                urllib.request.urlopen(run.ui.url + path, timeout=10)
            assert missing.value.code == 404
        post = urllib.request.Request(run.ui.url + "api/stats", data=b"x", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(post, timeout=10)
        assert refused.value.code == 405
        assert get(run.ui.url + "api/stats")["components"]  # still serving


def act(url: str, **headers: str) -> Any:
    """POST ``url`` (an action of the page: api/activate, api/deactivate) with ``headers``."""
    request = urllib.request.Request(url, data=b"", method="POST", headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def test_deactivate_and_activate_as_storm_ui_does():
    with run_local(endless_word_count(), ui=True) as run:
        api = run.ui.url + "api/"
        # without the header a page of another site cannot send: refused, nothing done
        with pytest.raises(urllib.error.HTTPError) as refused:
            act(api + "deactivate")
        assert refused.value.code == 403 and run.active
        assert act(api + "deactivate", **{ACTION_HEADER: "1"}) == {"active": False}
        assert not run.active and get(api + "stats")["active"] is False
        assert act(api + "activate", **{ACTION_HEADER: "1"}) == {"active": True}
        assert run.active and get(api + "stats")["active"] is True
        run.stop()
        with pytest.raises(urllib.error.HTTPError) as stopped:
            act(api + "deactivate", **{ACTION_HEADER: "1"})
        assert stopped.value.code == 409 and b"has stopped" in stopped.value.read()


def refused(url: str, **headers: str) -> tuple[int, str]:
    """The status and reason of a POST of ``url`` that is refused."""
    with pytest.raises(urllib.error.HTTPError) as said:
        act(url, **headers)
    return said.value.code, said.value.reason


def test_kill_deactivates_now_and_says_when_the_run_stops_as_storm_ui_does():
    with run_local(endless_word_count(), ui=True, register=False) as run:
        ui, api, header = run.ui, run.ui.url + "api/", {ACTION_HEADER: "1"}
        assert get(api + "status") == {
            "name": "live-word-count",
            "status": "active",
            "workers": 1,
            "killable": False,
            "kill_in_s": None,
            "rebalancing": None,
        }
        assert refused(api + "kill")[0] == 403
        # not registered, nobody would stop it after the wait: refused, nothing done
        assert refused(api + "kill", **header) == (
            409,
            "topology 'live-word-count' was started with register=False: stop it where it runs "
            "(run.stop())",
        )
        assert run.active and not ui.killed.is_set()
        ui.killable = True  # (as `brokerless stream run` says it stops a killed run)
        for wait in ("-1", "soon", "nan", "inf"):
            assert refused(api + f"kill?wait={wait}", **header) == (
                400,
                f"wait={wait!r}: give the seconds to wait, a number >= 0",
            )
        asked = time.monotonic()
        assert act(api + "kill", **header) == {"killed": True, "wait_s": 30.0}  # the default:
        assert not run.active and ui.killed.is_set()  # the message timeout, as Storm's
        assert asked + 30 <= ui.kill_at <= time.monotonic() + 30
        status = get(api + "status")
        assert status["status"] == "killed" and 0 < status["kill_in_s"] <= 30
        assert 0 < get(api + "stats")["kill_in_s"] <= 30
        # as Storm refuses to activate (or deactivate) a killed topology
        code, reason = refused(api + "activate", **header)
        assert code == 409 and reason.startswith("topology 'live-word-count' is killed: it stops")
        assert not run.active
        assert act(api + "kill?wait=0", **header) == {"killed": True, "wait_s": 0.0}
        assert get(api + "stats")["kill_in_s"] == 0  # (a new kill's wait replaces the first)
        run.stop()
        assert get(api + "status")["status"] == "stopped"
        assert refused(api + "kill", **header) == (409, "topology 'live-word-count' has stopped")


def test_a_refusal_says_why_in_any_script():
    """The reason phrase of an HTTP status line is latin-1: a refusal naming a topology in
    another script closed the connection without an answer instead."""
    topology = Topology("单词").spout("sentences", PacedSentences)
    with run_local(topology, ui=True, register=False) as run:  # (so that a kill is refused)
        request = urllib.request.Request(
            run.ui.url + "api/kill", data=b"", method="POST", headers={ACTION_HEADER: "1"}
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 409
        said = json.load(refused.value)["error"]
        assert said.startswith("topology '单词' was started with register=False: stop it where")
        assert refused.value.reason.startswith(r"topology '\u5355\u8bcd' was started")


def test_stats_are_computed_at_most_once_per_refresh_however_many_ask():
    with run_local(endless_word_count()) as run:
        calls = []
        statistics = run.statistics
        run.statistics = lambda: calls.append(1) or statistics()  # type: ignore[method-assign]
        ui = TopologyUI(run, True, refresh=60.0)
        try:
            answers = {get(ui.url + "api/stats")["uptime_s"] for _ in range(5)}
        finally:
            ui.close()
    assert len(calls) == 1 and len(answers) == 1


def test_ui_addresses_and_mistakes():
    assert parse_address(True) == ("127.0.0.1", 0)
    assert parse_address(8080) == ("127.0.0.1", 8080)
    assert parse_address("0.0.0.0:9000") == ("0.0.0.0", 9000)
    assert parse_address(":9000") == ("127.0.0.1", 9000)
    for wrong in ("nowhere", 70000, -1, "host:port", 1.5):
        with pytest.raises(ValueError, match="use ui=True"):
            parse_address(wrong)
    with run_local(word_count_topology(), ui=True) as run:
        port = int(run.ui.url.rsplit(":", 1)[1].rstrip("/"))
        # the port is taken: the run that asked for it is stopped, the error says why
        with pytest.raises(OSError, match="Address already in use"):
            run_local(endless_word_count(), ui=port)
        assert not [t.name for t in threading.enumerate() if t.name.startswith("live-word")]
        with pytest.raises(RuntimeError, match="already has a UI"):
            run.open_ui()
