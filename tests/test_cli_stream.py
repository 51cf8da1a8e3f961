"""``brokerless stream`` (and its alias ``brokerless-stream``): modules found in the current
directory, the README's examples (the command line section and its topology, the topology UI
paragraph) executed as written, ``list``, ``run --ui`` and ``ui``, Ctrl-C."""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from brokerless.stream import ReplayableSpout
from brokerless.stream.registry import find

from .ports import free_port
from .processes import descendants, gone
from .stream_topologies import StatefulCount, wait_for
from .test_cli import BROKERLESS, ENV, brokerless, finish, interrupt, started

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
SCRIPTS = Path(sys.executable).parent


def block(after: str, language: str) -> str:
    """The first ``language`` code block of the README after the text ``after``."""
    start = README.index(after)
    found = re.compile(rf"```{language}\n(.*?)```", re.S).search(README, start)
    assert found, f"no {language} block after {after!r}"
    return found[1]


@pytest.fixture
def readme_topology(tmp_path: Path) -> Path:
    """The README's word count, saved as readme_topology.py in a fresh directory."""
    (tmp_path / "readme_topology.py").write_text(block("## Stream processing", "python"))
    return tmp_path


@pytest.mark.timeout(120)
def test_the_readme_command_line_example_runs_as_written(readme_topology):
    port = str(free_port())
    script = block("## Command line", "sh").replace("5557", port)
    done = subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=readme_topology,
        capture_output=True,
        timeout=110,
        env=dict(ENV, PATH=f"{SCRIPTS}{os.pathsep}{os.environ['PATH']}"),
    )
    assert done.returncode == 0, done.stderr.decode()
    out = done.stdout.decode()
    assert out.startswith("1\n2\n3\n"), out
    report = json.loads(out[out.index("{") :])
    # the README's spout says when it is exhausted, so the run ends by itself
    assert report["mode"] == "multiprocess/ipc" and not report["interrupted"]
    assert report["statistics"]["components"]["sentences"]["acked"] == 2
    assert sorted(map(tuple, report["emitted"]["count"])) == [
        ("cat", 1),
        ("dog", 1),
        ("ran", 1),
        ("sat", 1),
        ("the", 1),
        ("the", 2),
    ]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", [["brokerless-stream"], ["brokerless", "stream"]])
def test_a_topology_module_in_the_current_directory_is_found(readme_topology, command):
    done = subprocess.run(
        [SCRIPTS / command[0], *command[1:], "run", "readme_topology:topo", "--local"],
        cwd=readme_topology,
        capture_output=True,
        timeout=110,
        env=ENV,
    )
    assert done.returncode == 0, done.stderr.decode()
    report = json.loads(done.stdout[done.stdout.index(b"{") :])
    assert report["topology"] == "word-count" and report["mode"] == "local"


def test_the_readme_topology_ui_example_runs_as_written():
    done = subprocess.run(
        [sys.executable, "-c", block("**Topology UI**", "python")],
        stdin=subprocess.DEVNULL,  # no Enter to wait for (test_readme.py presses it)
        capture_output=True,
        timeout=60,
        env=ENV,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert re.fullmatch(
        rb"open http://127\.0\.0\.1:\d+/\ndone; press Enter to stop the page ", done.stdout
    )


def test_list_shows_the_topologies_of_a_module(readme_topology):
    examples = subprocess.run(
        [*BROKERLESS, "stream", "list"], capture_output=True, env=ENV, timeout=60
    )
    assert examples.returncode == 0, examples.stderr
    assert examples.stdout.decode().startswith(
        "brokerless.stream.examples:word_count\tword-count: sentences (spout x2), "
        "split (bolt x2), count (bolt x2)"
    )
    mine = subprocess.run(
        [SCRIPTS / "brokerless", "stream", "list", "readme_topology"],
        capture_output=True,
        env=ENV,
        timeout=60,
        cwd=readme_topology,
    )
    assert b"readme_topology:topo\tword-count: sentences (spout x1)" in mine.stdout
    missing = subprocess.run(
        [*BROKERLESS, "stream", "list", "no_such_module"], capture_output=True, env=ENV, timeout=60
    )
    assert missing.returncode == 1 and b"cannot import 'no_such_module'" in missing.stderr
    wrong = subprocess.run(
        [*BROKERLESS, "stream", "run", "no_such_module:topo"],
        capture_output=True,
        env=ENV,
        timeout=60,
    )
    assert wrong.returncode == 1 and b"cannot load 'no_such_module:topo'" in wrong.stderr
    assert b"Traceback" not in missing.stderr + wrong.stderr


@pytest.mark.timeout(120)
@pytest.mark.parametrize("value", ["abc", "127.0.0.1:99999", "99999", "host:"])
def test_run_with_a_bad_ui_address_is_a_usage_error(value):
    done = brokerless("stream", "run", "brokerless.stream.examples:word_count", "--ui", value)
    assert done.returncode == 2, done.stderr.decode()
    assert done.stderr.decode().endswith(
        f"Error: --ui takes PORT or HOST:PORT (PORT from 0 to 65535; 0: a free one), "
        f"not {value!r}\n"
    )
    assert b"Traceback" not in done.stderr and not done.stdout


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("emitted", "error"),
    [
        (
            "cnt",
            "'cnt' is not a component of 'word-count'; its components: sentences, split, count",
        ),
        ("count:counts", "'count' has no stream 'counts'; its streams: default"),
    ],
)
def test_run_refuses_emitted_of_what_the_topology_does_not_have(emitted, error):
    done = brokerless(
        "stream", "run", "brokerless.stream.examples:word_count", "--local", "--emitted", emitted
    )
    assert done.returncode == 2, done.stderr.decode()
    assert done.stderr.decode().endswith(f"Error: Invalid value for '--emitted': {error}\n")
    assert b"Traceback" not in done.stderr and not done.stdout


@pytest.mark.timeout(120)
def test_run_with_ui_then_ctrl_c_prints_the_report_and_exits_130():
    with started(
        "stream", "run", "tests.test_cli_stream:endless", "--local", "--ui", "0", "--progress"
    ) as process:
        assert process.stderr.readline().startswith(b"the topology's spouts never say")
        line = process.stderr.readline().decode()
        url = re.fullmatch(r"topology UI: (http://127\.0\.0\.1:\d+/)\n", line)
        assert url, line
        with urllib.request.urlopen(url[1] + "api/topology", timeout=10) as response:
            assert json.load(response)["name"] == "endless"
        progress = process.stderr.read(8)  # the first progress line has begun
        assert progress.startswith(b"\r")
        out, _ = interrupt(process)
    report = json.loads(out)
    assert report["interrupted"] and report["statistics"]["components"]["counter"]["emitted"]
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url[1], timeout=5)


@pytest.mark.timeout(120)
def test_stream_ui_keeps_the_page_after_the_run_until_ctrl_c():
    port = free_port()
    with started(
        "stream",
        "ui",
        "brokerless.stream.examples:word_count",
        "--workers",
        "2",
        "--port",
        str(port),
    ) as process:
        assert (
            process.stderr.readline().decode().startswith(f"topology UI: http://127.0.0.1:{port}/")
        )
        assert process.stderr.readline().decode().startswith("done: the final figures stay")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/stats", timeout=10) as answer:
            stats = json.load(answer)
        assert stats["stopped"] and stats["components"]["sentences"]["acked"] == 8
        interrupt(process)
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5)


@pytest.mark.timeout(120)
def test_stream_ui_ends_on_a_ctrl_c_that_another_thread_takes():
    """The kernel hands a process's SIGINT to any thread that does not block it, and Python
    runs the handler in the main thread when that thread next wakes.  The page's wait for
    Ctrl-C had no timeout, so a SIGINT taken by another thread left the command asleep for
    ever (seen once in a full run: still running 30 s after Ctrl-C).  Sent to another thread
    on purpose here, it ends the command as a Ctrl-C does."""
    port = free_port()
    with started(
        "stream", "ui", "brokerless.stream.examples:word_count", "--port", str(port)
    ) as process:
        assert process.stderr.readline().decode().startswith("topology UI:")
        assert process.stderr.readline().decode().startswith("done: the final figures stay")
        # a signal sent to a thread that is ending is lost with it: wait until the run's threads
        # have ended and only the page's is left besides the main one
        tasks = f"/proc/{process.pid}/task"
        (page,) = wait_for(
            lambda: (
                len(ids := [int(t) for t in os.listdir(tasks)]) == 2
                and [t for t in ids if t != process.pid]
            ),
            timeout=30,
            what="the main thread and the page's alone",
        )
        assert ctypes.CDLL(None, use_errno=True).tgkill(process.pid, page, signal.SIGINT) == 0
        _, err = finish(process, timeout=10)
    assert process.returncode == 130, err.decode()
    assert b"Traceback" not in err, err.decode()


def endless():
    from brokerless.stream import Topology, all_

    from .stream_topologies import Counter, Sink

    return (
        Topology("endless").spout("counter", Counter).bolt("sink", Sink, inputs={"counter": all_()})
    )


def unbuildable():
    """A topology whose bolt takes the tuples of a component it does not have."""
    from brokerless.stream import Topology, all_

    from .stream_topologies import Counter, Sink

    return (
        Topology("unbuildable")
        .spout("counter", Counter)
        .bolt("sink", Sink, inputs={"nowhere": all_()})
    )


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", ["run", "ui"])
def test_a_topology_that_cannot_be_built_is_an_error_saying_why(command):
    done = brokerless("stream", command, "tests.test_cli_stream:unbuildable", "--local")
    assert (done.returncode, done.stdout) == (1, b"")
    err = done.stderr.decode()
    assert err.startswith("Error: cannot load 'tests.test_cli_stream:unbuildable': ") and (
        err.count("\n") == 1 and "nowhere" in err
    ), err


def lose_a_worker_each_attempt(url: str, attempts: int = 3) -> int:
    """Kill (SIGKILL) a worker of each of the first ``attempts`` attempts of the run whose
    page is at ``url`` (its max_attempts: the run starts its workers again after a loss, and
    gives up after that many in a row), as the page lists them; the last one's pid."""
    for attempt in range(1, attempts + 1):

        def workers(attempt: int = attempt) -> list[dict[str, int]]:
            with urllib.request.urlopen(url + "api/stats", timeout=10) as answer:
                now = json.load(answer)["attempts"]
            return now["workers"] if now["attempt"] == attempt else []

        pid = wait_for(workers, timeout=60, what=f"attempt {attempt}'s workers")[0]["pid"]
        os.kill(pid, signal.SIGKILL)
    return pid


@pytest.mark.timeout(120)
def test_run_that_loses_a_worker_says_so_without_a_traceback():
    with started(
        "stream", "run", "tests.test_cli_stream:endless", "--workers", "2", "--ui", "0"
    ) as process:
        process.stderr.readline()  # (the spouts never say they are exhausted)
        said = process.stderr.readline().decode()
        assert said.startswith("topology UI: ")  # the workers are up
        worker = lose_a_worker_each_attempt(said.split()[2])
        _, err = finish(process)
    assert process.returncode == 1, err.decode()
    assert b"Traceback" not in err, err.decode()
    assert b"lost a worker in each of its last 3 attempt(s)" in err, err.decode()
    assert f"(pid {worker}) exited with code -9".encode() in err.splitlines()[-1], err.decode()


@pytest.mark.timeout(120)
def test_run_that_is_not_done_in_its_timeout_says_so_without_a_traceback():
    done = brokerless("stream", "run", "tests.test_cli_stream:stuck", "--local", "--timeout", "1")
    assert done.returncode == 1, done.stderr.decode()
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    assert done.stderr.startswith(b"Error: topology 'stuck' not finished after 1.0 s")


@pytest.mark.timeout(120)
def test_stream_ui_that_loses_a_worker_keeps_the_page_until_ctrl_c():
    with started("stream", "ui", "tests.test_cli_stream:endless", "--workers", "2") as process:
        process.stderr.readline()  # (the spouts never say they are exhausted)
        url = process.stderr.readline().decode().split()[2]
        worker = lose_a_worker_each_attempt(url)
        lost = [process.stderr.readline().decode()]
        while not lost[-1].startswith("failed: "):
            lost.append(process.stderr.readline().decode())
        assert lost[0].startswith("Error: ")
        assert f"(pid {worker}) exited with code -9" in lost[-2]
        assert lost[-1] == f"failed: the last figures stay at {url} until Ctrl-C\n"

        def stopped() -> dict[str, Any] | None:  # (the page's figures are up to 0.5 s old)
            with urllib.request.urlopen(url + "api/stats", timeout=10) as answer:
                stats = json.load(answer)
            return stats if stats["stopped"] else None

        stats = wait_for(stopped, what="the page to say the run stopped")
        assert "lost a worker in each of its last 3" in stats["failure"]
        process.send_signal(signal.SIGINT)
        _, err = finish(process)
    assert process.returncode == 1, err.decode()
    assert b"Traceback" not in err, err.decode()


def stuck():
    """A topology that never finishes: its bolt holds every tuple (acks none)."""
    from functools import partial

    from brokerless.stream import Topology, shuffle

    from .stream_topologies import HoldValue, ValueSpout

    return (
        Topology("stuck")
        .spout("values", partial(ValueSpout, [1, 2]))
        .bolt("hold", partial(HoldValue, 2), inputs={"values": shuffle()})
    )


@pytest.mark.timeout(120)
def test_a_ui_port_that_is_taken_is_an_error_saying_so():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for command in (["run", "--ui", str(port)], ["ui", "--port", str(port)]):
            done = brokerless(
                "stream", command[0], "tests.test_cli_stream:endless", "--local", *command[1:]
            )
            err = done.stderr.decode()
            assert done.returncode == 1, err
            assert "Traceback" not in err, err
            assert err.endswith(
                f"Error: [Errno 98] the topology UI cannot listen on 127.0.0.1:{port}: Address "
                "already in use (choose another port, or 0 for a free one)\n"
            ), err


@pytest.mark.timeout(120)
def test_stream_ui_with_a_port_out_of_range_is_a_usage_error():
    done = brokerless("stream", "ui", "brokerless.stream.examples:word_count", "--port", "99999")
    assert done.returncode == 2, done.stderr.decode()
    assert (
        b"Traceback" not in done.stderr and b"99999 is not in the range 0<=x<=65535" in done.stderr
    )


@pytest.mark.timeout(120)
@pytest.mark.parametrize("option", ["--duration", "--timeout"])
@pytest.mark.parametrize("value", ["0", "-1"])
def test_a_duration_or_timeout_that_is_not_positive_is_a_usage_error(option, value):
    done = brokerless("stream", "run", "brokerless.stream.examples:word_count", option, value)
    assert done.returncode == 2, done.stderr.decode()
    assert f"Invalid value for '{option}': {float(value)} is not in the range x>0".encode() in (
        done.stderr
    )
    assert not done.stdout


@pytest.mark.timeout(120)
def test_sigterm_stops_a_run_as_ctrl_c_does_and_leaves_nothing_behind():
    # `timeout 60 brokerless stream run ...`, `kill`: the report, and no files or workers left
    with tempfile.TemporaryDirectory(prefix="sigterm-") as short:  # (ipc paths must be short)
        sigterm_a_run(Path(short))


def sigterm_a_run(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [*BROKERLESS, "stream", "run", "tests.test_cli_stream:endless", "--workers=2", "--ui=0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(ENV, TMPDIR=str(tmp_path)),
    )
    try:
        assert process.stderr is not None
        process.stderr.readline()  # (the spouts never say they are exhausted)
        assert process.stderr.readline().startswith(b"topology UI: ")  # the workers are up
        workers = descendants(process.pid)
        assert list(tmp_path.iterdir())  # the run's directory: its ipc endpoints
        process.terminate()
        out, err = finish(process)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
    assert process.returncode == 143, err.decode()
    assert b"Traceback" not in err, err.decode()
    assert json.loads(out)["interrupted"]
    assert all(gone(pid) for pid in workers) and not list(tmp_path.iterdir())


def run_endless_in(tmpdir: Path) -> subprocess.CompletedProcess[bytes]:
    """``stream run`` of the endless topology in two worker processes, with ``$TMPDIR`` (where
    the run's ipc endpoints go) at ``tmpdir``."""
    return subprocess.run(
        [*BROKERLESS, "stream", "run", "tests.test_cli_stream:endless", "--workers=2"],
        capture_output=True,
        timeout=100,
        env=dict(ENV, TMPDIR=str(tmpdir)),
    )


@pytest.mark.timeout(120)
def test_ipc_endpoints_too_long_for_the_kernel_are_an_error_saying_what_to_do(tmp_path):
    deep = tmp_path / ("d" * 100)  # the run's ipc endpoints go in $TMPDIR
    deep.mkdir()
    done = run_endless_in(deep)
    assert done.returncode == 1, done.stderr.decode()
    # (the line; the ZAP thread of the run's context may print its own ContextTerminated)
    said = [line for line in done.stderr.decode().splitlines() if line.startswith("Error: ")]
    assert said and said[0].startswith("Error: File name too long: ipc path "), done.stderr
    assert said[0].endswith("(pass --transport tcp, or point TMPDIR at a shorter path)")


@pytest.mark.timeout(120)
def test_a_worker_that_fails_to_start_is_an_error_saying_why():
    # $TMPDIR short enough for the driver's endpoint, too long for the workers' (longer names)
    with tempfile.TemporaryDirectory(prefix="w", dir="/tmp") as short:  # /tmp/wXXXXXXXX
        deep = Path(short) / ("d" * 50)  # 65 characters
        deep.mkdir()
        done = run_endless_in(deep)
    err = done.stderr.decode()
    assert done.returncode == 1, err
    said = [line for line in err.splitlines() if line.startswith("Error: ")]
    assert said and re.fullmatch(r"Error: worker \d of 'endless' failed:", said[0]), err
    assert "File name too long: ipc path" in err


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("options", "error"),
    [
        (["--master", "local[2]"], "--master is the Spark master's URL: it goes with --spark"),
        (["--local", "--master", "local[2]"], "--master is the Spark master's URL"),
        (["--local", "--transport", "tcp"], "--transport is how worker processes talk: it does "),
        (["--transport", "tcp", "--spark"], "it does not go with --spark"),
    ],
)
def test_an_option_the_mode_would_ignore_is_a_usage_error(options, error):
    done = brokerless("stream", "run", "brokerless.stream.examples:word_count", *options)
    assert done.returncode == 2, done.stderr.decode()
    assert error in done.stderr.decode() and not done.stdout


# -- a running topology, from another shell: ps, deactivate, activate, kill ----------------------


def ps() -> str:
    done = brokerless("stream", "ps")
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def listed(name: str, status: str = "active") -> dict[str, str] | None:
    """The line of ``stream ps`` for ``name`` (as a dict of its columns) if it has ``status``."""
    lines = ps().splitlines()
    if not lines[0].startswith("NAME"):
        return None
    header = lines[0].split()
    rows = [dict(zip(header, line.split(), strict=True)) for line in lines[1:]]
    return next((r for r in rows if r["NAME"] == name and r["STATUS"] == status), None)


def control(*args: str) -> subprocess.CompletedProcess[bytes]:
    done = brokerless("stream", *args)
    assert done.returncode == 0, done.stderr.decode()
    return done


def registry() -> list[Path]:
    return list(Path(os.environ["BROKERLESS_TOPOLOGIES_DIR"]).iterdir())


@pytest.mark.timeout(120)
def test_ps_shows_a_run_while_it_runs_and_a_second_one_of_that_name_is_refused():
    with started("stream", "run", "tests.test_cli_stream:endless", "--workers", "2") as process:
        row = wait_for(lambda: listed("endless"), timeout=60, what="ps to list the run")
        assert row == dict(row, MODE="multiprocess/ipc", WORKERS="2", PID=str(process.pid))
        # as Storm refuses a topology name that runs already; --name runs it under another
        twice = brokerless("stream", "run", "tests.test_cli_stream:endless", "--local")
        assert twice.returncode == 1 and not twice.stdout
        assert re.fullmatch(
            rf"Error: a topology named 'endless' is already running \(pid {process.pid}, since "
            r"\d\d:\d\d:\d\d\): stop it with `brokerless stream kill endless`, or run this one "
            r"under another --name\n",
            twice.stderr.decode(),
        ), twice.stderr.decode()
        other = brokerless(
            "stream",
            "run",
            "tests.test_cli_stream:endless",
            "--local",
            "--name",
            "endless-2",
            "--duration",
            "0.5",
        )
        assert other.returncode == 0, other.stderr.decode()
        interrupt(process)
    assert ps() == "No topologies running.\n" and not registry()


@pytest.mark.timeout(120)
def test_a_run_killed_outright_is_no_longer_listed_and_its_name_is_free():
    with started("stream", "run", "tests.test_cli_stream:endless", "--local") as process:
        wait_for(lambda: listed("endless"), timeout=60, what="ps to list the run")
        process.kill()  # SIGKILL: nothing cleans up; its entry is stale
        process.wait()
    assert registry()
    assert ps() == "No topologies running.\n" and not registry()
    again = brokerless("stream", "run", "tests.test_cli_stream:endless", "--local", "--duration=1")
    assert again.returncode == 0, again.stderr.decode()


def emitted(url: str) -> tuple[float, bool, int]:
    """When the figures at ``url`` were taken, whether the run is active, and the spout's
    emitted count."""
    with urllib.request.urlopen(url + "api/stats", timeout=10) as answer:
        stats = json.load(answer)
    return stats["time"], stats["active"], stats["components"]["counter"]["emitted"]


@pytest.mark.timeout(120)
def test_deactivate_and_activate_stop_and_resume_a_running_topology():
    with started("stream", "run", "tests.test_cli_stream:endless", "--local", "--ui=0") as process:
        process.stderr.readline()  # (the spouts never say they are exhausted)
        url = process.stderr.readline().decode().split()[2]
        wait_for(lambda: emitted(url)[2], timeout=30, what="the spout to emit")
        said = control("deactivate", "endless").stdout
        assert said == b"deactivated topology 'endless'\n"
        assert listed("endless", "inactive")
        # the spout stops: two rounds of figures taken after it said so show the same count
        first = wait_for(
            lambda: now if not (now := emitted(url))[1] else None, what="the figures to say so"
        )
        second = wait_for(lambda: now if (now := emitted(url))[0] > first[0] else None)
        assert second[2] == first[2]
        assert control("activate", "endless").stdout == b"activated topology 'endless'\n"
        assert listed("endless", "active")
        wait_for(lambda: emitted(url)[2] > second[2], what="the spout to emit again")
        interrupt(process)


def slow(ms: int = 20):
    """A reliable spout feeding a bolt that takes ``ms`` a tuple, with at most 20 in flight."""
    from functools import partial

    from brokerless.stream import Config, Topology, shuffle

    from .stream_topologies import Busy, ReliableCounter

    return (
        Topology("slow", Config(max_spout_pending=20))
        .spout("counter", ReliableCounter)
        .bolt("busy", partial(Busy, ms), inputs={"counter": shuffle()})
    )


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    ("mode", "shown"),
    [
        (["--local"], "local"),
        # the same kill in the other modes (slow: another worker start, another Spark start)
        pytest.param(["--workers=2"], "multiprocess/ipc", marks=pytest.mark.slow),
        pytest.param(
            ["--spark", "--master=local[2]", "--workers=2"], "spark", marks=pytest.mark.slow
        ),
    ],
)
def test_kill_with_a_wait_lets_the_tuples_in_flight_finish_then_stops_the_run(mode, shown):
    with started("stream", "run", "tests.test_cli_stream:slow", *mode) as process:
        row = wait_for(lambda: listed("slow"), timeout=180, what="ps to list the run")
        assert row["MODE"] == shown
        said = control("kill", "slow", "-w", "6").stdout.decode()
        assert (
            said == f"killed topology 'slow': its spouts are deactivated; it stops in 6 s "
            f"(pid {process.pid})\n"
        )
        assert listed("slow", "killed")
        out, err = finish(process)
    assert process.returncode == 0, err.decode()
    assert b"killed: the spouts are deactivated; stopping in " in err
    report = json.loads(out)
    assert report["killed"] and not report["interrupted"] and report["seconds"] >= 6
    spout = report["statistics"]["components"]["counter"]
    assert spout["emitted"] and spout["acked"] == spout["emitted"] and not spout["failed"]
    assert "slow" not in ps() and not registry()


def slower():
    """``slow`` with 4 s of work in flight: its bolt takes 200 ms a tuple."""
    return slow(200)


@pytest.mark.timeout(120)
def test_kill_without_a_wait_stops_the_run_at_once():
    # (the slower bolt: with 20 ms a tuple, the 0.4 s of work in flight could all be done by
    # the time a loaded machine had stopped the run)
    with started("stream", "run", "tests.test_cli_stream:slower", "--local") as process:
        wait_for(lambda: listed("slow"), timeout=60, what="ps to list the run")
        url = find("slow").url  # (listed: its control server is up)
        # tuples in flight: on a loaded machine the kill could come before the first emit
        wait_for(lambda: emitted(url)[2], timeout=30, what="the spout to emit")
        control("kill", "slow", "--wait", "0")
        out, err = finish(process)
    assert process.returncode == 0, err.decode()
    assert b"killed: the spouts are deactivated; stopping in 0 s\n" in err
    report = json.loads(out)
    assert report["killed"]
    spout = report["statistics"]["components"]["counter"]
    assert spout["acked"] < spout["emitted"]  # (stopped with tuples in flight)


@pytest.mark.timeout(120)
def test_kill_of_a_stream_ui_run_keeps_its_page_until_ctrl_c():
    with started("stream", "ui", "tests.test_cli_stream:endless", "--local") as process:
        process.stderr.readline()  # (the spouts never say they are exhausted)
        url = process.stderr.readline().decode().split()[2]
        control("kill", "endless", "-w", "0")
        assert process.stderr.readline().startswith(b"killed: the spouts are deactivated")
        assert process.stderr.readline().decode() == (
            f"killed: the final figures stay at {url} until Ctrl-C\n"
        )
        assert ps() == "No topologies running.\n"
        with urllib.request.urlopen(url + "api/stats", timeout=10) as answer:
            assert json.load(answer)["stopped"]
        interrupt(process)


@pytest.mark.timeout(120)
def test_a_name_that_is_not_running_is_an_error_listing_those_that_are():
    commands = [["kill"], ["activate"], ["deactivate"], ["kill", "-w", "1"]]
    for command in commands:
        done = brokerless("stream", *command, "nope")
        assert (done.returncode, done.stdout) == (1, b""), command
        assert done.stderr == b"Error: no topology named 'nope' is running (running: none)\n"
    with started("stream", "run", "tests.test_cli_stream:endless", "--local"):
        wait_for(lambda: listed("endless"), timeout=60, what="ps to list the run")
        said = [brokerless("stream", *command, "nope") for command in commands]
    for done in said:
        assert (done.returncode, done.stdout) == (1, b"")
        assert done.stderr == b"Error: no topology named 'nope' is running (running: endless)\n"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", ["ps", "activate", "deactivate", "rebalance", "kill"])
def test_the_commands_for_a_running_topology_have_help_with_examples(command):
    shown = brokerless("stream", command, "--help")
    assert shown.returncode == 0, shown.stderr.decode()
    assert "Example" in shown.stdout.decode()
    assert f"  {command} " in brokerless("stream", "--help").stdout.decode()


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "command",
    [["ps"], ["kill", "endless"], ["run", "tests.test_cli_stream:endless", "--local"]],
)
def test_a_registry_that_cannot_be_used_is_an_error_saying_what_to_do(tmp_path, command):
    (tmp_path / "file").touch()
    done = subprocess.run(
        [*BROKERLESS, "stream", *command],
        capture_output=True,
        timeout=60,
        env=dict(ENV, BROKERLESS_TOPOLOGIES_DIR=str(tmp_path / "file")),
    )
    assert (done.returncode, done.stdout) == (1, b"")
    assert done.stderr.decode() == (
        f"Error: cannot use {tmp_path / 'file'} as the registry of running topologies (File "
        "exists): point BROKERLESS_TOPOLOGIES_DIR at a directory of yours\n"
    )


class Cycle(ReplayableSpout):
    """Emits ``[w{n % 5}, n]`` for n = 0, 1, 2, ... forever; its position is n."""

    outputs = ["word", "n"]

    def open(self, conf: Any, context: Any) -> None:
        self.n = 0

    def position(self) -> int:
        return self.n

    def seek(self, position: int) -> None:
        self.n = position

    def next_tuple(self) -> None:
        self.emit([f"w{self.n % 5}", self.n])
        self.n += 1


class CountWithN(StatefulCount):
    """A StatefulCount that emits ``[word, count, n]``: exactly once, count is n // 5 + 1."""

    outputs = ["word", "count", "n"]

    def process(self, tup: Any) -> None:
        count = self.counts[tup[0]] = self.counts.get(tup[0], 0) + 1
        self.emit([tup[0], count, tup[1]])


def checkpointed():
    """Counts of Cycle's words in checkpointed state, in $CHECKPOINTS."""
    from brokerless.stream import Config, Topology, fields

    config = Config(checkpoint_interval_secs=0.2, checkpoint_dir=os.environ["CHECKPOINTS"])
    return (
        Topology("checkpointed", config)
        .spout("words", Cycle)
        .bolt("count", CountWithN, parallelism=2, inputs={"words": fields("word")})
    )


@pytest.mark.slow  # a kill's stop is any stop's; resuming a checkpoint: test_stream_state.py
@pytest.mark.timeout(180)
def test_a_killed_checkpointed_run_leaves_its_state_consistent_for_the_next(tmp_path):
    env = dict(ENV, CHECKPOINTS=str(tmp_path))
    command = [*BROKERLESS, "stream", "run", "tests.test_cli_stream:checkpointed", "--workers=2"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as run:
        try:
            wait_for(lambda: listed("checkpointed"), timeout=60, what="ps to list the run")
            wait_for(lambda: list(tmp_path.glob("chk-*/_COMPLETED")), timeout=60)
            control("kill", "checkpointed", "-w", "1")
            _, err = finish(run)
        finally:
            run.kill()
    assert run.returncode == 0, err.decode()
    again = subprocess.run(
        [*command, "--duration=2", "--emitted=count"], capture_output=True, timeout=120, env=env
    )
    assert again.returncode == 0, again.stderr.decode()
    counted = json.loads(again.stdout)["emitted"]["count"]
    assert counted and min(n for _, _, n in counted) > 0  # it went on from a checkpoint
    assert all(count == n // 5 + 1 for _, count, n in counted)  # each word counted once


def rebalanced():
    """Counts of Cycle's words in checkpointed state, in $CHECKPOINTS (Spark needs one);
    ``count``'s four tasks on two executors."""
    from brokerless.stream import Config, Topology, fields

    config = Config(checkpoint_interval_secs=0.1, checkpoint_dir=os.environ["CHECKPOINTS"])
    return (
        Topology("rebalanced", config)
        .spout("words", Cycle)
        .bolt("count", CountWithN, parallelism=2, tasks=4, inputs={"words": fields("word")})
    )


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "mode",
    [
        ["--workers=2"],
        # the same rebalance on Spark (slow: a Spark start; the swap is the API test's)
        pytest.param(["--spark", "--master=local[3]", "--workers=2"], marks=pytest.mark.slow),
    ],
)
def test_rebalance_moves_a_running_checkpointed_topology_to_more_workers_and_executors(
    mode, tmp_path, monkeypatch
):
    monkeypatch.setitem(ENV, "CHECKPOINTS", str(tmp_path))
    command = ["stream", "run", "tests.test_cli_stream:rebalanced", *mode, "--ui=0"]
    with started(*command, "--emitted=count") as process:
        assert process.stderr is not None
        said = iter(process.stderr.readline, b"")  # (Spark logs there too)
        url = next(line for line in said if line.startswith(b"topology UI: ")).split()[2]
        url = url.decode()
        row = wait_for(lambda: listed("rebalanced"), timeout=120, what="ps to list the run")
        assert row["WORKERS"] == "2"
        # mistakes are refused before anything changes
        for arguments, status, error in [
            (["-e", "count=5"], 1, "parallelism of 'count' must be at most its tasks (4)"),
            # (a name in any script: the refusal says it, not "does not answer")
            (["-e", "计数=2"], 1, "parallelism of '计数': it has no such component"),
            (["-n", "2"], 1, "changes nothing"),
            (["-e", "count"], 2, "'count': give COMPONENT=N, N the number of executors"),
            (["-n", "0"], 2, "Invalid value for '-n'"),
            ([], 2, "give the new layout: -n WORKERS and/or -e COMPONENT=N"),
        ]:
            done = brokerless("stream", "rebalance", "rebalanced", *arguments)
            assert (done.returncode, done.stdout) == (status, b""), arguments
            assert error in done.stderr.decode(), done.stderr.decode()
        assert listed("rebalanced")["WORKERS"] == "2"
        said = control("rebalance", "rebalanced", "-n", "3", "-e", "count=4", "-w", "5").stdout
        assert said.decode() == (
            "rebalancing topology 'rebalanced': workers 2 -> 3, 'count' executors 2 -> 4; its "
            f"spouts are deactivated for up to 5 s while the tuples in flight finish (pid "
            f"{process.pid})\n"
        )
        wait_for(
            lambda: (row := listed("rebalanced")) and row["WORKERS"] == "3",
            timeout=120,
            what="ps to show the run active on 3 workers",
        )
        with urllib.request.urlopen(url + "api/stats", timeout=30) as answer:
            stats = json.load(answer)
        assert len(stats["workers"]) == 3 and stats["components"]["count"]["executors"] == 4
        control("kill", "rebalanced", "-w", "0")
        out, err = finish(process, timeout=60)
    assert process.returncode == 0, err.decode()
    report = json.loads(out)
    assert report["workers"] == 3 and not report["errors"]
    counted = report["emitted"]["count"]
    assert all(count == n // 5 + 1 for _, count, n in counted)  # each word counted once
    assert min(n for _, _, n in counted) == 0  # (what the first workers emitted is kept)


def held():
    """A reliable spout whose first tuple the bolt never acks: one is pending for 30 s."""
    from functools import partial

    from brokerless.stream import Topology

    from .stream_topologies import HoldValue, ReliableCounter

    return (
        Topology("held")
        .spout("counter", ReliableCounter)
        .bolt("hold", partial(HoldValue, 0), inputs=["counter"])
    )


@pytest.mark.timeout(120)
def test_ctrl_c_during_a_rebalance_stops_the_run_as_any_ctrl_c():
    with started("stream", "run", "tests.test_cli_stream:held", "--local") as process:
        wait_for(lambda: listed("held"), timeout=60, what="ps to list the run")
        control("rebalance", "held", "-n", "2", "-w", "60")  # (waits for the held tuple)
        assert listed("held", "rebalancing")
        _, err = interrupt(process)  # status 130, no traceback
    assert b"rebalance" not in err
    assert ps() == "No topologies running.\n" and not registry()


def test_the_command_loads_the_ui_server_only_when_used():
    # every `brokerless` command imports the stream commands: the UI's HTTP server (and
    # http.server) must not come with them
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, brokerless.cli; print(sorted(m for m in sys.modules "
            "if m == 'http.server' or m.startswith('brokerless.stream.ui')))",
        ],
        capture_output=True,
        timeout=60,
        env=ENV,
    )
    assert done.stdout == b"[]\n", done.stderr.decode()
