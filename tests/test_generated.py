"""What type checkers see: the generated constants and option attributes are up to date with
the enums, the package is typed (``py.typed``), and mypy reads pyzmq-style code on brokerless
as pyzmq's stubs would have it (flat constants, ``recv`` overloaded on ``copy``, typed options,
generic Context).  Both run subprocesses on the source tree, whichever implementation the rest
of the suite is pointed at.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "brokerless"


def test_generated_code_is_up_to_date():
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_constants.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr


def test_the_package_is_marked_typed():
    assert (PACKAGE / "py.typed").exists()


PROGRAM = """\
import brokerless as zmq

ctx = zmq.Context()
sock = ctx.socket(zmq.PULL)
data: bytes = sock.recv(zmq.NOBLOCK)
frame: zmq.Frame = sock.recv(copy=False)
parts: list[bytes] = sock.recv_multipart()
frames: list[zmq.Frame] = sock.recv_multipart(0, False)
hwm: int = sock.sndhwm + sock.RCVHWM
ident: bytes = sock.IDENTITY
sock.linger = 0
event: zmq.Event = zmq.EVENT_CONNECTED | zmq.PROTOCOL_ERROR_ZMTP_UNSPECIFIED
kind: zmq.SocketType = zmq.PUSH
threads: int = ctx.io_threads
sync: zmq.SyncContext = zmq.Context.shadow(ctx)


class Mine(zmq.Socket[bytes]):
    pass


class MyContext(zmq.Context[Mine]):
    _socket_class = Mine


mine: Mine = MyContext().socket(zmq.PUSH)
wrong: bytes = sock.recv(copy=False)
"""


def mypy_errors(tmp_path: Path, program_text: str) -> tuple[Path, list[str], str]:
    """mypy's errors on ``program_text`` (brokerless from the source tree), with its output."""
    program = tmp_path / "program.py"
    program.write_text(textwrap.dedent(program_text))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--disallow-untyped-calls",
            "--follow-imports=silent",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(program),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={"MYPYPATH": str(ROOT / "src"), "PATH": ""},
        check=False,
    )
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    return program, errors, result.stdout


def test_mypy_reads_pyzmq_style_code(tmp_path):
    program, errors, output = mypy_errors(tmp_path, PROGRAM)
    last = len(PROGRAM.splitlines())
    # exactly one error: the last line, where a Frame is not bytes
    assert len(errors) == 1 and errors[0].startswith(f"{program}:{last}:"), output


ASYNC_PROGRAM = """\
from collections.abc import Awaitable

import brokerless as zmq
import brokerless.asyncio as zaio
from brokerless.utils.monitor import MonitorMessage, recv_monitor_message

sync = zmq.Context().socket(zmq.PULL)
wrapped: zaio.Socket = zaio.Socket.from_socket(sync)
monitor: zaio.Socket = wrapped.get_monitor_socket()
pending: Awaitable[MonitorMessage] = recv_monitor_message(monitor)
event: MonitorMessage = recv_monitor_message(sync.get_monitor_socket())
wrong: MonitorMessage = recv_monitor_message(monitor)
"""


def test_mypy_reads_pyzmq_style_asyncio_code(tmp_path):
    """``from_socket`` and ``get_monitor_socket`` give the async class itself, and
    ``recv_monitor_message`` of an async socket is an awaitable (pyzmq's overloads)."""
    program, errors, output = mypy_errors(tmp_path, ASYNC_PROGRAM)
    last = len(ASYNC_PROGRAM.splitlines())
    # exactly one error: the last line, where an awaitable is not the message
    assert len(errors) == 1 and errors[0].startswith(f"{program}:{last}:"), output


SEND_HELPERS_PROGRAM = """\
from collections.abc import Awaitable

import brokerless as zmq
import brokerless.asyncio as zaio


async def main() -> None:
    pub = zaio.Context().socket(zmq.PUB)
    await pub.send_string("text")
    await pub.send_unicode("text")
    await pub.send_pyobj(123)
    await pub.send_json({"a": 5})
    await pub.send_serialized([b"x"], lambda msg: msg)
    tracker: zmq.MessageTracker | None = await pub.send_string("text", track=True)
    wrong: zmq.MessageTracker | None = pub.send_json({})
"""


def test_mypy_reads_the_async_send_helpers_as_awaitables(tmp_path):
    """``send_string``, ``send_json``, ... of an async socket return what its ``send`` does, a
    future (pyzmq's ``_future.pyi``); pyzmq's mypy_tests/test_socket_async.py awaits them.
    Inherited untouched from the sync socket they were typed ``MessageTracker | None``, which
    mypy refused to await once ``ctx.socket()`` was typed as the async socket."""
    program, errors, output = mypy_errors(tmp_path, SEND_HELPERS_PROGRAM)
    last = len(SEND_HELPERS_PROGRAM.splitlines())
    # exactly one error: the last line, where a future is not the tracker
    assert len(errors) == 1 and errors[0].startswith(f"{program}:{last}:"), output


MONITOR_PROGRAM = """\
import brokerless as zmq
from brokerless.utils.monitor import recv_monitor_message


def watch(monitor: zmq.asyncio.Socket) -> None:
    recv_monitor_message(monitor)


wrong: int = zmq.asyncio.Socket
"""


def test_mypy_knows_the_asyncio_module_through_the_monitor_utilities(tmp_path):
    """pyzmq's examples name ``zmq.asyncio.Socket`` after ``import zmq`` and ``from
    zmq.utils.monitor import ...`` only (examples/monitoring): pyzmq's ``utils.monitor`` imports
    ``zmq.asyncio``, which makes the attribute known."""
    program, errors, output = mypy_errors(tmp_path, MONITOR_PROGRAM)
    last = len(MONITOR_PROGRAM.splitlines())
    # exactly one error: the last line, where a class is not an int
    assert len(errors) == 1 and errors[0].startswith(f"{program}:{last}:"), output
