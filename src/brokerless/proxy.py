"""``zmq_proxy`` and ``zmq_proxy_steerable``: shuttle whole messages between two sockets.

Theory of operation
-------------------
A proxy runs on the calling thread and owns its sockets while it runs (as libzmq's does).
Each socket is seen through a :class:`_Port`: its pattern's ``xrecv``/``xsend``, which move
one *whole* message (a part, or a list of parts) -- so a multipart message is forwarded
atomically, and nothing is converted on the way (a large part received by reference is sent on
by reference).

Two :class:`_Flow` objects pump frontend -> backend and backend -> frontend.  A pump moves
every message it can, up to :data:`BURST` per round so that the other direction and the control
socket get their turn (libzmq's ``proxy_burst_size``).  When the destination is at its
high-water mark the message in hand is *held* (never dropped, never blocked on) and sent first
once the destination has room; libzmq instead checks ``POLLOUT`` before a burst and then blocks
in ``send`` if the destination fills mid-burst.  Messages the destination itself drops (PUB at
its HWM, ROUTER to an unknown peer) are dropped as libzmq drops them.

One round is: make every mailbox signal its descriptor, run each socket's queued commands
(pipe activations, new peers, context termination -> ``ContextTerminated``), read control
commands, pump.  If nothing moved, sleep in one ``select.poll`` on the sockets' mailbox
descriptors: a pipe wakes its reader only on "empty -> not empty" and its writer on "full ->
room", so the proxy sleeps until there is something to do -- no timeout loop -- and a busy proxy
pays one wake-up per batch, not per message.  Ctrl-C interrupts the sleep (KeyboardInterrupt);
terminating the context raises :class:`ContextTerminated`, as pyzmq's ``zmq.proxy`` does.

The capture socket gets a copy of every message forwarded, in both directions, before the
destination does; its send is an ordinary blocking ``send_multipart`` (a PUSH capture with no
peer stalls the proxy, as in libzmq).

Control (``zmq_proxy_steerable``), one single-part message per command, as libzmq documents:
``PAUSE`` stops forwarding (messages stay queued in the sockets), ``RESUME`` restarts it,
``TERMINATE`` makes the proxy return 0 (a message held for a full destination is dropped then;
libzmq would be stuck in ``send``), ``STATISTICS`` replies with 8 uint64 frames in native byte
order: messages and bytes received and sent by the frontend, then by the backend, each *part*
counted.  Anything else is ignored.  A REP control socket gets an empty reply to every command
but ``STATISTICS``; other control sockets get none.  (libzmq 4.3.5 itself swaps ``PAUSE`` and
``RESUME`` and replies on every socket type -- fixed upstream after that release; brokerless
follows the documented behaviour.)
"""

from __future__ import annotations

import select
import struct
from collections.abc import Callable
from enum import Enum
from typing import Any

from .constants import SocketType
from .errno import EFAULT
from .error import ZMQError
from .socket import Socket

#: Messages a flow forwards per round before the other direction and control get a turn.
BURST = 1000

PAUSE = b"PAUSE"
RESUME = b"RESUME"
TERMINATE = b"TERMINATE"
STATISTICS = b"STATISTICS"

_UINT64 = struct.Struct("=Q")

_T = SocketType
_SEND_ONLY = frozenset({_T.PUB, _T.PUSH, _T.RADIO, _T.SCATTER})
_RECEIVE_ONLY = frozenset({_T.SUB, _T.PULL, _T.DISH, _T.GATHER})


class _State(Enum):
    ACTIVE = "active"
    PAUSED = "paused"
    TERMINATED = "terminated"


#: A hook run on every message a flow takes (the capture copy, a monitor's tap).
Tap = Callable[[Any], None]
#: A hook that rewrites every message a flow takes before anything else sees it.
Transform = Callable[[Any], Any]


class _Port:
    """A socket as a proxy drives it: whole messages in and out, its commands, its mailbox."""

    __slots__ = ("can_receive", "can_send", "mailbox", "put", "socket", "take")

    def __init__(self, socket: Any, role: str) -> None:
        if not isinstance(socket, Socket):
            raise TypeError(f"the {role} must be a brokerless Socket, not {type(socket).__name__}")
        if socket.closed:  # libzmq: "the provided frontend or backend was invalid"
            raise ZMQError(EFAULT, f"Bad address: the {role} is closed")
        socket._check_alive()  # its context terminated: ETERM
        socket._give_back_input()  # it waits on its mailbox here: its I/O thread reads for it
        self.socket = socket
        self.mailbox = socket._mailbox
        # The next whole message, or None.  A REQ or REP gives one only in its turn: libzmq's
        # proxy receives only when its poll reports input, which a REQ has only while it awaits
        # a reply, and a REP only while it owes none (their recv would fail with EFSM).
        pattern = socket._pattern
        self.take: Callable[[], Any] = (
            socket._xrecv
            if not pattern.lock_step
            else lambda: pattern.xrecv() if pattern.xhas_in() else None
        )
        self.put: Callable[[Any], bool] = socket._xsend  # False: at the HWM, try again later
        # libzmq's poll never sees input on a PUSH nor room on a SUB: a flow out of the one or
        # into the other never runs.
        self.can_receive = socket.socket_type not in _SEND_ONLY
        self.can_send = socket.socket_type not in _RECEIVE_ONLY

    def run_commands(self) -> None:
        """Switch the mailbox to its descriptor and run what is queued (raises on ETERM)."""
        self.mailbox.use_fd()
        self.socket._process_commands()


class _Flow:
    """One direction of a proxy: ``src`` -> ``dst``, with the message held while ``dst`` is
    full and, when statistics are kept, the counters it adds to."""

    __slots__ = ("held", "put", "recv_at", "send_at", "stats", "take", "tap", "transform")

    def __init__(
        self,
        src: _Port,
        dst: _Port,
        tap: Tap | None = None,
        transform: Transform | None = None,
        stats: list[int] | None = None,
        recv_at: int = 0,
        send_at: int = 0,
    ) -> None:
        self.take = src.take
        self.put = dst.put
        self.tap = tap
        self.transform = transform
        self.held: Any = None
        self.stats = stats
        self.recv_at = recv_at  # index of (count, bytes) received by src in stats
        self.send_at = send_at  # and of (count, bytes) sent by dst

    def pump(self) -> bool:
        """Forward what can be forwarded now (up to BURST messages); True if anything moved."""
        msg = self.held
        if msg is None:
            return self._burst()
        if not self.put(msg):
            return False
        self.held = None
        if self.stats is not None:
            self._count(self.stats, msg)
        self._burst()
        return True

    def _burst(self) -> bool:
        take, put, tap, transform, stats = self.take, self.put, self.tap, self.transform, self.stats
        moved = False
        for _ in range(BURST):
            msg = take()
            if msg is None:
                break
            if transform is not None:
                msg = transform(msg)
            if tap is not None:
                tap(msg)
            if not put(msg):
                self.held = msg
                break
            moved = True
            if stats is not None:
                self._count(stats, msg)
        return moved

    def _count(self, stats: list[int], msg: Any) -> None:
        if msg.__class__ is list:
            parts, size = len(msg), sum(map(len, msg))
        else:
            parts, size = 1, len(msg)
        for at in (self.recv_at, self.send_at):
            stats[at] += parts
            stats[at + 1] += size


def _capture_tap(capture: Socket[Any]) -> Tap:
    send_multipart = capture.send_multipart

    def tap(msg: Any) -> None:
        send_multipart(msg if msg.__class__ is list else [msg], copy=False)

    return tap


def run_proxy(
    frontend: Socket[Any],
    backend: Socket[Any],
    *,
    control: Socket[Any] | None = None,
    taps: tuple[Tap | None, Tap | None] = (None, None),
    transform: Transform | None = None,
) -> int:
    """The proxy loop (see the module's doc): ``taps`` are run on frontend->backend and
    backend->frontend messages, ``transform`` rewrites every message first.  Returns 0 after
    TERMINATE; otherwise runs until an error (ETERM, ENOTSOCK...) or KeyboardInterrupt."""
    front = _Port(frontend, "frontend")
    back = front if backend is frontend else _Port(backend, "backend")
    ports = [front] if back is front else [front, back]
    ctrl = None if control is None else _Port(control, "control socket")
    # frontend received n/bytes, sent n/bytes, then the backend's: kept when they can be asked
    stats = [0] * 8
    counted = None if ctrl is None else stats
    if ctrl is not None:
        ports.append(ctrl)
    # (from, to, tap, where "from" counts what it receives, where "to" counts what it sends);
    # one socket as both sides is one flow, counted as libzmq counts it.
    directions = [(front, back, taps[0], 0, 6)]
    if back is not front:
        directions.append((back, front, taps[1], 4, 2))
    flows = [
        _Flow(src, dst, tap, transform, counted, recv_at, send_at)
        for src, dst, tap, recv_at, send_at in directions
        if src.can_receive and dst.can_send
    ]

    poller = select.poll()
    descriptors = {}
    for port in ports:
        fd = port.mailbox.fileno()
        poller.register(fd, select.POLLIN)
        descriptors[fd] = port.mailbox
    state = _State.ACTIVE
    while True:
        for port in ports:
            port.run_commands()
        if ctrl is not None:
            state = _steer(ctrl, state, stats)
            if state is _State.TERMINATED:
                return 0
        moved = False
        if state is _State.ACTIVE:
            for flow in flows:
                moved = flow.pump() or moved
        if not moved:
            # Every mailbox was re-armed above and nothing could move: sleep until one signals.
            for fd, _ in poller.poll():
                descriptors[fd].clear_fd()


def _steer(ctrl: _Port, state: _State, stats: list[int]) -> _State:
    """Run the control commands waiting on ``ctrl``; the proxy's state afterwards."""
    socket = ctrl.socket
    while (command := ctrl.take()) is not None:
        if command == STATISTICS:
            socket.send_multipart([_UINT64.pack(value) for value in stats])
            continue
        if command == PAUSE:
            state = _State.PAUSED
        elif command == RESUME:
            state = _State.ACTIVE
        elif command == TERMINATE:
            state = _State.TERMINATED
        if socket.socket_type == SocketType.REP:
            socket.send(b"")  # a REP must answer before it can take the next command
        if state is _State.TERMINATED:
            break
    return state


def proxy(frontend: Socket[Any], backend: Socket[Any], capture: Socket[Any] | None = None) -> int:
    """Forward messages between ``frontend`` and ``backend`` until the context is terminated
    (raises ``ContextTerminated``) or Ctrl-C; ``capture`` gets a copy of every message.

    pyzmq's ``zmq.proxy`` (libzmq's ``zmq_proxy``); see :mod:`brokerless.proxy`.
    """
    return proxy_steerable(frontend, backend, capture)


def proxy_steerable(
    frontend: Socket[Any],
    backend: Socket[Any],
    capture: Socket[Any] | None = None,
    control: Socket[Any] | None = None,
) -> int:
    """:func:`proxy`, steered by commands on ``control`` (PAUSE, RESUME, TERMINATE,
    STATISTICS); returns 0 after TERMINATE.  pyzmq's ``zmq.proxy_steerable``."""
    tap = None if capture is None else _capture_tap(_Port(capture, "capture socket").socket)
    return run_proxy(frontend, backend, control=control, taps=(tap, tap))


def device(device_type: int, frontend: Socket[Any], backend: Socket[Any]) -> int:
    """libzmq's deprecated ``zmq_device``: :func:`proxy` (the device type is not used)."""
    return proxy(frontend, backend)
