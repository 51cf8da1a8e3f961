"""The ZeroMQ Guide's chapter-2 programs (examples/guide/) run as real processes.

They are unchanged pyzmq programs (``import zmq``).  Every scenario runs twice: all on
brokerless (through the ``zmq`` alias, ``python -m brokerless.compat.as_zmq``), and *mixed* --
the programs marked ``peer`` below run on pyzmq (libzmq) against brokerless brokers, proxies and
servers.  Under ``BROKERLESS_TEST_AGAINST=pyzmq`` every program runs on pyzmq.

The programs end by themselves (bounded counts, end markers; the publishers wait for their
subscribers), so a scenario is: start the processes, wait for every one to exit 0 within the
deadline, check what each printed.  The interrupt program is the exception: it is stopped with
SIGINT while it blocks in recv.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import brokerless as zmq

from .ports import free_port
from .test_interrupt import read_line, wait_until_asleep

GUIDE = Path(__file__).resolve().parent.parent / "examples" / "guide"
DEADLINE_S = 30.0
ALL_ON_PYZMQ = zmq.__name__ == "zmq"  # BROKERLESS_TEST_AGAINST=pyzmq

# Runs a Guide program on brokerless: its `import zmq` gets brokerless.
ON_BROKERLESS = [sys.executable, "-m", "brokerless.compat.as_zmq"]


class Program:
    """One program's process; its stdout goes to a file, or to a pipe the test reads as it
    runs (``pipe``)."""

    def __init__(self, name: str, args: list[str], on_pyzmq: bool, out_dir: Path, pipe: bool):
        self.name = name
        self.on_pyzmq = on_pyzmq
        self.stdout_path = out_dir / f"{name}-{id(self):x}.out"
        self.stderr_path = out_dir / f"{name}-{id(self):x}.err"
        script = str(GUIDE / name)
        command = [sys.executable, script] if on_pyzmq else [*ON_BROKERLESS, script]
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen(
                [*command, *args],
                stdout=subprocess.PIPE if pipe else out,
                stderr=err,
                env=os.environ.copy(),
            )
        self._read = ""  # what the test read from the pipe so far

    def readline(self, deadline: float) -> str:
        line = read_line(self.proc, deadline)
        self._read += line
        return line

    @property
    def output(self) -> str:
        if self.proc.stdout is None:
            return self.stdout_path.read_text()
        if self.proc.poll() is not None:
            self._read += self.proc.stdout.read().decode()
        return self._read

    def describe(self) -> str:
        impl = "pyzmq" if self.on_pyzmq else "brokerless"
        return (
            f"{self.name} on {impl}, exit {self.proc.returncode}\n"
            f"stdout: {self.output}\nstderr: {self.stderr_path.read_text()}"
        )


class Scenario:
    """Starts the programs of one scenario and checks they all end well."""

    def __init__(self, mixed: bool, out_dir: Path):
        self.mixed = mixed
        self.out_dir = out_dir
        self.programs: list[Program] = []

    def start(self, name: str, *args: str | int, peer: bool = False, pipe: bool = False) -> Program:
        """Start examples/guide/``name``; a ``peer`` runs on pyzmq in the mixed scenario."""
        on_pyzmq = ALL_ON_PYZMQ or (peer and self.mixed)
        program = Program(name, [str(a) for a in args], on_pyzmq, self.out_dir, pipe)
        self.programs.append(program)
        return program

    def finish(self) -> None:
        """Every program exits 0 before the deadline (else all are killed and the test fails)."""
        deadline = time.monotonic() + DEADLINE_S
        for program in self.programs:
            try:
                program.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(
                    f"{program.name} still runs after {DEADLINE_S} s:\n"
                    + "\n".join(p.describe() for p in self.programs)
                ) from None
        for program in self.programs:
            assert program.proc.returncode == 0, program.describe()
            assert "Traceback" not in program.stderr_path.read_text(), program.describe()

    def kill(self) -> None:
        for program in self.programs:
            if program.proc.poll() is None:
                program.proc.kill()
            program.proc.wait()
            if program.proc.stdout is not None:
                program.proc.stdout.close()


@pytest.fixture(params=["brokerless", "mixed"])
def scenario(request, tmp_path):
    scenario = Scenario(request.param == "mixed", tmp_path)
    yield scenario
    scenario.kill()


def tcp() -> str:
    return f"tcp://127.0.0.1:{free_port()}"


def lines(program: Program) -> list[str]:
    return program.output.splitlines()


def check_clients(clients, requests: int) -> None:
    for client in clients:
        assert lines(client) == [f"Received reply {n} [World]" for n in range(1, requests + 1)]


@pytest.mark.parametrize(
    ("broker", "bound", "last_line"),
    [
        ("rrbroker.py", "--replies", "Forwarded 10 replies"),  # a Poller loop
        ("msgqueue.py", "--requests", "Queue stopped"),  # zmq.proxy
    ],
)
def test_request_reply_broker(scenario, broker, bound, last_line):
    frontend, backend = tcp(), tcp()
    queue = scenario.start(broker, "--frontend", frontend, "--backend", backend, bound, 10)
    worker = scenario.start("rrworker.py", "--connect", backend, "--requests", 10, peer=True)
    clients = [
        scenario.start("rrclient.py", "--connect", frontend, "--requests", 5, peer=peer)
        for peer in (True, False)
    ]
    scenario.finish()
    check_clients(clients, 5)
    assert lines(worker) == ["Received request: [Hello]"] * 10
    assert lines(queue) == [last_line]


def check_weather(server, clients) -> None:
    """Each client got every update the server sent for its zipcode, and only those."""
    reports = re.findall(r"Sent (\d+) updates for zipcode '(\d+)'", server.output)
    sent = {zipcode: int(n) for n, zipcode in reports}
    assert len(sent) == len(clients), server.output
    for client in clients:
        match = re.fullmatch(
            r"Average temperature for zipcode '(\d+)' was -?[\d.]+F over (\d+) updates\n",
            client.output,
        )
        assert match, client.describe()
        assert int(match[2]) == sent[match[1]], (server.output, client.output)


WEATHER = ("--updates", 2000, "--zipcodes", 10, "--subscribers", 2)


def test_weather_server_and_clients(scenario):
    endpoint = tcp()
    server = scenario.start("wuserver.py", "--bind", endpoint, *WEATHER)
    clients = [
        scenario.start("wuclient.py", "--connect", endpoint, "--zipcode", zipcode, peer=peer)
        for zipcode, peer in (("00003", True), ("00007", False))
    ]
    scenario.finish()
    check_weather(server, clients)


def test_weather_proxy(scenario):
    """The server on one side of the proxy, subscribers on the other: subscriptions go up
    through the proxy (the server waits for them), updates and END come down."""
    upstream, downstream = tcp(), tcp()
    server = scenario.start("wuserver.py", "--bind", upstream, *WEATHER, peer=True)
    proxy = scenario.start("wuproxy.py", "--frontend", upstream, "--backend", downstream)
    clients = [
        scenario.start("wuclient.py", "--connect", downstream, "--zipcode", zipcode, peer=peer)
        for zipcode, peer in (("00002", True), ("00009", False))
    ]
    scenario.finish()
    check_weather(server, clients)
    assert lines(proxy) == ["Weather proxy stopped after END"]


def test_multithreaded_server(scenario):
    endpoint = tcp()
    server = scenario.start("mtserver.py", "--bind", endpoint, "--workers", 3, "--requests", 10)
    clients = [
        scenario.start("rrclient.py", "--connect", endpoint, "--requests", 5, peer=peer)
        for peer in (True, False)
    ]
    scenario.finish()
    check_clients(clients, 5)
    # Worker threads print at the same time: their lines may interleave.
    assert server.output.count("Received request: [Hello]") == 10, server.output
    assert server.output.endswith("Server stopped\n")


def test_multithreaded_relay(scenario):
    relay = scenario.start("mtrelay.py", peer=True)
    scenario.finish()
    assert lines(relay) == ["Test successful!"]


def test_synchronized_publisher(scenario):
    publish, sync = tcp(), tcp()
    publisher = scenario.start(
        "syncpub.py", "--publish", publish, "--sync", sync, "--subscribers", 3, "--updates", 1000
    )
    subscribers = [
        scenario.start("syncsub.py", "--connect", publish, "--sync", sync, peer=peer)
        for peer in (True, False, True)
    ]
    scenario.finish()
    assert lines(publisher) == ["Published 1000 updates to 3 subscribers"]
    for subscriber in subscribers:
        assert lines(subscriber) == ["Received 1000 updates"]


def test_pubsub_envelopes(scenario):
    endpoint = tcp()
    scenario.start("psenvpub.py", "--bind", endpoint, "--messages", 4)
    subscriber = scenario.start("psenvsub.py", "--connect", endpoint, "--messages", 4, peer=True)
    scenario.finish()
    assert lines(subscriber) == ["[B] We would like to see this"] * 4


def test_interrupt_ends_a_blocked_recv_cleanly(scenario):
    program = scenario.start("interrupt.py", "--bind", tcp(), peer=True, pipe=True)
    deadline = time.monotonic() + DEADLINE_S
    assert program.readline(deadline) == "Waiting for a request; Ctrl-C to stop\n"
    wait_until_asleep(program.proc.pid, deadline)  # blocked in recv (see test_interrupt)
    program.proc.send_signal(signal.SIGINT)
    scenario.finish()
    assert lines(program) == [
        "Waiting for a request; Ctrl-C to stop",
        "W: interrupt received, stopping...",
    ]
