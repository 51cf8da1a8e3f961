"""SSH tunnels for brokerless connections (pyzmq's ``zmq.ssh.tunnel``).

Theory of operation
-------------------
``tunnel_connection(sock, "tcp://10.0.0.5:5555", "user@gateway")`` connects ``sock`` to an
address that only ``gateway`` can reach: it picks a free local port, has ssh forward
``127.0.0.1:port`` to ``10.0.0.5:5555`` as seen from the gateway, and connects the socket to
``tcp://127.0.0.1:port``.

The system's ``ssh`` (``openssh_tunnel``, the default) is run as a child in its own session --
Ctrl-C in the terminal does not reach it, and it outlives this process -- with the command
``sleep TIMEOUT`` on the server, so a tunnel nobody used within ``timeout`` seconds closes by
itself, and one in use closes once its last forwarded connection does.  The child tells when
its forward listens (a ``LocalCommand`` that prints a line, run once the forwards are set up),
so the socket connects only then; its pid is what ``openssh_tunnel`` returns (kill it to close
the tunnel).  ssh runs without a terminal: a password or key passphrase given as ``password``
reaches it through ``SSH_ASKPASS`` (a helper that answers password and passphrase prompts only,
so an unknown host key is refused, never accepted; see ``_environment``); with no password, ssh
must log in without one (``BatchMode``).  If ssh already runs a control master for the server
(``ssh -O check``), the forward is added to it instead and cancelled at exit, as pyzmq does.

``paramiko_tunnel`` does the same with paramiko, in a child process, where paramiko is
installed (pyzmq's choice on Windows).  ``SSH_COMMAND`` is the ssh client and any options to
put first (``("ssh", "-F", "/path/to/config")``).
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import re
import selectors
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from getpass import getpass, getuser
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..socket import Socket

#: The ssh client command, and options to put before brokerless's own.
SSH_COMMAND: tuple[str, ...] = ("ssh",)

#: How long ssh may take to log in and set up the forward before the tunnel counts as failed.
READY_TIMEOUT = 60.0

_READY = "brokerless-ssh-tunnel-ready"


try:
    import paramiko as _paramiko
    from paramiko import SSHException

    from .forward import serve_tunnel
except ImportError:
    _paramiko = None  # type: ignore[assignment]  # paramiko is optional: see _paramiko_client

    class SSHException(Exception):  # type: ignore[no-redef]
        """ssh refused or failed: the host key, the login, the forward (paramiko's own class
        where paramiko is installed)."""


class MaxRetryExceeded(Exception):
    """Kept for pyzmq's API: brokerless never retries a password prompt (ssh runs without a
    terminal and gets the password once)."""


def select_random_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports that are free now (all held open until all are found)."""
    held = []
    try:
        for _ in range(n):
            sock = socket.socket()
            sock.bind(("", 0))
            held.append(sock)
        return [sock.getsockname()[1] for sock in held]
    finally:
        for sock in held:
            sock.close()


def _split_server(server: str) -> tuple[str, str, int | None]:
    """``user@host:port`` → (user, host, port); the user defaults to this one, the port to
    None (ssh's default, or its config's)."""
    user, _, hostport = server.rpartition("@")
    host, sep, port = hostport.partition(":")
    if sep and not port.isdigit():
        raise ValueError(f"bad ssh server {server!r}: expected [user@]host[:port]")
    return user or getuser(), host, int(port) if sep else None


def _ssh(server: str, keyfile: str | None, *options: str) -> list[str]:
    """The ssh command line up to the destination: SSH_COMMAND, ``options``, -i, -p, then
    ``[user@]host``."""
    user, host, port = _split_server(server)
    command = [*SSH_COMMAND, *options]
    if keyfile:
        command += ["-i", keyfile]
    if port is not None:
        command += ["-p", str(port)]
    return [*command, f"{user}@{host}" if "@" in server else host]


# -- passwordless? --------------------------------------------------------------------------------


def try_passwordless_ssh(server: str, keyfile: str | None, paramiko: bool | None = None) -> bool:
    """Whether ssh logs in to ``server`` without a password (with ``keyfile`` or the usual
    keys); raises SSHException when the host key is unknown or does not match."""
    if paramiko is None:
        paramiko = sys.platform == "win32"
    if paramiko:
        return _try_passwordless_paramiko(server, keyfile)
    return _try_passwordless_openssh(server, keyfile)


def _try_passwordless_openssh(server: str, keyfile: str | None) -> bool:
    result = subprocess.run(
        [*_ssh(server, keyfile, "-o", "BatchMode=yes"), "exit"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=READY_TIMEOUT,
    )
    if result.returncode == 0:
        return True
    _raise_for_host_key(result.stderr)
    return False


def _raise_for_host_key(stderr: str) -> None:
    if "Host key verification failed" in stderr or "HOST IDENTIFICATION HAS CHANGED" in stderr:
        raise SSHException(f"The authenticity of the host can't be established: {stderr.strip()}")


def _try_passwordless_paramiko(server: str, keyfile: str | None) -> bool:
    client = _paramiko_client()
    user, host, port = _split_server(server)
    try:
        client.connect(host, port or 22, username=user, key_filename=keyfile, look_for_keys=True)
    except _paramiko.AuthenticationException:
        return False
    client.close()
    return True


# -- tunnels --------------------------------------------------------------------------------------


def tunnel_connection(
    socket: Socket[Any],
    addr: str,
    server: str,
    keyfile: str | None = None,
    password: str | None = None,
    paramiko: bool | None = None,
    timeout: int = 60,
) -> int | BaseProcess:
    """Connect ``socket`` to ``addr`` (``tcp://host:port`` as ``server`` sees it) through an
    ssh tunnel to ``server``; returns the tunnel (a pid, or paramiko's process)."""
    url, tunnel = open_tunnel(
        addr, server, keyfile=keyfile, password=password, paramiko=paramiko, timeout=timeout
    )
    socket.connect(url)
    return tunnel


def open_tunnel(
    addr: str,
    server: str,
    keyfile: str | None = None,
    password: str | None = None,
    paramiko: bool | None = None,
    timeout: int = 60,
) -> tuple[str, int | BaseProcess]:
    """Forward a free local port to ``addr`` through ``server``; returns the local url to
    connect to and the tunnel."""
    transport, sep, where = addr.partition("://")
    host, colon, port = where.rpartition(":")
    if transport != "tcp" or not sep or not colon or not port.isdigit():
        raise ValueError(f"an ssh tunnel carries tcp://host:port endpoints, not {addr!r}")
    (lport,) = select_random_ports(1)
    if paramiko is None:
        paramiko = sys.platform == "win32"
    make = paramiko_tunnel if paramiko else openssh_tunnel
    tunnel = make(
        lport,
        int(port),
        server,
        remoteip=host,
        keyfile=keyfile,
        password=password,
        timeout=timeout,
    )
    return f"tcp://127.0.0.1:{lport}", tunnel


def openssh_tunnel(
    lport: int,
    rport: int,
    server: str,
    remoteip: str = "127.0.0.1",
    keyfile: str | None = None,
    password: str | None = None,
    timeout: int = 60,
) -> int:
    """Forward ``127.0.0.1:lport`` here to ``remoteip:rport`` as seen from ``server``, with the
    system's ssh; returns the pid of the ssh process (see the module docstring)."""
    forward = f"127.0.0.1:{lport}:{remoteip}:{rport}"
    master = _control_master(server, keyfile)
    if master is not None and _run_quiet(_ssh(server, keyfile, "-O", "forward", "-L", forward)):
        atexit.register(_run_quiet, _ssh(server, keyfile, "-O", "cancel", "-L", forward))
        return master
    command = _ssh(
        server,
        keyfile,
        "-S",
        "none",
        "-n",
        "-o",
        "ExitOnForwardFailure=yes",
        "-o",
        "PermitLocalCommand=yes",
        "-o",
        f"LocalCommand=echo {_READY}",
        "-o",
        f"BatchMode={'no' if password is not None else 'yes'}",
        "-L",
        forward,
    )
    with _environment(password) as env, tempfile.TemporaryFile("w+") as errors:
        ssh = subprocess.Popen(
            [*command, "sleep", str(int(timeout))],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
            env=env,
            start_new_session=True,  # Ctrl-C in our terminal is not for the tunnel
            text=True,
        )
        if _wait_ready(ssh):
            return ssh.pid
        ssh.kill()
        ssh.wait()
        errors.seek(0)
        message = errors.read().strip()
    _raise_for_host_key(message)
    raise SSHException(f"ssh tunnel {forward} via {server} failed: {message or 'no reason given'}")


def _wait_ready(ssh: subprocess.Popen[str]) -> bool:
    """Whether ssh printed the ready line (its forward listens) within READY_TIMEOUT."""
    deadline = time.monotonic() + READY_TIMEOUT
    output = ssh.stdout
    assert output is not None, "ssh runs with stdout=PIPE"
    with selectors.DefaultSelector() as selector:
        selector.register(output, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0:
            if not selector.select(left):
                break
            line = output.readline()
            if not line:
                return False  # ssh ended: it says why on stderr
            if line.strip() == _READY:
                return True
    return False


def _control_master(server: str, keyfile: str | None) -> int | None:
    """The pid of the control master ssh runs for this server, if any."""
    result = subprocess.run(
        _ssh(server, keyfile, "-O", "check"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=READY_TIMEOUT,
    )
    found = re.search(r"\(pid=(\d+)\)", result.stdout + result.stderr)
    return int(found.group(1)) if result.returncode == 0 and found else None


def _run_quiet(command: list[str]) -> bool:
    done = subprocess.run(
        command, stdin=subprocess.DEVNULL, capture_output=True, timeout=READY_TIMEOUT
    )
    return done.returncode == 0


@contextlib.contextmanager
def _environment(password: str | None) -> Iterator[dict[str, str]]:
    """ssh's environment.  With a password, SSH_ASKPASS names a helper that answers password
    and passphrase prompts (and no other) with it, read from a file beside it: both live in a
    private directory removed when the tunnel is up, so the password is in no process's
    environment and on disk only while ssh logs in."""
    env = dict(os.environ)
    env.pop("SSH_ASKPASS", None)
    if password is None:
        yield env
        return
    with tempfile.TemporaryDirectory(prefix="brokerless-ssh-") as directory:
        secret = os.path.join(directory, "password")
        with open(os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as file:
            file.write(password)
        helper = os.path.join(directory, "askpass")
        with open(helper, "w") as script:
            script.write(_ASKPASS.format(python=sys.executable, secret=secret))
        os.chmod(helper, stat.S_IRWXU)
        env.update(SSH_ASKPASS=helper, SSH_ASKPASS_REQUIRE="force")
        env.setdefault("DISPLAY", ":0")  # older ssh asks SSH_ASKPASS only with a DISPLAY
        yield env


_ASKPASS = """#!{python}
import sys
if "pass" not in (sys.argv[1] if len(sys.argv) > 1 else "").lower():
    sys.exit(1)  # not a password or passphrase prompt (a host key question): refused
with open({secret!r}) as secret:
    sys.stdout.write(secret.read() + "\\n")
"""


# -- paramiko -------------------------------------------------------------------------------------


def _paramiko_client() -> _paramiko.SSHClient:
    if _paramiko is None:
        raise ImportError(
            "paramiko is not installed: pip install paramiko, or use openssh_tunnel "
            "(the system's ssh)"
        )
    client = _paramiko.SSHClient()
    client.load_system_host_keys()  # known hosts only: an unknown host is refused
    return client


def paramiko_tunnel(
    lport: int,
    rport: int,
    server: str,
    remoteip: str = "127.0.0.1",
    keyfile: str | None = None,
    password: str | None = None,
    timeout: int = 60,
) -> BaseProcess:
    """Forward ``127.0.0.1:lport`` to ``remoteip:rport`` as seen from ``server`` with paramiko,
    in a daemon child process (returned once the forward listens; ``timeout`` is not used, as
    in pyzmq: the tunnel lives as long as the process).  Asks for a password when no key logs
    in."""
    _paramiko_client()  # paramiko is there
    if password is None and not _try_passwordless_paramiko(server, keyfile):
        password = getpass(f"{server}'s password: ")
    user, host, port = _split_server(server)
    context = multiprocessing.get_context("spawn")  # no threads of ours forked into it
    ready, told = context.Pipe(duplex=False)
    process = context.Process(
        target=serve_tunnel,
        args=(lport, rport, user, host, port or 22, remoteip, told),
        kwargs={"keyfile": keyfile, "password": password},
        daemon=True,
    )
    process.start()
    told.close()
    failure = ready.recv() if ready.poll(READY_TIMEOUT) else "no answer"
    if failure is None:
        return process
    process.terminate()
    process.join()
    raise SSHException(f"paramiko tunnel to {remoteip}:{rport} via {server} failed: {failure}")


ssh_tunnel = paramiko_tunnel if sys.platform == "win32" else openssh_tunnel

__all__ = [
    "openssh_tunnel",
    "paramiko_tunnel",
    "ssh_tunnel",
    "try_passwordless_ssh",
    "tunnel_connection",
]
