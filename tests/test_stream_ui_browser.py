"""The topology UI in a real headless Chromium: the page loads, draws a running word count's
components and groupings, and its counters move.

The browser is Debian's ``chromium`` driven through ``chromedriver`` (``chromium-driver``) over
the W3C WebDriver protocol: plain HTTP and JSON, spoken here with urllib -- no client library,
nothing fetched from the network.  CI installs both (``.ci/run``) and sets
``BROKERLESS_REQUIRE_BROWSER=1``, which turns a missing browser into a failure; elsewhere this
module is not collected when they are not installed (see ``tests/conftest.py``).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from brokerless.stream import Bolt, Config, Topology, run_local, shuffle
from brokerless.stream.errorlog import KEEP
from brokerless.stream.examples import SENTENCES, word_count_topology

from .browser import CHROMEDRIVER, CHROMIUM, requirements_missing
from .stream_topologies import Counter, TicklessCount, ValueSpout, Waits, wait_for
from .test_cli import finish, started
from .test_stream_metrics import CountsVowels
from .test_stream_ui import endless_word_count

#: From the machine notes: no sandbox (root), no GPU, and nothing that reaches the network.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


class WebDriver:
    """Just enough of a W3C WebDriver client: a session, navigation, scripts."""

    def __init__(self, chromedriver: str, chromium: str, profile: str) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.base = f"http://127.0.0.1:{port}"
        self.process = subprocess.Popen(
            [chromedriver, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_for(self._ready, timeout=30, what="chromedriver to listen")
        options = {"binary": chromium, "args": [*FLAGS, f"--user-data-dir={profile}"]}
        created = self._call(
            "POST",
            "/session",
            {"capabilities": {"alwaysMatch": {"goog:chromeOptions": options}}},
        )
        self.session = f"/session/{created['sessionId']}"

    def _ready(self) -> bool:
        try:
            return bool(self._call("GET", "/status")["ready"])
        except OSError:
            return False

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.load(response)["value"]
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"WebDriver {method} {path}: {exc.read().decode()}") from None

    def get(self, url: str) -> None:
        self._call("POST", f"{self.session}/url", {"url": url})

    def script(self, source: str) -> Any:
        return self._call("POST", f"{self.session}/execute/sync", {"script": source, "args": []})

    def quit(self) -> None:
        try:
            self._call("DELETE", self.session)
        finally:
            self.process.terminate()
            self.process.wait(10)


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    missing = requirements_missing()
    if missing:  # collected only when BROKERLESS_REQUIRE_BROWSER=1 (tests/conftest.py)
        pytest.fail(f"BROKERLESS_REQUIRE_BROWSER=1 but {missing}")
    with tempfile.TemporaryDirectory(prefix="brokerless-chromium-") as profile:
        driver = WebDriver(CHROMEDRIVER, CHROMIUM, profile)
        try:
            yield driver
        finally:
            driver.quit()


COMPONENT_ROWS = """
return [...document.querySelectorAll('#components tbody tr')].map(tr => tr.dataset.key);
"""
GRAPH = """
return {
  nodes: [...document.querySelectorAll('#graph .node')].map(g => g.dataset.component),
  edges: [...document.querySelectorAll('#graph .edge text')].map(t => t.textContent),
  state: document.getElementById('state').textContent,
  title: document.getElementById('name').textContent,
};
"""
EXECUTED = """
const cell = document.querySelector('#components tr[data-key="count"] td[data-field="processed"]');
return cell ? Number(cell.dataset.value) : null;
"""
NODE_TEXT = """
return document.querySelector('#graph .node[data-component="count"] .counts').textContent;
"""


@pytest.mark.timeout(120)
def test_the_page_shows_a_running_word_count_and_its_counters_move(browser):
    with run_local(endless_word_count(), workers=2, ui=True) as run:
        browser.get(run.ui.url + "?interval=200")
        rows = wait_for(
            lambda: browser.script(COMPONENT_ROWS), timeout=30, what="the components table"
        )
        assert rows == ["sentences", "split", "count"]  # the acker only on request
        graph = browser.script(GRAPH)
        assert graph["title"] == "live-word-count" and graph["state"] == "running"
        assert sorted(graph["nodes"]) == ["count", "sentences", "split"]
        assert sorted(graph["edges"]) == ["fields('word')", "shuffle()"]
        first = wait_for(lambda: browser.script(EXECUTED), timeout=30, what="a count")
        wait_for(
            lambda: browser.script(EXECUTED) > first,
            timeout=30,
            what="the page's count of executed tuples to grow",
        )
        assert browser.script(NODE_TEXT).startswith("emitted ")
        run.stop()
        wait_for(
            lambda: browser.script(GRAPH)["state"] == "stopped",
            timeout=30,
            what="the page to say the run stopped",
        )


CONFIG = """
return Object.fromEntries([...document.querySelectorAll('#config tbody tr')]
  .map(tr => [tr.dataset.key, tr.cells[1].textContent]));
"""


@pytest.mark.timeout(120)
def test_the_page_shows_the_topologys_configuration(browser):
    topology = endless_word_count()
    with run_local(topology, ui=True, config=Config(max_spout_pending=50)) as run:
        browser.get(run.ui.url)
        shown = wait_for(lambda: browser.script(CONFIG), timeout=30, what="the configuration")
        assert shown == {
            "num_workers": "1",
            "num_ackers": "—",  # (None: one per worker)
            "max_spout_pending": "50",
            "message_timeout_secs": "30",
            "executor_queue_size": "4,096",
            "executor_batch_size": "64",
        }


STATE = "return document.getElementById('state').textContent;"
TOGGLE = "document.getElementById('toggle').click();"


@pytest.mark.timeout(120)
def test_the_page_deactivates_and_activates_the_topology(browser):
    with run_local(endless_word_count(), ui=True) as run:
        browser.get(run.ui.url + "?interval=200")
        wait_for(lambda: browser.script(STATE) == "running", timeout=30, what="running")
        browser.script(TOGGLE)
        wait_for(lambda: not run.active, timeout=30, what="the button to deactivate the run")
        wait_for(lambda: browser.script(STATE) == "inactive", timeout=30, what="inactive")
        browser.script(TOGGLE)
        wait_for(lambda: run.active, timeout=30, what="the button to activate the run")
        wait_for(lambda: browser.script(STATE) == "running", timeout=30, what="running again")
        # registered, a run started from Python takes a kill (`brokerless stream kill` too)
        assert browser.script("return document.getElementById('kill').hidden") is False
    with run_local(endless_word_count(), ui=True, register=False) as run:
        browser.get(run.ui.url + "?interval=200")
        wait_for(lambda: browser.script(STATE) == "running", timeout=30, what="running")
        # not registered, it is stopped where it runs: no Kill button
        assert browser.script("return document.getElementById('kill').hidden") is True


KILL = "setTimeout(() => document.getElementById('kill').click());"  # (the prompt would block)


def prompt_text(browser: WebDriver) -> str | None:
    """The text of the dialog the page opened, or None while there is none."""
    try:
        return str(browser._call("GET", f"{browser.session}/alert/text"))
    except AssertionError:  # "no such alert"
        return None


@pytest.mark.timeout(120)
def test_the_kill_button_asks_for_the_wait_and_kills_the_run_as_storm_ui_does(browser):
    with started("stream", "run", "tests.test_cli_stream:slow", "--local", "--ui=0") as process:
        assert process.stderr is not None
        process.stderr.readline()  # (the spouts never say they are exhausted)
        url = process.stderr.readline().decode().split()[2]
        browser.get(url + "?interval=200")
        wait_for(lambda: browser.script(STATE) == "running", timeout=30, what="running")
        assert browser.script("return document.getElementById('kill').hidden") is False
        browser.script(KILL)
        asked = wait_for(lambda: prompt_text(browser), timeout=30, what="the kill dialog")
        assert asked.startswith("Do you really want to kill topology slow? If so, give the ")
        browser._call("POST", f"{browser.session}/alert/text", {"text": "2"})
        browser._call("POST", f"{browser.session}/alert/accept", {})
        wait_for(
            lambda: browser.script(STATE).startswith("killed: stops in "),
            timeout=30,
            what="the page to say the run is killed",
        )
        assert browser.script("return document.getElementById('kill').disabled") is True
        out, err = finish(process)
    assert process.returncode == 0, err.decode()
    report = json.loads(out)
    assert report["killed"] and report["seconds"] >= 2
    spout = report["statistics"]["components"]["counter"]
    assert spout["emitted"] and spout["acked"] == spout["emitted"] and not spout["failed"]


REBALANCE = "setTimeout(() => document.getElementById('rebalance').click());"
MODE = "return document.getElementById('mode').textContent;"


def answer_prompt(browser: WebDriver, starts: str, text: str) -> str:
    """Wait for the page's dialog that starts with ``starts``, answer ``text``; its text."""
    asked = wait_for(
        lambda: (said := prompt_text(browser)) is not None and said.startswith(starts) and said,
        timeout=30,
        what=f"the dialog {starts!r}",
    )
    browser._call("POST", f"{browser.session}/alert/text", {"text": text})
    browser._call("POST", f"{browser.session}/alert/accept", {})
    return str(asked)


@pytest.mark.timeout(120)
def test_the_rebalance_button_asks_for_workers_and_wait_and_the_page_shows_the_new_layout(
    browser,
):
    with run_local(endless_word_count(), ui=True) as run:
        browser.get(run.ui.url + "?interval=200")
        wait_for(lambda: browser.script(STATE) == "running", timeout=30, what="running")
        assert browser.script(MODE) == "local, 1 worker"
        browser.script(REBALANCE)
        assert answer_prompt(browser, "Rebalance", "2") == (
            "Rebalance topology live-word-count on how many workers?"
        )
        answer_prompt(browser, "Wait up to how many seconds", "0")
        wait_for(lambda: browser.script(MODE) == "local, 2 workers", timeout=30, what="2 workers")
        assert run.restarts == ["attempt 1: rebalanced: workers 1 -> 2"]
        wait_for(lambda: browser.script(STATE) == "running", timeout=30, what="running again")
        assert run.active


CROSS_SITE = """
window.settled = 0;
const tries = [{mode: "no-cors", headers: {}}, {mode: "cors", headers: {"X-Brokerless-UI": "1"}}];
for (const {mode, headers} of tries) {  // a form's post; the page's own request
  fetch(arguments[0], {method: "POST", mode, headers}).finally(() => { window.settled += 1; });
}
"""


@pytest.mark.timeout(120)
def test_a_page_of_another_site_cannot_deactivate_the_topology(browser):
    with run_local(endless_word_count(), ui=True) as run:
        with run_local(word_count_topology(), ui=True) as other:
            browser.get(other.ui.url)  # another origin: another port
            browser._call(
                "POST",
                f"{browser.session}/execute/sync",
                {"script": CROSS_SITE, "args": [run.ui.url + "api/deactivate"]},
            )
            wait_for(lambda: browser.script("return window.settled") == 2, timeout=30)
        assert run.active


class AlwaysRaises(Bolt):
    def process(self, tup: Any) -> None:
        raise ValueError(f"cannot take {tup[0]}")


ERRORS_SHOWN = """
return [document.getElementById('errors-total').textContent.replaceAll(',', ''),
        [...document.querySelectorAll('#errors summary')].map(s => s.textContent)];
"""
COUNTS = re.compile(r"\((?P<counted>\d+); listed: the latest (?P<listed>\d+)\)")


@pytest.mark.timeout(120)
def test_the_errors_listed_are_the_latest_and_the_count_is_every_error(browser):
    # a worker kept the reports of its first errors only: the page listed those for ever
    topology = (
        Topology("raising")
        .spout("counter", Counter)
        .bolt("raises", AlwaysRaises, inputs={"counter": shuffle()})
    )
    with run_local(topology, ui=True) as run:
        browser.get(run.ui.url + "?interval=200")
        wait_for(lambda: run.errors().total > 2 * KEEP, timeout=60, what="errors")
        run.deactivate()  # the errors stop coming; the page catches up with them

        def said() -> tuple[re.Match[str], list[str]] | None:
            total, summaries = browser.script(ERRORS_SHOWN)
            shown, errors = COUNTS.fullmatch(total), run.errors()
            if shown and int(shown["counted"]) == errors.total and summaries:
                latest_first = summaries[0].endswith(errors[-1].error)
                return (shown, summaries) if latest_first else None
            return None

        shown, summaries = wait_for(said, timeout=60, what="the latest errors listed")
    assert int(shown["listed"]) == len(summaries) == KEEP < int(shown["counted"])
    assert f"(worker 0, pid {os.getpid()} on {socket.gethostname()}): " in summaries[0]


HEADINGS = """
return Object.fromEntries(['components', 'executors', 'workers'].map(id => [id,
  [...document.querySelectorAll(`#${id} thead th`)].map(th => th.textContent)]));
"""


@pytest.mark.timeout(120)
def test_the_columns_say_their_units(browser):
    with run_local(word_count_topology(), ui=True) as run:
        browser.get(run.ui.url)
        headings = wait_for(
            lambda: all((h := browser.script(HEADINGS)).values()) and h,
            timeout=30,
            what="the tables",
        )
    for table in ("components", "executors"):
        assert {"latency mean (ms)", "latency p99 (ms)"} <= set(headings[table])
        assert {"process latency mean (ms)", "process latency p99 (ms)"} <= set(headings[table])
    assert {"tuples sent", "tuples received"} <= set(headings["workers"])


@pytest.mark.timeout(120)
def test_the_system_components_box_shows_the_ackers_at_once(browser):
    with run_local(endless_word_count(), ui=True) as run:
        browser.get(run.ui.url + "?interval=3600000")  # (one poll: the box must redraw itself)
        wait_for(lambda: browser.script(COMPONENT_ROWS), timeout=30, what="the components table")
        browser.script("document.getElementById('system').click();")
        assert browser.script(COMPONENT_ROWS) == ["sentences", "split", "count", "__acker"]
        browser.script("document.getElementById('system').click();")
        assert browser.script(COMPONENT_ROWS) == ["sentences", "split", "count"]


OVERFLOW = """
return [...document.querySelectorAll('#graph .node')].flatMap(node => {
  const width = Number(node.querySelector('rect').getAttribute('width'));
  return [...node.querySelectorAll('text')]
    .filter(text => text.getComputedTextLength() > width - 16)
    .map(text => text.textContent);
});
"""


@pytest.mark.timeout(120)
def test_the_graphs_figures_fit_in_their_boxes(browser):
    with run_local(endless_word_count(), ui=True) as run:
        browser.get(run.ui.url + "?interval=200")
        wait_for(lambda: browser.script(EXECUTED), timeout=30, what="the figures")
        # the longest figures: six characters each ("999.9k"), a latency of five digits
        browser.script(
            "updateGraph({components: Object.fromEntries(topology.components.map(c => [c.name, "
            "{kind: c.kind, emitted: 999900, acked: 999900, failed: 999900, processed: 999900,"
            " queue_depth: 9999, latency_ms_mean: 99999.99}]))});"
        )
        assert browser.script(OVERFLOW) == []


OWN_COUNTERS = """
const cell = document.querySelector('#components tr[data-key="vowels"] td[data-field="metrics"]');
return cell ? cell.textContent : null;
"""


@pytest.mark.timeout(120)
def test_the_components_table_shows_their_own_counters(browser):
    """``context.register_counter``'s counters, summed per component, in a column of their own
    (Storm's registered metrics)."""
    words = ["storm", "spark"] * 50
    topology = (
        Topology("counters")
        .spout("words", partial(ValueSpout, words))
        .bolt("vowels", CountsVowels, parallelism=2, inputs={"words": shuffle()})
    )
    with run_local(topology, ui=True) as run:
        browser.get(run.ui.url)
        run.wait_until_done(30)
        shown = wait_for(
            lambda: browser.script(OWN_COUNTERS) == "vowels 100, words 100",
            timeout=30,
            what="the counters' final figures",
        )
    assert shown


CAPACITY = """
const cells = {};
for (const id of ['components', 'executors']) {
  cells[id] = [...document.querySelectorAll(`#${id} tbody tr`)].map(tr => {
    const cell = tr.querySelector('td[data-field="capacity"]');
    return [tr.cells[id === 'components' ? 0 : 1].textContent, cell.textContent,
            cell.className, Number(cell.dataset.value)];
  });
}
cells.headings = [...document.querySelectorAll('#components thead th')].map(th => th.textContent);
const slow = document.querySelector('#components tr[data-key="slow"]');  // (not yet drawn: null)
cells.p99 = slow && slow.querySelector('td[data-field="latency_ms_p99"]').textContent;
return cells;
"""
CHOOSE_WINDOW = """
const selector = document.getElementById('window');
selector.value = %s;
selector.dispatchEvent(new Event('change'));
"""


@pytest.mark.timeout(120)
def test_the_page_shows_capacity_over_the_window_chosen_and_marks_a_busy_bolt(browser):
    """Storm UI's "capacity (last 10m)" column (its busiest executor's for a component),
    marked over 0.8, and its window selector (10m, 3h, 1d, all time) for the other figures.
    The page had neither."""
    topology = (
        Topology("capacity", Config(executor_threads="per_executor"))
        .spout("numbers", Counter)
        .bolt("slow", partial(Waits, 20), inputs={"numbers": shuffle()})
        .bolt("quick", partial(Waits, 0), inputs={"slow": shuffle()})
    )
    with run_local(topology, ui=True) as run:
        browser.get(run.ui.url + "?interval=200&window=10m")
        shown = wait_for(  # busy from the start, it passes 0.8 once the start-up is behind it
            lambda: (
                (c := browser.script(CAPACITY))["components"]
                and c["components"][1][2] == "busy"
                and c
            ),
            timeout=60,
            what="the slow bolt's capacity to be marked",
        )
        assert "capacity (last 10m)" in shown["headings"] and shown["p99"] == "—"
        numbers, slow, quick = shown["components"]
        assert numbers[:3] == ["numbers", "—", ""]  # a spout has no capacity
        assert slow[0] == "slow" and slow[3] > 0.8
        assert quick[0] == "quick" and quick[3] < 0.1 and quick[2] == ""
        by_component = {row[0]: row for row in shown["executors"]}
        assert by_component["slow"][2] == "busy" and by_component["quick"][2] == ""
        browser.script(CHOOSE_WINDOW % json.dumps("all-time"))
        shown = browser.script(CAPACITY)
        assert shown["p99"] != "—"  # (of all time only)
        assert "capacity (last 10m)" in shown["headings"]  # whatever the window, as Storm UI
        assert shown["components"][1][2] == "busy"


PROCESS_LATENCY = """
const row = name => document.querySelector(`#components tr[data-key="${name}"]`);
if (!row("batch")) return null;
const cell = (name, field) => row(name).querySelector(`td[data-field="${field}"]`);
const value = field => Number(cell("batch", field).dataset.value);
return {execute: value("latency_ms_mean"), process: value("process_latency_ms_mean"),
        p99: cell("batch", "process_latency_ms_p99").textContent,
        spout: cell("numbers", "process_latency_ms_mean").textContent,
        executors: Object.fromEntries([...document.querySelectorAll('#executors tbody tr')].map(
          tr => [tr.cells[1].textContent,
                 tr.querySelector('td[data-field="process_latency_ms_mean"]').textContent]))};
"""


@pytest.mark.timeout(120)
def test_the_page_shows_a_batching_bolts_process_latency_next_to_its_execute_latency(browser):
    """Storm UI's "process latency" column: a batching bolt holds each tuple until its next
    batch (every 50 ms), so its process latency (``process`` called to acked) is far above its
    execute latency.  The page had execute latency only."""
    topology = (
        Topology("batches")
        .spout("numbers", Counter)
        .bolt("batch", TicklessCount, inputs={"numbers": shuffle()})
    )
    with run_local(topology, ui=True) as run:
        browser.get(run.ui.url + "?interval=200&window=10m")
        shown = wait_for(
            lambda: (s := browser.script(PROCESS_LATENCY)) and s["process"] > 0 and s,
            timeout=60,
            what="the batching bolt's process latency",
        )
    assert shown["process"] > shown["execute"] > 0
    assert shown["p99"] == "—"  # (of all time only, as the execute latency's)
    assert shown["spout"] == "—"  # a spout has none: its latency is the complete latency
    assert shown["executors"]["numbers"] == "—" and shown["executors"]["batch"] != "—"


TOPOLOGY_STATS = """
return [...document.querySelectorAll('#topology-stats tbody tr')].map(tr =>
  [...tr.querySelectorAll('td')].map(td => td.dataset.value === undefined ?
    td.textContent : Number(td.dataset.value)));
"""


@pytest.mark.timeout(120)
def test_the_page_has_storm_uis_topology_stats_a_row_a_window(browser):
    """Storm UI's "Topology stats": emitted and transferred by every component shown, and the
    spouts' complete latency, acked and failed, for each window."""
    with run_local(word_count_topology(), ui=True) as run:
        run.wait_until_done(30)
        stats = run.statistics()
        browser.get(run.ui.url)
        rows = wait_for(lambda: browser.script(TOPOLOGY_STATS), timeout=30, what="the table")
    shown = [c for c in stats.components.values() if not c.component.startswith("__")]
    [spout] = [c for c in shown if c.kind == "spout"]
    expected = [
        sum(c.emitted for c in shown),
        sum(c.transferred for c in shown),
        pytest.approx(spout.latency_ms_mean),
        spout.acked,
        spout.failed,
    ]
    assert [row[0] for row in rows] == ["10m 0s", "3h 0m 0s", "1d 0h 0m 0s", "all time"]
    assert all(row[1:] == expected for row in rows)  # (a run of seconds: every window alike)
    assert spout.acked == len(SENTENCES) and expected[0] > spout.acked
