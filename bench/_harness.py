"""Shared helpers for the benchmark tools: loading an implementation by module name, describing
it, and printing a result either for people or as one JSON line for ``compare.py``.

Every tool takes the implementation as a module name (``zmq`` for pyzmq, the reference, or
``brokerless``) and runs the same code against it, through pyzmq's API only.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import platform
import signal
import socket
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parent.parent


class ImplError(Exception):
    """The implementation module can't be imported or lacks what the benchmarks use."""


def load_impl(name: str, required: Iterable[str] = ("Context",)) -> ModuleType:
    """Import the implementation module ``name`` (e.g. ``"zmq"`` or ``"brokerless"``).

    ``required`` names the attributes the caller uses (``Context``, socket types, options); they
    are checked up front so a half-written implementation fails with a message naming what is
    missing, not deep inside a trial.

    A checkout's ``src/`` is tried as a fallback (appended, so an installed package wins), so the
    tools also run from a checkout where brokerless isn't installed yet.
    """
    try:
        module = _import(name)
    except ImportError as exc:
        hint = (
            "install pyzmq (`pip install pyzmq`)"
            if name == "zmq"
            else "install the project (`pip install -e .`; `make bench` does it)"
        )
        raise ImplError(f"cannot import implementation {name!r}: {exc}; {hint}") from exc
    missing = [attr for attr in required if not hasattr(module, attr)]
    if missing:
        where = getattr(module, "__file__", None) or list(getattr(module, "__path__", []))
        raise ImplError(
            f"implementation {name!r} (from {where}) lacks {', '.join(missing)}: "
            "not a pyzmq-compatible module yet?"
        )
    return module


def _import(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        src = REPO / "src"
        if exc.name != name.partition(".")[0] or not (src / name.partition(".")[0]).is_dir():
            raise
        if str(src) not in sys.path:
            sys.path.append(str(src))
        return importlib.import_module(name)


def load_impl_or_exit(name: str, required: Iterable[str] = ("Context",)) -> ModuleType:
    """``load_impl``, printing the reason and exiting with status 2 when it fails."""
    try:
        return load_impl(name, required)
    except ImplError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def describe(impl: ModuleType) -> dict[str, str]:
    """Module name, version(s) and where it was imported from."""
    # (brokerless's own release; its __version__ is the pyzmq API it implements)
    version = getattr(impl, "BROKERLESS_VERSION", None) or getattr(impl, "__version__", "?")
    info = {"impl": impl.__name__, "version": str(version)}
    zmq_version = getattr(impl, "zmq_version", None)
    if callable(zmq_version):
        info["libzmq"] = str(zmq_version())
    info["file"] = str(getattr(impl, "__file__", "") or "")
    return info


def cpu_model() -> str:
    """The CPU's model name, for a report's header."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far, all its threads (Linux ``/proc``;
    OSError where there is none)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()  # (the name may hold spaces)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold SIGINT (Ctrl-C) back while the block runs; it arrives when the block ends.

    A runner starts a trial's processes in this block: a ``KeyboardInterrupt`` raised inside
    ``subprocess.Popen`` after its fork would lose the new process (started, but never handed
    back to be stopped).  The processes inherit the blocked SIGINT; a runner stops them with
    other signals, and each runs in a session of its own, out of the terminal's reach anyway.
    """
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def plain_pair(transport: str) -> tuple[socket.socket, socket.socket]:
    """Two connected plain OS sockets, ours and theirs (for a forked peer): over tcp on the
    loopback with TCP_NODELAY, or a Unix socket pair for ``ipc``."""
    if transport != "tcp":
        return socket.socketpair()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        ours = socket.create_connection(listener.getsockname())
        theirs, _ = listener.accept()
    for sock in (ours, theirs):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return ours, theirs


def emit(result: dict[str, Any], as_json: bool, human: str) -> None:
    """Print ``result`` as one JSON line (for ``compare.py``) or ``human`` for people."""
    if as_json:
        print(json.dumps(result, sort_keys=True), flush=True)
    else:
        print(human, flush=True)


def receive_timed(pull: Any, count: int, frames: int, copy: bool) -> tuple[int, int, list]:
    """Receive ``count`` messages, timed like perf/local_thr from the first to the last.

    Returns (start ns, stop ns, the last message's frames)."""
    clock = time.perf_counter_ns
    if frames == 1:
        recv = pull.recv
        last = recv(copy=copy)
        start = clock()
        for _ in range(count - 1):
            last = recv(copy=copy)
        return start, clock(), [last]
    recv_multipart = pull.recv_multipart
    received = recv_multipart(copy=copy)
    start = clock()
    for _ in range(count - 1):
        received = recv_multipart(copy=copy)
    return start, clock(), received


def ping_pong(req: Any, size: int, count: int, warmup: int) -> tuple[int, int, list, Any]:
    """``warmup`` untimed then ``count`` timed round trips of ``size`` bytes on a REQ socket.

    Returns (start ns, stop ns, each round trip in ns, the last reply)."""
    payload = b"\0" * size
    send, recv = req.send, req.recv
    for _ in range(warmup):
        send(payload)
        recv()
    clock = time.perf_counter_ns
    rtts = [0] * count
    reply = None
    start = clock()
    for i in range(count):
        t0 = clock()
        send(payload)
        reply = recv()
        rtts[i] = clock() - t0
    return start, clock(), rtts, reply


#: Fixed CURVE key pairs for the benchmarks (Z85 secrets; the public keys are derived).
_CURVE_SECRETS = {
    "server": b"JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6",
    "client": b"D:)Q[IlAW!ahhC2ac:9*A}h:p?([4%wOTJ%JR%cs",
}


def use_curve(impl: ModuleType, sock: Any, server: bool) -> None:
    """Make ``sock`` the CURVE server (``server``) or a client of it, with fixed keys (no ZAP
    handler: every client is accepted, as libzmq does)."""
    server_public = impl.curve_public(_CURVE_SECRETS["server"])
    if server:
        sock.setsockopt(impl.CURVE_SERVER, 1)
        sock.setsockopt(impl.CURVE_SECRETKEY, _CURVE_SECRETS["server"])
        sock.setsockopt(impl.CURVE_PUBLICKEY, server_public)
    else:
        sock.setsockopt(impl.CURVE_SERVERKEY, server_public)
        sock.setsockopt(impl.CURVE_SECRETKEY, _CURVE_SECRETS["client"])
        sock.setsockopt(impl.CURVE_PUBLICKEY, impl.curve_public(_CURVE_SECRETS["client"]))
