"""The benchmark tools in bench/: the 'one CPU busy' condition (``--busy``, bench/_load.py) and
the report header that records it, stream_thr.py's two target cases with ``--json``,
one_sided.py's two sides, raw_thr.py's two designs, and
spark_io.py's measuring and both of its sides (the Spark cases start a local Spark session).

These check that the tools measure what they say and clean up after themselves; no figure is
asserted (speed belongs in BENCHMARKS.md, not in tests)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from .processes import descendants, describe_tree, gone
from .stream_topologies import wait_for

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))


@pytest.fixture
def bench_modules(monkeypatch):
    """bench/ on sys.path, as the tools have it when run as scripts."""
    monkeypatch.syspath_prepend(str(BENCH))


def run_tool(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=ENV,
        cwd=BENCH,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def cpu_ticks(pid: int) -> int:
    """User + system CPU time of a process so far, in clock ticks (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


# -- the 'one CPU busy' condition ----------------------------------------------------------------


@pytest.mark.timeout(60)
def test_busy_processes_spin_for_the_whole_block_and_stop_after_it(bench_modules):
    from _load import busy

    with busy(2) as procs:
        assert len(procs) == 2
        for proc in procs:  # each one burns CPU (a tenth of a second of it, at least)
            wait_for(lambda p=proc: cpu_ticks(p.pid) >= 10, timeout=30, what="a busy process")
        assert all(proc.poll() is None for proc in procs)
    assert all(proc.returncode is not None and gone(proc.pid) for proc in procs)


@pytest.mark.timeout(60)
def test_a_busy_process_that_ends_early_is_reported(bench_modules):
    from _load import BusyProcessDied, busy

    with pytest.raises(BusyProcessDied, match="1 of the 1 busy processes ended"), busy(1) as procs:
        procs[0].kill()
        procs[0].wait()


@pytest.mark.timeout(60)
def test_busy_processes_end_with_a_benchmark_killed_outright():
    program = (
        "import signal, sys\n"
        f"sys.path.insert(0, {str(BENCH)!r})\n"
        "from _load import busy\n"
        "with busy(1) as procs:\n"
        "    print(procs[0].pid, flush=True)\n"
        "    signal.pause()\n"
    )
    benchmark = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True)
    assert benchmark.stdout is not None
    spinner = int(benchmark.stdout.readline())
    wait_for(lambda: cpu_ticks(spinner) >= 5, timeout=30, what="the busy process to spin")
    benchmark.kill()  # no finally block runs
    benchmark.wait()
    benchmark.stdout.close()
    wait_for(lambda: gone(spinner), timeout=30, what="the orphaned busy process to end")


@pytest.mark.timeout(180)
def test_compare_records_the_condition_and_the_load_at_start_and_end(tmp_path):
    saved = tmp_path / "run.json"
    done = run_tool(
        "compare.py",
        *("--busy", "1", "--quick", "--rounds", "1", "--scale", "0.1"),
        *("--cases", "inproc-thr-100", "--save", str(saved)),
        timeout=170,
    )
    header = [line for line in done.stdout.splitlines() if line.startswith("- ")]
    assert any(line.startswith("- Condition: 1 CPU-bound process") for line in header), header
    load = next(line for line in header if line.startswith("- Load average"))
    assert " at start " in load and ", at end " in load, load
    assert load.endswith(f"; {os.cpu_count()} CPUs"), load
    condition = json.loads(saved.read_text())["condition"]
    assert condition["busy"] == 1 and condition["cpus"] == os.cpu_count()
    assert len(condition["load_at_start"]) == 3 and len(condition["load_at_end"]) == 3


def test_compare_replots_a_saved_run_without_measuring(tmp_path):
    saved = tmp_path / "run.json"
    trial = {"msg_per_s": 1.0}
    saved.write_text(
        json.dumps(
            {
                "command": ["compare.py", "--busy", "1"],
                "condition": {
                    "busy": 1,
                    "load_at_start": [8.5, 7.0, 4.7],
                    "load_at_end": [14.2, 15.2, 11.0],
                    "cpus": 2,
                },
                "impls": {"brokerless": {}, "zmq": {}},
                "impls_order": ["brokerless", "zmq"],
                "cases": [
                    {
                        "case": name,
                        "error": None,
                        "trials": {"subject": [trial] * 2, "reference": [trial] * 2},
                        "ratios": {key: [0.5, 2.0]},
                    }
                    for name, key in (("inproc-thr-100", "msg_per_s"), ("tcp-lat-1", "latency_us"))
                ],
            }
        )
    )
    picture = tmp_path / "ratios.png"
    done = run_tool("compare.py", "--replot", str(saved), "--plot", str(picture), timeout=60)
    assert picture.read_bytes().startswith(b"\x89PNG") and "case 1/" not in done.stderr


def test_compare_rejects_a_negative_busy_count():
    done = subprocess.run(
        [sys.executable, "compare.py", "--busy", "-1"],
        capture_output=True,
        text=True,
        timeout=30,
        env=ENV,
        cwd=BENCH,
    )
    assert done.returncode == 2 and "--busy must be 0 or more" in done.stderr


# -- stream_thr.py: the two target cases --------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("args", "mode", "workers", "interval"),
    [
        ((), "local", 1, None),
        (
            ("--mode", "multiprocess", "--workers", "2", "--transport", "ipc"),
            "multiprocess/ipc",
            2,
            0.002,
        ),
        (
            ("--mode", "multiprocess", "--workers", "2", "--worker-switch-interval", "none"),
            "multiprocess/ipc",
            2,
            None,
        ),
    ],
)
def test_stream_thr_reports_the_spout_rate_as_json(args, mode, workers, interval):
    done = run_tool("stream_thr.py", "--count", "3000", *args, "--json", timeout=110)
    result = json.loads(done.stdout.splitlines()[-1])
    assert (result["mode"], result["workers"], result["acking"]) == (mode, workers, True)
    assert result["worker_switch_interval"] == interval
    assert result["tuples_per_s"] > 0 and result["count"] == 3000
    assert len(result["load_at_start"]) == 3 and len(result["load_at_end"]) == 3
    # each worker process's CPU while the clock ran, in CPUs (none in local mode)
    assert len(result["worker_cpu"]) == (workers if mode != "local" else 0)
    assert all(isinstance(c, float) and 0 <= c <= os.cpu_count() for c in result["worker_cpu"])


@pytest.mark.timeout(120)
def test_stream_thr_prints_a_line_for_people_without_json():
    done = run_tool("stream_thr.py", "--count", "2000", timeout=110)
    assert "local, acking: 2000 spout tuples in " in done.stdout
    assert " spout tuples/s (" in done.stdout and "load average" in done.stdout


# -- one_sided.py --------------------------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("side", ["recv", "send"])
def test_one_sided_times_one_side_and_counts_its_page_faults(side):
    done = run_tool("one_sided.py", "--side", side, "--count", "20000", "--json", timeout=110)
    result = json.loads(done.stdout.splitlines()[-1])
    assert (result["side"], result["count"], result["impl"]) == (side, 20000, "brokerless")
    assert result["msg_per_s"] > 0
    assert isinstance(result["minor_faults"], int) and result["minor_faults"] >= 0


# -- raw_thr.py ----------------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("bodies", ["copied", "own"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("transport", ["tcp", "ipc"])
def test_raw_thr_receives_every_message_in_each_design(transport, threads, bodies):
    # 2,001 messages: the sender's last sendmsg holds one, not four
    args = ("--transport", transport, "--threads", str(threads), "--bodies", bodies)
    done = run_tool("raw_thr.py", *args, "--size", "4096", "--count", "2001", "--json", timeout=50)
    result = json.loads(done.stdout.splitlines()[-1])
    design = (result["transport"], result["threads"], result["bodies"])
    assert design == (transport, threads, bodies)
    assert result["octets_received"] == 2001 * 4096
    assert result["msg_per_s"] > 0 and result["cpu_us_per_msg"] > 0


@pytest.mark.timeout(30)
@pytest.mark.parametrize("bodies", ["copied", "own"])
def test_raw_thr_reader_cuts_bodies_that_straddle_reads(bench_modules, bodies):
    from raw_thr import Reader

    bodies_sent = [bytes([i]) * (256 + 997 * i) for i in range(60)]  # up to 59 KiB
    wire = b"".join(b"\x02" + len(body).to_bytes(8, "big") + body for body in bodies_sent)
    ours, theirs = socket.socketpair()
    with ours, theirs:

        def send_in_odd_pieces() -> None:
            for start in range(0, len(wire), 7777):
                theirs.sendall(wire[start : start + 7777])

        sender = threading.Thread(target=send_in_odd_pieces)
        sender.start()
        # a read buffer smaller than most frames: they cannot but straddle reads
        reader, got = Reader(ours, bodies, buffer_size=4096), []
        while len(got) < len(bodies_sent):
            got += reader.read()
        sender.join()
    assert got == bodies_sent and reader.held == b""


# -- spark_io.py ---------------------------------------------------------------------------------


def test_records_written_agrees_with_the_log_through_rolls_and_trims(bench_modules, tmp_path):
    from brokerless.spark.wal import WriteAheadLog
    from spark_io import records_written

    assert records_written(tmp_path) == 0
    with WriteAheadLog(tmp_path, fsync=False, segment_bytes=2000) as log:
        for batch in range(1, 8):
            for _ in range(30):  # a 100 B payload, 136 B a record: a new segment every flush
                log.append([b"x" * 100], 0)
            log.flush()
            assert records_written(tmp_path) == log.durable_seq == 30 * batch
            assert len(list(tmp_path.glob("*.wal"))) == (batch if batch <= 4 else batch - 4)
            if batch == 4:
                log.trim(log.durable_seq)  # every segment committed: an empty one names the next
                assert records_written(tmp_path) == log.durable_seq


@pytest.mark.timeout(120)
def test_spark_io_source_alone_measures_the_receiver_and_the_floor(tmp_path):
    done = run_tool(
        "spark_io.py",
        *("--cases", "source-alone", "--rounds", "2", "--seconds", "0.5", "--warmup", "0.2"),
        "--json",
        timeout=110,
    )
    (case,) = json.loads(done.stdout)["cases"]
    assert case["case"] == "source-alone" and case["error"] is None
    assert len(case["brokerless"]) == len(case["pyzmq"]) == len(case["ratios"]) == 2
    assert all(rate > 0 for rate in case["brokerless"] + case["pyzmq"])


@pytest.mark.slow  # a Spark session of its own; the source and sink: test_spark_io.py
@pytest.mark.timeout(400)
def test_spark_io_runs_the_source_and_the_sink_in_spark():
    done = run_tool(
        "spark_io.py",
        *("--cases", "source-spark,sink-spark", "--rounds", "1"),
        *("--seconds", "1", "--warmup", "0.5", "--rows-per-batch", "20000"),
        timeout=390,
    )
    rows = [line for line in done.stdout.splitlines() if line.startswith("| s")]
    assert [row.split(" | ")[0] for row in rows] == [
        "| source → write-ahead log, in a Spark query (noop sink)",
        "| sink (Spark, rate-micro-batch) → pyzmq PULL",
    ]
    assert "records/s" in rows[0] and "rows/s" in rows[1]
    assert all(row.count("**") == 2 for row in rows)  # the median ratio
    assert "- Condition: no load added" in done.stdout and "Spark 4." in done.stdout


@pytest.mark.timeout(30)
def test_a_tcp_trial_gets_two_free_ports_outside_the_ephemeral_range(bench_modules, tmp_path):
    """compare.py's tcp endpoint and its successor (the tools' control channel) are free, and
    outside the range that port-0 binds and connections' source ports come from: there, after
    a burst of connections, 100 port-0 binds once found no port whose successor was free
    (CI, 2026-11-30)."""
    import compare

    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    for _ in range(20):
        endpoint = compare.endpoint_for("tcp", str(tmp_path))
        assert endpoint is not None and endpoint.startswith("tcp://127.0.0.1:")
        port = int(endpoint.rsplit(":", 1)[1])
        assert not low <= port <= high and not low <= port + 1 <= high
        with socket.socket() as data, socket.socket() as control:
            for sock in (data, control):  # as the tools bind: a port in TIME-WAIT is theirs too
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            data.bind(("127.0.0.1", port))
            control.bind(("127.0.0.1", port + 1))


@pytest.mark.timeout(120)
def test_busy_processes_are_stopped_when_compare_is_interrupted():
    bench = subprocess.Popen(
        [sys.executable, "compare.py", "--busy", "2", "--cases", "tcp-thr-100", "--rounds", "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
        cwd=BENCH,
    )
    try:
        assert bench.stderr is not None
        for line in bench.stderr:  # the header, then the case starts
            if line.startswith(b"case 1/1: tcp-thr-100"):
                break
        try:
            started = wait_for(
                lambda: len(found := descendants(bench.pid)) >= 4 and found,
                timeout=60,
                what="two busy processes and a trial's two processes",
            )
        except AssertionError as exc:  # (once in CI: say what compare.py was doing)
            ended = bench.poll() is not None
            said = bench.stderr.read().decode(errors="replace") if ended else ""
            raise AssertionError(
                f"{exc}; compare.py {'exited ' + str(bench.returncode) if ended else 'runs'}:\n"
                f"{said or describe_tree(bench.pid)}"
            ) from None
        bench.send_signal(signal.SIGINT)
        out, err = bench.communicate(timeout=60)
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
    assert bench.returncode == 130 and out == b"" and b"interrupted" in err
    wait_for(lambda: all(gone(pid) for pid in started), timeout=30, what="every child to end")
