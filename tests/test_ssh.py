"""brokerless.ssh (pyzmq's zmq.ssh): tunnels through a real sshd, started here.

The fixture runs Debian's ``/usr/sbin/sshd`` on a free port of 127.0.0.1 with a host key and a
client key generated for the test, and points the ssh client at its own config (known host,
identity) through ``brokerless.ssh.tunnel.SSH_COMMAND``.  A REP bound on 127.0.0.1 stands for the
service only the ssh server can reach; the REQ reaches it through the tunnel.
"""

from __future__ import annotations

import getpass
import glob
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading

import pytest

import brokerless as zmq
from brokerless.ssh import tunnel
from tests.ports import free_port

# pyzmq's openssh tunnel needs pexpect and reads ssh's config from ~/.ssh only: these tests
# configure ssh through SSH_COMMAND, which is brokerless's.
pytestmark = pytest.mark.beyond_libzmq

SSHD = "/usr/sbin/sshd"
WAIT = 30.0

# Runs sshd and reaps it and every process it leaves: the connections' sshd and the commands
# they ran (a tunnel's ``sleep``) outlive the listener, and this machine's init does not reap
# orphans.  SIGTERM stops sshd, then what is left of it (SIGTERM, never SIGKILL: a login shell
# killed outright can leave its rc files' locks behind); the reaper exits when none is left.
# Once sshd is gone it polls (every 50 ms) rather than blocks in wait(): a process orphaned
# after a look at its children -- its parent ended by that look's SIGTERM -- comes to the
# reaper later, and a blocking wait() for it alone waited as long as it ran (CI: 30 s).
REAPER = """
import ctypes, glob, os, signal, subprocess, sys, time
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans come here
sshd = subprocess.Popen(sys.argv[1:])
signal.signal(signal.SIGTERM, lambda *_: sshd.terminate())
stopped = False
while True:
    try:
        pid, _ = os.waitpid(-1, os.WNOHANG if stopped else 0)
    except ChildProcessError:
        break
    stopped = stopped or pid == sshd.pid
    if stopped:
        for children in glob.glob("/proc/self/task/*/children"):
            for child in open(children).read().split():
                os.kill(int(child), signal.SIGTERM)
        if pid == 0:
            time.sleep(0.05)
"""


def keygen(path, passphrase: str = "") -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-f", str(path)], check=True
    )
    return str(path)


class Sshd:
    """A running sshd that accepts ``self.key`` for this user, and the ssh config to reach it."""

    def __init__(self, tmp_path) -> None:
        self.dir = tmp_path
        self.port = free_port()
        self.user = getpass.getuser()  # as root, or as anyone (sshd then logs in only them)
        self.server = f"{self.user}@127.0.0.1:{self.port}"
        host_key = keygen(tmp_path / "host_key")
        self.key = keygen(tmp_path / "client_key")
        (tmp_path / "authorized_keys").write_text((tmp_path / "client_key.pub").read_text())
        config = tmp_path / "sshd_config"
        config.write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {host_key}\n"
            f"AuthorizedKeysFile {tmp_path}/authorized_keys\nPidFile {tmp_path}/sshd.pid\n"
            "StrictModes no\nUsePAM no\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
            "AllowTcpForwarding yes\nX11Forwarding no\nPrintMotd no\nLogLevel INFO\n"
        )
        self.known_hosts = tmp_path / "known_hosts"
        host_pub = (tmp_path / "host_key.pub").read_text().split()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {host_pub[0]} {host_pub[1]}\n")
        self.client_config = tmp_path / "ssh_config"
        self.client_config.write_text(
            f"Host *\n  UserKnownHostsFile {self.known_hosts}\n  GlobalKnownHostsFile /dev/null\n"
            "  StrictHostKeyChecking yes\n  IdentitiesOnly yes\n  ConnectTimeout 10\n"
            "  LogLevel ERROR\n"
        )
        if os.geteuid() == 0:
            os.makedirs("/run/sshd", exist_ok=True)  # its privilege separation directory
        self.process = subprocess.Popen(
            [sys.executable, "-c", REAPER, SSHD, "-D", "-e", "-f", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.log: list[str] = []
        self._listening = threading.Event()
        threading.Thread(target=self._read_log, daemon=True).start()
        if not self._listening.wait(WAIT):
            self.stop()
            raise AssertionError(f"sshd did not start: {self.log}")

    def _read_log(self) -> None:
        for line in self.process.stderr:
            self.log.append(line.rstrip())
            if "Server listening on" in line:
                self._listening.set()

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(WAIT)


@pytest.fixture
def sshd(tmp_path, monkeypatch):
    if not os.path.exists(SSHD) or shutil.which("ssh") is None:
        pytest.fail("these tests need OpenSSH's server and client (apt-get install openssh-server)")
    server = Sshd(tmp_path)
    monkeypatch.setattr(tunnel, "SSH_COMMAND", ("ssh", "-F", str(server.client_config)))
    yield server
    server.stop()


@pytest.fixture
def service(make):
    """A REP on 127.0.0.1 (what only the ssh server reaches) that answers ``re:`` requests."""
    rep = make(zmq.REP, RCVTIMEO=100)
    port = rep.bind_to_random_port("tcp://127.0.0.1")
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                request = rep.recv()
            except zmq.Again:
                continue
            rep.send(b"re:" + request)

    server = threading.Thread(target=serve)
    server.start()
    yield f"tcp://127.0.0.1:{port}"
    done.set()
    server.join(WAIT)


def exits_within(pid: int, seconds: float) -> bool:
    """Whether process ``pid`` ends within ``seconds`` (watched through a pidfd)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(seconds * 1000))
    finally:
        os.close(fd)


def kill(pid: int) -> None:
    try:
        os.kill(pid, 15)
    except ProcessLookupError:
        pass


def test_select_random_ports():
    for _ in range(200):
        ports = tunnel.select_random_ports(10)
        assert len(set(ports)) == 10
        assert all(1024 <= port < 65536 for port in ports)


def test_tunnel_connection_carries_req_rep(sshd, service, make):
    req = make(zmq.REQ)
    pid = tunnel.tunnel_connection(req, service, sshd.server, keyfile=sshd.key, paramiko=False)
    try:
        assert req.getsockopt(zmq.LAST_ENDPOINT).startswith(b"tcp://127.0.0.1:")
        for i in range(3):
            req.send(b"hello %d" % i)
            assert req.recv() == b"re:hello %d" % i
        assert any(f"Accepted publickey for {sshd.user}" in line for line in sshd.log)
    finally:
        kill(pid)
    assert exits_within(pid, WAIT)  # the pid is the tunnel's: killing it ends the tunnel


def test_unused_tunnel_closes_after_its_timeout(sshd, service):
    url, pid = tunnel.open_tunnel(service, sshd.server, keyfile=sshd.key, timeout=1)
    assert url.startswith("tcp://127.0.0.1:")
    assert exits_within(pid, WAIT)


def test_key_with_a_passphrase_given_as_password(sshd, service, make):
    (sshd.dir / "client_key").unlink()
    (sshd.dir / "client_key.pub").unlink()
    key = keygen(sshd.dir / "client_key", passphrase="open sesame")
    (sshd.dir / "authorized_keys").write_text((sshd.dir / "client_key.pub").read_text())
    req = make(zmq.REQ)
    pid = tunnel.tunnel_connection(req, service, sshd.server, keyfile=key, password="open sesame")
    try:
        req.send(b"through a passphrase")
        assert req.recv() == b"re:through a passphrase"
        with open(f"/proc/{pid}/environ", "rb") as environ:
            assert b"open sesame" not in environ.read()  # nor on disk: its directory is gone
        assert not glob.glob(os.path.join(tempfile.gettempdir(), "brokerless-ssh-*"))
    finally:
        kill(pid)
    with pytest.raises(tunnel.SSHException, match="failed"):
        tunnel.open_tunnel(service, sshd.server, keyfile=key, password="wrong")
    assert not tunnel.try_passwordless_ssh(sshd.server, key)  # it needs its passphrase


def test_try_passwordless_ssh(sshd):
    assert tunnel.try_passwordless_ssh(sshd.server, sshd.key)
    stranger = keygen(sshd.dir / "stranger")
    assert not tunnel.try_passwordless_ssh(sshd.server, stranger)


def test_unknown_host_key_is_refused(sshd, service):
    sshd.known_hosts.write_text("")
    with pytest.raises(tunnel.SSHException, match="authenticity"):
        tunnel.try_passwordless_ssh(sshd.server, sshd.key)
    with pytest.raises(tunnel.SSHException, match="authenticity"):
        tunnel.open_tunnel(service, sshd.server, keyfile=sshd.key)
    # A password does not make the helper accept the host key: it answers password prompts only.
    with pytest.raises(tunnel.SSHException, match="authenticity"):
        tunnel.open_tunnel(service, sshd.server, keyfile=sshd.key, password="anything")


def test_forward_through_a_running_control_master(sshd, service, make, monkeypatch):
    control = str(sshd.dir / "control")
    login = ["-i", sshd.key, "-p", str(sshd.port), f"{sshd.user}@127.0.0.1"]
    master = subprocess.run(
        [*tunnel.SSH_COMMAND, "-M", "-S", control, "-f", "-N", *login],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert master.returncode == 0, master.stderr
    monkeypatch.setattr(tunnel, "SSH_COMMAND", (*tunnel.SSH_COMMAND, "-S", control))
    check = subprocess.run([*tunnel.SSH_COMMAND, "-O", "check", *login], capture_output=True)
    try:
        req = make(zmq.REQ)
        pid = tunnel.tunnel_connection(req, service, sshd.server, keyfile=sshd.key)
        assert b"(pid=%d)" % pid in check.stderr  # the master's pid: the forward is the master's
        req.send(b"via the master")
        assert req.recv() == b"re:via the master"
    finally:
        subprocess.run([*tunnel.SSH_COMMAND, "-O", "exit", *login], capture_output=True)


def test_bad_addresses_are_refused():
    with pytest.raises(ValueError, match="tcp://host:port"):
        tunnel.open_tunnel("ipc:///tmp/x", "example.org")
    with pytest.raises(ValueError, match="tcp://host:port"):
        tunnel.open_tunnel("tcp://example.org", "example.org")
    with pytest.raises(ValueError, match="user@"):
        tunnel.open_tunnel("tcp://10.0.0.1:5555", "example.org:ssh")


# -- paramiko ---------------------------------------------------------------------------------


@pytest.fixture
def paramiko_home(sshd, monkeypatch):
    """paramiko reads ~/.ssh/known_hosts (through HOME): the test's known host goes there."""
    home = sshd.dir / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "known_hosts").write_text(sshd.known_hosts.read_text())
    monkeypatch.setenv("HOME", str(home))
    return home


def test_paramiko_tunnel_carries_req_rep(sshd, paramiko_home, service, make):
    req = make(zmq.REQ)
    process = tunnel.tunnel_connection(req, service, sshd.server, keyfile=sshd.key, paramiko=True)
    try:
        for i in range(3):
            req.send(b"paramiko %d" % i)
            assert req.recv() == b"re:paramiko %d" % i
    finally:
        process.terminate()
        process.join(WAIT)


def test_paramiko_passwordless_and_failures(sshd, paramiko_home, service):
    assert tunnel.try_passwordless_ssh(sshd.server, sshd.key, paramiko=True)
    stranger = keygen(sshd.dir / "stranger")
    assert not tunnel.try_passwordless_ssh(sshd.server, stranger, paramiko=True)
    with pytest.raises(tunnel.SSHException, match=r"paramiko tunnel .* failed"):
        tunnel.open_tunnel(service, sshd.server, keyfile=stranger, password="x", paramiko=True)
    (paramiko_home / ".ssh" / "known_hosts").write_text("")
    with pytest.raises(tunnel.SSHException, match="not found in known_hosts"):
        tunnel.try_passwordless_ssh(sshd.server, sshd.key, paramiko=True)
