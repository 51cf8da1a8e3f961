"""The paramiko tunnel's process: log in once, then forward each local connection over ssh.

``serve_tunnel`` runs in a child process started by :func:`.tunnel.paramiko_tunnel` (a fresh
interpreter: no threads inherited from the parent).  It logs in (known host keys only: an
unknown host is refused), listens on ``127.0.0.1:lport``, and tells the parent through
``ready`` (None, or why it failed).  Every accepted connection gets a ``direct-tcpip`` channel
to ``remoteip:rport`` as the server sees it, and a thread that copies bytes both ways until
either side closes.  Ctrl-C in the terminal is not for the tunnel: it runs until killed.
"""

from __future__ import annotations

import select
import signal
import socket
import threading
from multiprocessing.connection import Connection

import paramiko

CHUNK = 64 * 1024


def serve_tunnel(
    lport: int,
    rport: int,
    user: str,
    host: str,
    port: int,
    remoteip: str,
    ready: Connection,
    keyfile: str | None = None,
    password: str | None = None,
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    client = paramiko.SSHClient()
    client.load_system_host_keys()
    try:
        client.connect(
            host, port, username=user, key_filename=keyfile, password=password, look_for_keys=True
        )
        listener = socket.create_server(("127.0.0.1", lport))
    except (OSError, paramiko.SSHException) as exc:
        ready.send(f"{type(exc).__name__}: {exc}")
        return
    ready.send(None)
    transport = client.get_transport()
    assert transport is not None, "the client is connected"
    while True:
        connection, peer = listener.accept()
        try:
            channel = transport.open_channel("direct-tcpip", (remoteip, rport), peer)
        except paramiko.SSHException:
            connection.close()  # the server could not reach remoteip:rport: this one fails
            continue
        threading.Thread(target=_copy_both_ways, args=(connection, channel), daemon=True).start()


def _copy_both_ways(connection: socket.socket, channel: paramiko.Channel) -> None:
    watched: list[socket.socket | paramiko.Channel] = [connection, channel]
    with connection, channel:
        while True:
            readable, _, _ = select.select(watched, [], [])
            for source, sink in ((connection, channel), (channel, connection)):
                if source in readable:
                    data = source.recv(CHUNK)
                    if not data:
                        return
                    sink.sendall(data)
