"""CURVE for a run's own traffic: keys made per run, accepted only from the run.

Theory of operation
-------------------
In multi-process and Spark mode a run's workers listen on ports (each worker's virtual port,
the driver's control channel) that anyone on the network may reach; in Spark mode on every
interface.  With ``Config.security == "curve"`` (the default) every one of those connections
is CurveZMQ (RFC 26): encrypted, and open only to the run.

*One keypair per run.*  The driver makes one CURVE keypair per run (:func:`run_keys`) and ships
it with the job -- on the worker process's stdin, or inside the Spark job's closure -- never on
a command line or in a file.  Every server socket of the run (the virtual ports, the control
ROUTER) uses it as its server key, and every client socket (the DEALERs to other workers and
to the driver) uses it as its own key and expects it as the server's.  So a client proves it
holds the run's secret key (CURVE's INITIATE vouch), and the server proves the same back
(only the holder of the secret key can open HELLO and answer it).

*Only the run's key is let in.*  A CURVE server with no ZAP handler admits any client that
knows its public key; the run's public key is not meant to be a secret.  So each context with
a run's server socket has a ZAP handler (:func:`admit_only_run`: a
:class:`~brokerless.auth.ThreadAuthenticator`) that admits exactly the run's public key, and
the server sockets set ZAP_DOMAIN with ZAP_ENFORCE_DOMAIN: a handshake fails when no handler
answers, rather than going on without one.  A stranger -- NULL, PLAIN, or CURVE with a key of
its own -- fails its handshake (HANDSHAKE_FAILED_* on its monitor) and never reaches a worker's
queue or the driver.

Why not a keypair per worker: every worker runs the same code with the same job and already
shares the control channel's signing key; per-worker keys would add a key list to ship and
check without keeping anything from a worker that one worker's key would not already give.

In-process runs (local mode) open no sockets and need none of this; ``security="none"`` turns
it off for a trusted network (what it saves is measured in BENCHMARKS.md).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, field

import brokerless as zmq
from brokerless.auth.thread import ThreadAuthenticator
from brokerless.utils import z85

#: ``Config.security``'s values.
SECURITY_MODES = ("curve", "none")
#: The ZAP domain of a run's server sockets.
ZAP_DOMAIN = "brokerless.stream"


@dataclass(frozen=True)
class RunKeys:
    """A run's CURVE keypair (32 octets each); the secret never shows in a repr."""

    public: bytes
    secret: bytes = field(repr=False)


def run_keys(security: str) -> RunKeys | None:
    """A new keypair for a run whose config says ``security`` (None for ``"none"``)."""
    if security == "none":
        return None
    public, secret = zmq.curve_keypair()
    return RunKeys(z85.decode(public), z85.decode(secret))


def serve_to_run(sock: zmq.SyncSocket, keys: RunKeys | None) -> None:
    """Make ``sock`` (before it binds) a CURVE server that only the run's clients get into."""
    if keys is None:
        return
    sock.curve_secretkey = keys.secret
    sock.curve_publickey = keys.public
    sock.curve_server = 1
    sock.zap_domain = ZAP_DOMAIN.encode()
    sock.zap_enforce_domain = 1


def connect_to_run(sock: zmq.SyncSocket, keys: RunKeys | None) -> None:
    """Make ``sock`` (before it connects) a CURVE client of the run's servers."""
    if keys is None:
        return
    sock.curve_secretkey = keys.secret
    sock.curve_publickey = keys.public
    sock.curve_serverkey = keys.public


class _RunKeyOnly:
    """The ZAP handler's CURVE check: the client's key must be the run's."""

    def __init__(self, public: bytes) -> None:
        self._public = z85.encode(public)

    def callback(self, domain: str, key: bytes) -> bool:
        return hmac.compare_digest(key, self._public)


def admit_only_run(context: zmq.SyncContext, keys: RunKeys | None) -> ThreadAuthenticator | None:
    """Start ``context``'s ZAP handler admitting only the run's key (None when ``keys`` is);
    stop it after the context's server sockets are closed and before the context ends."""
    if keys is None:
        return None
    authenticator = ThreadAuthenticator(context)
    authenticator.configure_curve_callback(ZAP_DOMAIN, _RunKeyOnly(keys.public))
    authenticator.start()
    return authenticator
