"""The control channel between a run's driver and workers in other processes (the worker
processes of ``multiprocess.py``, or the barrier tasks of ``brokerless.spark``).

Theory of operation
-------------------
The driver binds a ROUTER; each worker connects a DEALER.  A worker's *id* names the run's
*attempt*, the worker's index and a random part of its own (``b"<attempt>:<index>:<16 hex
digits>"``).  A run that restarts its workers (Spark) starts a new attempt, and the driver drops
whatever still arrives from an older one.  Tuples never travel here -- they go worker to
worker -- only:

    worker -> driver                              driver -> worker
    ("hello",)               on each connection   ("challenge", nonce)   prove the connection
    ("proof", nonce)         the nonce, signed
    ("ready", endpoint)      virtual port bound   ("start", endpoints)   connect and run
    ("started", info)        running (pid, host)  ("activity", n)        completion counters
    ("activity", n, Activity)                     ("stats", n)           metrics snapshot
    ("stats", n, snapshot)                        ("stop",)              stop and report
    ("events", n, captured tuples, errors)   as they happen (the nth such message), and
                             what is left after stop; errors are (number, report) pairs
                                                  ("taken", n)           events below n are in
                                                  ("active", bool)       spouts emit, or not
    ("final", {snapshot, hung})   after stop
    ("failed", traceback)    the worker itself broke (not a component: those are errors)
    ("heartbeat",)           every second once started: the driver's sign that it lives

and for a checkpointed topology (``checkpoint.py``):

    ("checkpointed", [TaskAck, ...])  tasks stored   ("checkpoint", id)    inject barriers
    ("lost", why)            a task failed: roll back ("commit", id)        it is complete

*Encryption.*  With ``Config.security == "curve"`` (the default) the channel is CURVE with the
run's keys (``security.py``): the driver's ROUTER admits only the run's workers, so a stranger
fails its handshake and none of what follows is ever in its reach.  The signatures below stay:
they are what holds with ``security="none"``, and they bind each message to a worker's id.

Messages are pickled and signed with a key only the run knows (HMAC-SHA256 over the worker's
id and the payload; a message that does not carry a good signature is dropped unread), so a
tcp control port open on a network does not let anyone who can reach it run code in the driver
or the workers, or pass a message off as another worker's, attempt's or process's.  A worker
sends ``[id, signature, payload]``; the driver sends ``[signature, payload]``, signed for the
id of the worker it is meant for.

*Routes.*  Workers set no routing id: the ROUTER gives each connection one of its own, and has
no ROUTER_HANDOVER, so claiming an id takes no connection over.  The driver sends to worker
``i`` over the connection in ``state.routes[i]``, and only a fresh proof puts a connection
there: on each new connection (the monitor's HANDSHAKE_SUCCEEDED) the worker says ``hello``;
the driver answers that connection with a ``challenge``, a nonce derived from the key and the
connection's routing id; the worker signs it back in a ``proof``; only a proof of the nonce of
the connection it arrives on moves the route.  So a stranger -- without the key, or replaying
a worker's signed messages from its own connection -- never receives a worker's commands nor
cuts a worker off, while a worker that reconnects (or a stage Spark retried with new
processes) proves itself on its new connection and the route follows it.  A command for a
worker without a route (still starting, or its connection gone: ROUTER_MANDATORY says so)
waits in ``state.outbox`` until the worker has proved itself, and when a route moves, the
question the driver is waiting on is asked again on it, since it may have gone down a
connection that was already dead.  Signed messages are taken from any connection, since they
carry their sender's id: nothing a worker reports is lost to a route being proved.  What the
driver must hear -- ``ready`` and ``started`` -- a worker says again on its next connection
whenever one is lost (a message in flight on a connection that breaks is gone, as with any
ZeroMQ socket), and the driver takes a repeat as it took the first; so are all its
``events`` (captured tuples, errors), which the driver keeps once each, in the order sent
(``AttemptState.take_events``), until the driver says it has them (``taken``).  A worker keeps
only each task's latest error reports and ships those recorded since the last it shipped, each
with its number in the worker's log; a gap in the numbers is reports it dropped, which the
driver counts (``errorlog.py``); the driver keeps each task's latest too, across attempts.
(The one gap: the routing id of a worker's connection that has just died is free until the
worker proves its next one, and a peer that guessed it -- a counter with a random start --
could claim it meanwhile and swallow commands; the next proof ends that.)

*Limits.*  No frame may exceed :data:`MAX_FRAME` (MAXMSGSIZE: a peer that sends a larger one is
disconnected as its header arrives), and the driver's socket holds at most ``RCVHWM``
messages per connection while nobody pumps it (RCVHWM): beyond that the connection is not
read and the backlog waits with its sender -- in a worker's own queue, where nothing is lost,
or in a stranger's kernel buffers.  So a peer makes the driver hold at most ``RCVHWM``
messages of frames no larger than ``MAX_FRAME``, however much it sends.  A worker splits its
reports into messages of about ``REPORT_BYTES``; one captured tuple or error larger than
``MAX_FRAME`` is an error.
The driver's SNDHWM bounds what it queues for a connection that reads nothing (a stranger
that was sent challenges): more is dropped, as a ROUTER does.

The driver's side is :class:`ControlledRun`: the control loop of a :class:`TopologyRun`
whose workers answer over this channel (questions, completion rounds, the stop handshake);
subclasses say how workers are started and whether they are still alive.  The worker's side
is :class:`WorkerChannel` plus :func:`serve`, the loop a worker runs until told to stop.

A driver that vanishes: the worker's DEALER sends ZMTP heartbeats and watches its connection
(socket monitor).  When it has had no connection to the driver for ``driver_timeout``
seconds -- the driver's process ended, its host is gone, or it closed the run without a
word -- :func:`serve` stops the worker and raises :class:`DriverGone`, so no worker serves a
run nobody is watching.  The other way round, a started worker says ``heartbeat`` every
second, and the driver notes when it last heard each one (``AttemptState.heard_at``): a run
whose worker froze (SIGSTOP, a host that stopped answering) notices it, as Storm's supervisor
notices a worker whose heartbeats stop (``Config.worker_timeout_secs``, ``multiprocess.py``).
Silence counts only while the driver listens (``_silent_for``): after a gap in its looks at
the channel -- nothing asked it, or its own process was paused and has not read what waits
yet -- it starts counting again.

Modules: ``wire`` (the messages' signing, the workers' ids, the limits), ``driver``
(:class:`ControlledRun`), ``worker`` (:class:`WorkerChannel`, :func:`serve`).
"""

from .driver import AttemptState, ControlledRun, close_control
from .wire import (
    MAX_FRAME,
    DriverGone,
    Kind,
    Signer,
    WorkerProcessError,
    new_key,
    worker_identity,
)
from .worker import WorkerChannel, serve, started_info

__all__ = [
    "MAX_FRAME",
    "AttemptState",
    "ControlledRun",
    "DriverGone",
    "Kind",
    "Signer",
    "WorkerChannel",
    "WorkerProcessError",
    "close_control",
    "new_key",
    "serve",
    "started_info",
    "worker_identity",
]
