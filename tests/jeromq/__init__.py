"""JeroMQ 0.3.6 (Debian's ``libjeromq-java``, a ZMTP 2.0 implementation) as a test peer.

``Peer.java`` is compiled with ``javac`` into a temporary directory and run in one JVM; each
:class:`JeroSocket` is a JeroMQ socket in it, driven one command line at a time (the protocol is
described in Peer.java).  Every exchange with the JVM is bounded by a deadline.
"""

from __future__ import annotations

import os
import select
import shutil
import socket
import subprocess
import time
from pathlib import Path

JAR = Path("/usr/share/java/jeromq.jar")
SOURCE = Path(__file__).with_name("Peer.java")
INSTALL = "apt-get install -y libjeromq-java default-jdk-headless"
TIMEOUT = 15.0  # seconds a command may take (a recv waits at most its own timeout, below this)


def requirements_missing() -> str | None:
    """Why the JeroMQ peer cannot run here (None: it can)."""
    missing = [tool for tool in ("javac", "java") if shutil.which(tool) is None]
    if not JAR.is_file():
        missing.append(str(JAR))
    return f"missing {', '.join(missing)} ({INSTALL})" if missing else None


class JeroMQ:
    """One JVM holding JeroMQ sockets."""

    def __init__(self, workdir: Path) -> None:
        subprocess.run(
            ["javac", "-cp", str(JAR), "-d", str(workdir), str(SOURCE)],
            check=True,
            capture_output=True,
            timeout=300,
        )
        self._proc = subprocess.Popen(
            ["java", "-cp", f"{JAR}:{workdir}", "Peer"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
        )
        self._pending = b""

    def socket(self, kind: str) -> JeroSocket:
        return JeroSocket(self, self.call("new", kind))

    def call(self, *words: str) -> str:
        """Send one command; its reply line (an ``error`` reply fails the test)."""
        self._proc.stdin.write(" ".join(words).encode() + b"\n")
        line = self._readline()
        if line.startswith("error"):
            raise AssertionError(f"JeroMQ: {' '.join(words)[:80]}: {line}")
        return line

    def _readline(self) -> str:
        deadline = time.monotonic() + TIMEOUT
        out = self._proc.stdout.fileno()
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([out], [], [], left)[0]:
                raise AssertionError(f"the JeroMQ peer did not answer within {TIMEOUT}s")
            chunk = os.read(out, 1 << 20)
            if not chunk:
                raise AssertionError(f"the JeroMQ peer exited ({self._proc.wait()})")
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode()

    def close(self) -> None:
        self._proc.stdin.close()  # it closes its sockets and exits
        try:
            self._proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


class JeroSocket:
    """A JeroMQ socket, with the calls the interop tests make (linger 0, send timeout 5 s)."""

    def __init__(self, jvm: JeroMQ, ident: str) -> None:
        self._jvm = jvm
        self._id = ident

    def bind(self) -> str:
        """Bind to a port the kernel picks, as brokerless and libzmq do for ``:*``.  (JeroMQ
        0.3.6's bindToRandomPort takes the first free port from 49152 up, the same one test
        after test, where a socket of an earlier test -- here or in another process -- may
        still be reconnecting: a REQ or DEALER would then share its messages with it.)"""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            endpoint = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
        self._call("bind", endpoint)
        return endpoint

    def connect(self, endpoint: str) -> None:
        self._call("connect", endpoint)

    def set_identity(self, identity: bytes) -> None:
        self._call("identity", _frame(identity))

    def subscribe(self, topic: bytes) -> None:
        self._call("subscribe", _frame(topic))

    def unsubscribe(self, topic: bytes) -> None:
        self._call("unsubscribe", _frame(topic))

    def send(self, parts: list[bytes]) -> None:
        self._call("send", *map(_frame, parts))

    def recv(self, timeout_ms: int) -> list[bytes] | None:
        """The next message's frames, or None when none comes within ``timeout_ms``."""
        reply = self._call("recv", str(timeout_ms))
        return None if reply == "timeout" else [bytes.fromhex(w[1:]) for w in reply.split(" ")]

    def close(self) -> None:
        self._call("close")

    def _call(self, *words: str) -> str:
        return self._jvm.call(self._id, *words)


def _frame(data: bytes) -> str:
    return "x" + data.hex()
