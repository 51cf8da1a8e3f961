"""SSH tunnels for brokerless connections: pyzmq's ``zmq.ssh`` (see :mod:`.tunnel`)."""

from .tunnel import (
    open_tunnel,
    openssh_tunnel,
    paramiko_tunnel,
    select_random_ports,
    ssh_tunnel,
    try_passwordless_ssh,
    tunnel_connection,
)

__all__ = [
    "open_tunnel",
    "openssh_tunnel",
    "paramiko_tunnel",
    "select_random_ports",
    "ssh_tunnel",
    "try_passwordless_ssh",
    "tunnel_connection",
]
