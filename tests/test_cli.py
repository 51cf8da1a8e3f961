"""The ``brokerless`` command: sockets between stdin/stdout and pyzmq (libzmq) peers, proxy,
monitor, bench, completion, help; Ctrl-C ends every long-running command with status 130, no
traceback and its sockets closed.

Every command runs as a real subprocess (``python -m brokerless``, or the console script); the
peers are libzmq's, through pyzmq.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import zmq as libzmq

from .ports import free_port
from .processes import descendants, describe_tree, gone
from .stream_topologies import wait_for

ROOT = Path(__file__).resolve().parent.parent
BROKERLESS = [sys.executable, "-m", "brokerless"]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
LOCAL = "tcp://127.0.0.1"


def brokerless(*args: str, stdin: bytes = b"", timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*BROKERLESS, *args], input=stdin, capture_output=True, timeout=timeout, env=ENV
    )


@contextmanager
def started(*args: str, stdin: bool = False) -> Iterator[subprocess.Popen[bytes]]:
    """A brokerless command running in the background (killed if the test leaves it)."""
    process = subprocess.Popen(
        [*BROKERLESS, *args],
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def finish(process: subprocess.Popen[bytes], timeout: float = 30) -> tuple[bytes, bytes]:
    """Its stdin closed, wait for ``process`` to end; returns its stdout and stderr."""
    if process.stdin is not None:
        process.stdin.close()
        process.stdin = None  # (communicate() would flush it)
    try:
        return process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        state = describe_tree(process.pid)
        for pid in descendants(process.pid):  # (the command itself: started() kills it)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        raise AssertionError(
            f"still running after {timeout:g} s, having written {exc.stderr!r} to stderr "
            f"meanwhile:\n{state}"
        ) from None


def interrupt(process: subprocess.Popen[bytes]) -> tuple[bytes, bytes]:
    """Ctrl-C: SIGINT, then its exit status must be 130 with no traceback."""
    process.send_signal(signal.SIGINT)
    out, err = finish(process)
    assert process.returncode == 130, err.decode()
    assert b"Traceback" not in err, err.decode()
    return out, err


@pytest.fixture
def context() -> Iterator[libzmq.Context]:
    ctx = libzmq.Context()
    yield ctx
    ctx.destroy(linger=0)


# -- help, entry points, completion -------------------------------------------------------------

COMMANDS = [
    "pub",
    "sub",
    "push",
    "pull",
    "req",
    "rep",
    "dealer",
    "router",
    "proxy",
    "monitor",
    "bench",
    "demo",
    "stream",
]


@pytest.mark.timeout(120)
def test_every_command_has_help_with_examples():
    top = brokerless("--help")
    assert top.returncode == 0, top.stderr
    for name in COMMANDS:
        assert f"  {name} " in top.stdout.decode()
        shown = brokerless(name, "--help")
        assert shown.returncode == 0, shown.stderr
        assert "Example" in shown.stdout.decode(), name
    for name in ("run", "list", "ui"):
        shown = brokerless("stream", name, "--help")
        assert shown.returncode == 0, shown.stderr
        assert "Example" in shown.stdout.decode(), name


def test_the_console_scripts_are_the_same_command():
    scripts = Path(sys.executable).parent
    assert (
        subprocess.run(
            [scripts / "brokerless", "--help"], capture_output=True, env=ENV, timeout=60
        ).stdout
        == brokerless("--help").stdout
    )
    stream_help = subprocess.run(
        [scripts / "brokerless-stream", "--help"], capture_output=True, env=ENV, timeout=60
    ).stdout
    assert (
        stream_help.replace(b"brokerless-stream", b"brokerless stream")
        == brokerless("stream", "--help").stdout
    )


def test_shell_completion():
    script = brokerless("completion", "bash")
    assert script.returncode == 0 and b"_BROKERLESS_COMPLETE=bash_complete" in script.stdout
    completed = subprocess.run(
        [Path(sys.executable).parent / "brokerless"],
        capture_output=True,
        timeout=60,
        env=dict(
            ENV, _BROKERLESS_COMPLETE="bash_complete", COMP_WORDS="brokerless pro", COMP_CWORD="1"
        ),
    )
    assert b"plain,proxy" in completed.stdout, completed


def test_usage_errors_are_clear():
    wrong = brokerless("push")
    assert wrong.returncode == 2 and b"Missing argument 'ENDPOINT...'" in wrong.stderr
    topic = brokerless("push", f"{LOCAL}:1", "--topic", "x")
    assert topic.returncode == 2 and b"--topic is for pub and sub" in topic.stderr
    option = brokerless("pull", f"{LOCAL}:1", "-o", "nosuch=1")
    assert option.returncode == 2 and b"a socket option's name" in option.stderr
    bad = brokerless("pull", "tcp://nowhere-at-all:x")
    assert bad.returncode == 1 and b"cannot connect 'tcp://nowhere-at-all:x'" in bad.stderr
    assert b"Traceback" not in bad.stderr


# -- sockets <-> stdin/stdout, against libzmq -----------------------------------------------------


def test_push_sends_each_line_as_a_message_to_a_pyzmq_pull(context):
    pull = context.socket(libzmq.PULL)
    port = pull.bind_to_random_port(LOCAL)
    done = brokerless("push", f"{LOCAL}:{port}", stdin=b"one\ntwo\tframes\r\n\nlast")
    assert done.returncode == 0, done.stderr
    assert [pull.recv_multipart() for _ in range(4)] == [
        [b"one"],
        [b"two", b"frames"],
        [b""],
        [b"last"],
    ]


def test_pull_prints_what_a_pyzmq_push_sends_and_stops_after_count(context):
    push = context.socket(libzmq.PUSH)
    port = push.bind_to_random_port(LOCAL)
    with started("pull", f"{LOCAL}:{port}", "-n", "3") as process:
        push.send(b"hello")
        push.send_multipart([b"a", b"b", b""])
        push.send(b"\xffbinary")
        out, err = finish(process)
    assert process.returncode == 0, err
    assert out == b"hello\na\tb\t\n\xffbinary\n"


def test_pub_topic_reaches_a_pyzmq_sub_and_sub_filters_a_pyzmq_pub(context):
    sub = context.socket(libzmq.SUB)
    sub.subscribe(b"news")
    port = sub.bind_to_random_port(LOCAL)
    with started("pub", f"{LOCAL}:{port}", "--topic", "news", stdin=True) as pub:
        # a SUB misses what is published before its subscription arrives (the slow joiner):
        # publish until one gets through
        got = None
        while got is None:
            pub.stdin.write(b"headline\n")
            pub.stdin.flush()
            if sub.poll(50):
                got = sub.recv_multipart()
        pub.stdin.close()
        assert pub.wait(30) == 0
    assert got == [b"news", b"headline"]

    publisher = context.socket(libzmq.PUB)
    port = publisher.bind_to_random_port(LOCAL)
    with started("sub", f"{LOCAL}:{port}", "--topic", "a", "--topic", "c", "-n", "2") as process:
        stop = threading.Event()

        def publish() -> None:
            while not stop.is_set():
                for topic in (b"a", b"b", b"c"):
                    publisher.send_multipart([topic, b"x"])
                stop.wait(0.01)

        sender = threading.Thread(target=publish)
        sender.start()
        try:
            out, err = finish(process)
        finally:
            stop.set()
            sender.join()
    assert process.returncode == 0, err
    assert set(out.splitlines()) <= {b"a\tx", b"c\tx"} and len(out.splitlines()) == 2


def test_req_and_rep_take_turns_with_pyzmq_peers(context):
    rep = context.socket(libzmq.REP)
    port = rep.bind_to_random_port(LOCAL)
    with started("req", f"{LOCAL}:{port}", stdin=True) as req:
        req.stdin.write(b"first\nsecond\n")
        req.stdin.close()
        for _ in range(2):
            rep.send(rep.recv().upper())
        assert req.stdout.read() == b"FIRST\nSECOND\n"
        assert req.wait(30) == 0

    client = context.socket(libzmq.REQ)
    port = client.bind_to_random_port(LOCAL)
    with started("rep", f"{LOCAL}:{port}", stdin=True) as server:
        server.stdin.write(b"yes\nno\n")
        server.stdin.close()
        answers = []
        for question in (b"tea?", b"coffee?"):
            client.send(question)
            answers.append(client.recv())
        assert answers == [b"yes", b"no"]
        assert server.stdout.read() == b"tea?\ncoffee?\n"
        assert server.wait(30) == 0  # no reply left to give: done


def test_router_shows_routing_ids_in_hex_and_replies_to_them(context):
    dealer = context.socket(libzmq.DEALER)
    dealer.routing_id = b"\x00\xffpeer"
    port = dealer.bind_to_random_port(LOCAL)
    with started("router", f"{LOCAL}:{port}", stdin=True) as router:
        dealer.send_multipart([b"", b"ping"])
        line = router.stdout.readline()
        assert line == b"00ff70656572\t\tping\n"
        router.stdin.write(b"00ff70656572\t\tpong\n")
        router.stdin.flush()
        assert dealer.recv_multipart() == [b"", b"pong"]
        router.stdin.write(b"not-hex\tx\n")
        router.stdin.close()
        _, err = finish(router)
    assert router.returncode == 1 and b"is not a routing id in hex" in err
    assert b"Traceback" not in err


def dealer_round_trip(context, *options: str) -> bytes:
    """``brokerless dealer`` (with ``options``) sends hello to a pyzmq ROUTER and prints its
    answer, world; returns the routing id the ROUTER saw."""
    router = context.socket(libzmq.ROUTER)
    router.rcvtimeo = 30_000
    port = router.bind_to_random_port(LOCAL)
    with started("dealer", f"{LOCAL}:{port}", *options, "-n", "1", stdin=True) as dealer:
        dealer.stdin.write(b"\thello\n")
        dealer.stdin.flush()
        peer, empty, body = router.recv_multipart()
        assert (empty, body) == (b"", b"hello")
        router.send_multipart([peer, b"", b"world"])
        out, err = finish(dealer)
    assert dealer.returncode == 0 and out == b"\tworld\n", err
    return peer


def test_dealer_talks_to_a_pyzmq_router(context):
    dealer_round_trip(context)


@pytest.mark.timeout(120)
def test_option_values_are_taken_in_the_options_own_terms(context):
    """-o NAME=VALUE: text where an option takes an integer says so, a number too large for it
    is refused without a traceback, and digits are bytes to an option that takes bytes."""
    text = brokerless("pull", f"{LOCAL}:1", "-o", "rcvhwm=abc")
    assert text.returncode == 2, text.stderr
    assert text.stderr.endswith(
        b"Error: Invalid value for -o/--option: 'rcvhwm=abc': RCVHWM takes an integer, got 'abc'\n"
    )
    huge = brokerless("pull", f"{LOCAL}:1", "-o", "rcvhwm=99999999999")
    assert huge.returncode == 2 and b"does not fit" in huge.stderr, huge.stderr
    assert b"Traceback" not in text.stderr + huge.stderr
    assert dealer_round_trip(context, "-o", "routing_id=42") == b"42"


RAW_MESSAGES = [[b"line\nbreak", b"tab\there"], [b""], [bytes(range(256)) * 3]]


def zmtp(messages: list[list[bytes]]) -> bytes:
    """The ZMTP 3 frames of ``messages`` (RFC 23), written out by hand."""
    out = b""
    for message in messages:
        for i, frame in enumerate(message):
            more = 1 if i < len(message) - 1 else 0
            if len(frame) < 256:
                out += bytes((more, len(frame))) + frame
            else:
                out += bytes((more | 2,)) + len(frame).to_bytes(8, "big") + frame
    return out


def test_raw_framing_passes_any_bytes_both_ways(context):
    pull = context.socket(libzmq.PULL)
    port = pull.bind_to_random_port(LOCAL)
    sent = brokerless("push", "--raw", f"{LOCAL}:{port}", stdin=zmtp(RAW_MESSAGES))
    assert sent.returncode == 0, sent.stderr
    assert [pull.recv_multipart() for _ in RAW_MESSAGES] == RAW_MESSAGES

    push = context.socket(libzmq.PUSH)
    port = push.bind_to_random_port(LOCAL)
    with started("pull", "--raw", f"{LOCAL}:{port}", "-n", "3") as process:
        for message in RAW_MESSAGES:
            push.send_multipart(message)
        out, err = finish(process)
    assert process.returncode == 0, err
    assert out == zmtp(RAW_MESSAGES)


def test_raw_input_that_is_not_frames_is_refused_clearly(context):
    pull = context.socket(libzmq.PULL)
    port = pull.bind_to_random_port(LOCAL)
    cut = brokerless("push", "--raw", f"{LOCAL}:{port}", stdin=zmtp([[b"whole"]]) + b"\x00\x09cut")
    assert cut.returncode == 1 and b"raw input ends in the middle of a frame" in cut.stderr
    assert pull.recv_multipart() == [b"whole"]  # what came before is delivered
    command = brokerless(
        "push", "--raw", f"{LOCAL}:{port}", stdin=zmtp([[b"before"]]) + b"\x04\x05\x04PING"
    )
    assert command.returncode == 1 and b"command frame" in command.stderr
    assert pull.recv_multipart() == [b"before"]
    assert b"Traceback" not in cut.stderr + command.stderr


def test_a_bound_socket_command_and_socket_options(context):
    port = free_port()
    with started("pull", "--bind", f"{LOCAL}:{port}", "-o", "rcvhwm=10", "-n", "1") as process:
        push = context.socket(libzmq.PUSH)
        push.connect(f"{LOCAL}:{port}")
        push.send(b"to a bound pull")
        out, err = finish(process)
    assert process.returncode == 0 and out == b"to a bound pull\n", err


# -- proxy and monitor -----------------------------------------------------------------------


def test_proxy_forwards_requests_and_captures_both_ways(context):
    front, back, spy = free_port(), free_port(), free_port()
    with started(
        "proxy", f"{LOCAL}:{front}", f"{LOCAL}:{back}", "--capture", f"{LOCAL}:{spy}"
    ) as proxy:
        assert proxy.stderr.readline().startswith(b"proxy: ROUTER @tcp://127.0.0.1:")
        capture = context.socket(libzmq.SUB)
        capture.subscribe(b"")
        capture.connect(f"{LOCAL}:{spy}")
        worker = context.socket(libzmq.REP)
        worker.connect(f"{LOCAL}:{back}")
        client = context.socket(libzmq.REQ)
        client.connect(f"{LOCAL}:{front}")
        seen = []
        # the capture SUB may join late: ask until a request and its reply were both seen
        while len(seen) < 2:
            client.send(b"job")
            worker.send(worker.recv() + b" done")
            assert client.recv() == b"job done"
            while capture.poll(100):
                seen.append(capture.recv_multipart()[-1])
        assert b"job" in seen and b"job done" in seen
        interrupt(proxy)
    rebound = context.socket(libzmq.ROUTER)  # its sockets are closed: the ports are free
    rebound.bind(f"{LOCAL}:{front}")


def test_monitor_probes_a_pyzmq_pub_and_prints_events_as_they_happen(context):
    publisher = context.socket(libzmq.PUB)
    port = publisher.bind_to_random_port(LOCAL)
    with started("monitor", f"{LOCAL}:{port}") as monitor:
        lines = []
        for line in monitor.stdout:  # DEALER is refused by a PUB; SUB is accepted
            lines.append(line.decode())
            if "SUB    HANDSHAKE_SUCCEEDED" in line.decode():
                break
        # libzmq refuses the DEALER: PROTOCOL when its READY (a PUB) was read, NO_DETAIL when
        # its close reset the connection first (the kernel drops what was unread)
        assert any("DEALER HANDSHAKE_FAILED_" in line for line in lines), lines
        publisher.close(linger=0)  # the peer goes away: seen at once
        for line in monitor.stdout:
            if "SUB    DISCONNECTED" in line.decode():
                break
        else:
            pytest.fail("no DISCONNECTED event")
        _, err = interrupt(monitor)
    assert b"probe: the peer accepts SUB" in err


def test_monitor_with_a_type_as_json(context):
    rep = context.socket(libzmq.REP)
    port = rep.bind_to_random_port(LOCAL)
    done = brokerless("monitor", f"{LOCAL}:{port}", "--type", "req", "--json", "-n", "3")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line)["event"] for line in done.stdout.splitlines()]
    assert events[-1] == "HANDSHAKE_SUCCEEDED" and "CONNECTED" in events


# -- Ctrl-C ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["pull", "sub", "router", "rep"])
def test_ctrl_c_stops_a_socket_command_cleanly(context, kind):
    port = free_port()
    peer_type = {
        "pull": libzmq.PUSH,
        "sub": libzmq.PUB,
        "router": libzmq.DEALER,
        "rep": libzmq.REQ,
    }[kind]
    message = [b"", b"m"] if kind == "router" else [b"m"]
    with started(kind, "--bind", f"{LOCAL}:{port}", stdin=True) as process:
        peer = context.socket(peer_type)
        peer.connect(f"{LOCAL}:{port}")
        stop = threading.Event()

        def send() -> None:  # a PUB's first messages go nowhere (the slow joiner): repeat
            peer.send_multipart(message)
            while kind == "sub" and not stop.wait(0.01):
                peer.send_multipart(message)

        sender = threading.Thread(target=send)
        sender.start()
        try:  # once the command has written a message, it is in its loop
            assert process.stdout.readline().endswith(b"m\n")
        finally:
            stop.set()
            sender.join()
        interrupt(process)
    peer.close(linger=0)
    rebound = context.socket(libzmq.PULL)  # the command closed its socket: the port is free
    rebound.bind(f"{LOCAL}:{port}")


@pytest.mark.parametrize("kind", ["pub", "push", "req", "dealer"])
def test_ctrl_c_stops_a_sending_command_cleanly(context, kind):
    """A command reading stdin (pub, push, dealer: waiting for the next line; req: waiting for
    its reply) ends with 130 on Ctrl-C."""
    peer = context.socket(
        {"pub": libzmq.SUB, "push": libzmq.PULL, "req": libzmq.REP, "dealer": libzmq.ROUTER}[kind]
    )
    if kind == "pub":
        peer.subscribe(b"")
    port = peer.bind_to_random_port(LOCAL)
    with started(kind, f"{LOCAL}:{port}", stdin=True) as process:
        lines = 300 if kind == "pub" else 1  # a PUB drops lines until the subscription is in
        for _ in range(lines):
            process.stdin.write(b"m\n")
            process.stdin.flush()
            if peer.poll(100 if kind == "pub" else 30_000):
                break
        assert peer.recv_multipart(libzmq.NOBLOCK)[-1] == b"m"  # it is in its loop
        interrupt(process)  # stdin still open: it waits for more input (req: for the reply)


def test_ctrl_c_stops_a_push_waiting_to_deliver():
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never speaks ZMTP
        port = silent.getsockname()[1]
        with started("push", f"{LOCAL}:{port}", stdin=True) as process:
            process.stdin.write(b"nobody reads this\n")
            process.stdin.close()  # it reads everything, then waits (LINGER -1) to deliver
            connection, _ = silent.accept()  # it has started and connected
            with connection:
                interrupt(process)


# A Ctrl-C as the command closes its socket to deliver what is queued, before the wait starts
# (a window of a few bytecodes, met once in CI): the close itself raises KeyboardInterrupt.
_CTRL_C_IN_THE_CLOSE = """
import sys
import brokerless as zmq
from brokerless.cli import main

close = zmq.Socket.close

def close_then_ctrl_c(self, linger=None):
    close(self, linger)
    if linger == -1:
        raise KeyboardInterrupt

zmq.Socket.close = close_then_ctrl_c
sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_as_a_push_starts_to_deliver_stops_it_too():
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never speaks ZMTP
        port = silent.getsockname()[1]
        process = subprocess.run(
            [sys.executable, "-c", _CTRL_C_IN_THE_CLOSE, "push", f"{LOCAL}:{port}"],
            input=b"nobody reads this\n",
            capture_output=True,
            env=ENV,
            timeout=30,
        )
    assert process.returncode == 130, process.stderr.decode()
    assert b"undelivered messages dropped" in process.stderr
    assert b"Traceback" not in process.stderr


# -- bench and demo --------------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_bench_runs_the_comparison_and_plots_it(tmp_path):
    picture = tmp_path / "ratios.png"
    done = brokerless(
        "bench",
        "--quick",
        "--rounds",
        "1",
        "--scale",
        "0.1",
        "--cases",
        "inproc-thr-100,inproc-lat-1",
        "--plot",
        str(picture),
        timeout=170,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert b"| inproc PUSH" in done.stdout and b"| inproc REQ/REP" in done.stdout
    assert b"case 1/2: inproc-thr-100" in done.stderr  # progress
    assert picture.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


@pytest.mark.timeout(120)
def test_ctrl_c_stops_bench_and_its_trials():
    with started("bench", "--rounds", "3", "--cases", "tcp-thr-100") as bench:
        for line in bench.stderr:  # the header, then the case starts
            if line.startswith(b"case 1/1: tcp-thr-100"):
                break
        trials = wait_for(
            lambda: len(found := descendants(bench.pid)) >= 3 and found,
            timeout=60,
            what="compare.py and a trial's two processes",
        )
        out, err = interrupt(bench)
    assert out == b"" and b"interrupted\n" in err  # stopped mid-case, no report
    wait_for(lambda: all(gone(pid) for pid in trials), timeout=30, what="the trials to end")


@pytest.mark.timeout(60)
def test_bench_into_a_reader_that_went_away_ends_quietly():
    # `brokerless bench --list | head -1`, the reader gone before the first line
    process = subprocess.Popen(
        [*BROKERLESS, "bench", "--list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    err = process.stderr.read()
    process.stderr.close()
    assert process.wait(timeout=50) == 141, err.decode()  # 128 + SIGPIPE, as a shell says
    assert b"Traceback" not in err and b"Exception ignored" not in err, err.decode()


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "command",
    [["stream", "list"], ["stream", "run", "brokerless.stream.examples:word_count", "--local"]],
)
def test_a_command_whose_reader_went_away_ends_quietly_with_141(command):
    # `brokerless stream list | head -0`: the reader gone before the first line (click's own
    # handling of it exits with 1, which says nothing of what happened)
    process = subprocess.Popen(
        [*BROKERLESS, *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    err = process.stderr.read()
    process.stderr.close()
    assert process.wait(timeout=100) == 141, err.decode()
    assert b"Traceback" not in err and b"Exception ignored" not in err, err.decode()


def test_bench_without_a_checkout_says_where_to_get_one(tmp_path):
    done = brokerless("bench", "--bench-dir", str(tmp_path))
    assert done.returncode == 1
    assert b"has no compare.py" in done.stderr and b"pip install -e" in done.stderr


@pytest.mark.slow  # the demo itself runs in test_spark_topology.py
@pytest.mark.timeout(240)
def test_demo_runs_the_spark_pipeline():
    done = subprocess.run(
        [*BROKERLESS, "demo", "--workers", "1", "--lines", "300", "--top", "3"],
        capture_output=True,
        timeout=230,
        env=ENV,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    out = done.stdout.decode()
    assert "Equal to a plain collections.Counter over the same text." in out
    # The live display's last line is the final state, and agrees with the final table (it
    # showed the top bolt's last report before it, a little behind its counts).
    progress = re.findall(r"^\[ *[\d.]+ s\] (.*)$", out, re.M)
    last = re.fullmatch(
        r"300/300 lines \(100%\), ([\d,]+) words counted, .*; top: (.*)", progress[-1]
    )
    assert last, progress
    total = re.search(r"^Top 3 words of .* \(300 lines, ([\d,]+) words,", out, re.M)
    assert total and total[1] == last[1], out
    table = re.findall(r"^ +\d\. (\S+) +([\d,]+)$", out, re.M)
    assert len(table) == 3 and last[2] == ", ".join(f"{w} {c}" for w, c in table), out
