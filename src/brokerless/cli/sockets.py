"""``brokerless pub|sub|push|pull|req|rep|dealer|router``: a socket between stdin and stdout.

Theory of operation
-------------------
One thread, one ``Poller`` over the socket and stdin's file descriptor.  Input is read in
chunks only while nothing read earlier is still waiting to be sent, so a socket that cannot
send (at its high-water mark, no peer yet) stops the reading -- back pressure reaches the
process writing into the pipe, and memory stays bounded.  What each type may do when:

=========  ===========================================  ====================================
type       sends (a message per input line)             writes (a line per message received)
=========  ===========================================  ====================================
push, pub  every input message, then ends at EOF        --
pull, sub  --                                           every message, until -n or Ctrl-C
dealer,    every input message                          every message, until -n or Ctrl-C
router                                                  (EOF on stdin does not end them)
req        one input message, then waits for the reply  the reply; ends at EOF or -n
rep        the next input line, as the reply            a request, then waits for its reply
=========  ===========================================  ====================================

Output is flushed whenever the socket has nothing more to read, so a pipeline sees each
message as it arrives.  At the end the socket closes with ``--linger`` (libzmq's default, -1:
wait until everything queued is delivered); Ctrl-C during that wait drops what is undelivered
and ends the process at once (``_deliver``).
"""

from __future__ import annotations

import os
import sys
from collections import deque
from dataclasses import dataclass
from typing import BinaryIO

import click

import brokerless as zmq

from .endpoints import attach, option_settings, set_options
from .framing import Framing, FramingError, Lines, Message, Raw
from .status import INTERRUPTED

_CHUNK = 1 << 16


@dataclass(frozen=True)
class Role:
    """What a socket type does between stdin and stdout (see the module doc)."""

    type: zmq.SocketType
    sends: bool
    receives: bool
    summary: str
    example: str
    lockstep: bool = False  # req/rep: one message each way in turn


ROLES = {
    "pub": Role(
        zmq.PUB,
        True,
        False,
        "Publish each line of stdin (with --topic, as [TOPIC, line]).  A PUB drops what it "
        "sends before a subscriber has connected and subscribed (ZeroMQ's slow joiner): "
        "a short input piped in at once may reach nobody; start the subscribers first and "
        "keep the input open (tail -f), or use push/pull.",
        "tail -f app.log | brokerless pub --bind tcp://*:5556 --topic log",
    ),
    "sub": Role(
        zmq.SUB,
        False,
        True,
        "Subscribe (--topic, repeatable; default: everything) and print each message.",
        "brokerless sub tcp://localhost:5556 --topic log",
    ),
    "push": Role(
        zmq.PUSH,
        True,
        False,
        "Send each line of stdin to the connected PULL sockets, in turn.",
        "seq 1000 | brokerless push tcp://localhost:5557",
    ),
    "pull": Role(
        zmq.PULL,
        False,
        True,
        "Print each message received.",
        "brokerless pull --bind tcp://*:5557 -n 1000 > numbers.txt",
    ),
    "req": Role(
        zmq.REQ,
        True,
        True,
        "Send each line of stdin as a request and print its reply.",
        "echo hello | brokerless req tcp://localhost:5555",
        lockstep=True,
    ),
    "rep": Role(
        zmq.REP,
        True,
        True,
        "Print each request and answer it with the next line of stdin.",
        "yes world | brokerless rep --bind tcp://*:5555",
        lockstep=True,
    ),
    "dealer": Role(
        zmq.DEALER,
        True,
        True,
        "Send each line of stdin (round-robin) and print whatever comes back.",
        "printf '\\thello\\n' | brokerless dealer tcp://localhost:5555 -n 1",
    ),
    "router": Role(
        zmq.ROUTER,
        True,
        True,
        "Print each message with its sender's routing id (hex) first; send lines that start "
        "with one to that peer.",
        "brokerless router --bind tcp://*:5555",
    ),
}


class Shuttle:
    """Moves messages between stdin/stdout and one socket (see the module doc)."""

    def __init__(
        self,
        socket: zmq.SyncSocket,
        role: Role,
        framing: Framing,
        count: int | None,
        stdin_fd: int,
        stdout: BinaryIO,
        prefix: Message | None = None,
    ) -> None:
        self.socket = socket
        self.role = role
        self.framing = framing
        self.count = count
        self.stdin_fd = stdin_fd
        self.stdout = stdout
        self.prefix = prefix or []
        self.pending: deque[Message] = deque()
        self.eof = not role.sends
        self.sent = 0
        self.received = 0
        self.awaiting_reply = False  # req: a request is out; rep: a request is in
        self.bad_input: FramingError | None = None  # raised once what came before is sent

    def run(self) -> None:
        poller = zmq.Poller()
        reading = False
        watched = 0  # the socket's events the poller watches
        while not self._finished():
            want_input = not self.eof and not self.pending
            if want_input != reading:
                if want_input:
                    poller.register(self.stdin_fd, zmq.POLLIN)
                else:
                    poller.unregister(self.stdin_fd)
                reading = want_input
            events = self._socket_events()
            if events != watched:
                poller.register(self.socket, events)
                watched = events
            for what, _ in poller.poll():
                if what == self.stdin_fd:
                    self._read_input()
            self._send_pending()
            self._receive()
        if self.bad_input is not None:
            raise self.bad_input

    def _done(self) -> int:
        """The messages -n counts: received, or sent by senders and by REP (its replies)."""
        role = self.role
        return self.sent if not role.receives or role.type == zmq.REP else self.received

    def _finished(self) -> bool:
        role = self.role
        if self.count is not None and self._done() >= self.count:
            return True
        if role.receives and not role.lockstep and self.bad_input is None:
            return False  # until -n or Ctrl-C
        input_over = self.eof and not self.pending
        return input_over and not (role.type == zmq.REQ and self.awaiting_reply)

    def _may_send(self) -> bool:
        if not self.pending or (self.count is not None and self._done() >= self.count):
            return False
        if self.role.type == zmq.REQ:
            return not self.awaiting_reply
        if self.role.type == zmq.REP:
            return self.awaiting_reply
        return True

    def _may_receive(self) -> bool:
        role = self.role
        if not role.receives:
            return False
        if role.type == zmq.REQ:
            return self.awaiting_reply
        if role.type == zmq.REP:
            return not self.awaiting_reply
        return True

    def _socket_events(self) -> int:
        return (zmq.POLLIN if self._may_receive() else 0) | (zmq.POLLOUT if self._may_send() else 0)

    def _read_input(self) -> None:
        """Decode a chunk of stdin; bad input ends the input (what came whole before it is
        still sent, then the error is raised)."""
        data = os.read(self.stdin_fd, _CHUNK)
        try:
            if data:
                self.pending.extend(self.framing.decode(data))
            else:
                self.eof = True
                self.pending.extend(self.framing.finish())
        except FramingError as exc:
            self.pending.extend(exc.complete)
            self.bad_input = exc
            self.eof = True

    def _send_pending(self) -> None:
        socket = self.socket
        while self._may_send():
            try:
                socket.send_multipart(self.prefix + self.pending[0], zmq.NOBLOCK)
            except zmq.Again:
                return
            except zmq.ZMQError as exc:  # e.g. a ROUTER_MANDATORY peer that is gone
                raise click.ClickException(f"send failed: {exc}") from None
            self.pending.popleft()
            self.sent += 1
            if self.role.lockstep:
                self.awaiting_reply = self.role.type == zmq.REQ

    def _receive(self) -> None:
        socket = self.socket
        wrote = False
        while self._may_receive() and not (self.count is not None and self._done() >= self.count):
            try:
                message = socket.recv_multipart(zmq.NOBLOCK, copy=True)
            except zmq.Again:
                break
            self.stdout.write(self.framing.encode(message))
            wrote = True
            self.received += 1
            if self.role.lockstep:
                self.awaiting_reply = self.role.type == zmq.REP
        if wrote:
            self.stdout.flush()


def _deliver(context: zmq.SyncContext, socket: zmq.SyncSocket, linger: int) -> None:
    """Close ``socket`` with ``linger`` and terminate ``context``: wait for what it still
    delivers.  Ctrl-C gives up on that and ends the process at once -- queued messages cannot
    be taken back from the I/O threads, and the interpreter's exit would wait for them again
    (so the close is inside: a Ctrl-C between it and the wait must not end the process
    normally either)."""
    try:
        socket.close(linger=linger)
        context.term()
    except KeyboardInterrupt:
        sys.stdout.flush()
        sys.stderr.write("\ninterrupted: undelivered messages dropped\n")
        sys.stderr.flush()
        os._exit(INTERRUPTED)


def make_command(name: str, role: Role) -> click.Command:
    topic_help = (
        "send each message as [TOPIC, line...]"
        if role.type == zmq.PUB
        else "subscribe to messages starting with TOPIC (repeatable; default: all)"
    )

    @click.command(
        name=name,
        help=f"{role.summary}\n\nExample:\n\n\b\n  {role.example}",
        epilog="ENDPOINT: tcp://host:port, ipc:///path, inproc://name; prefix '@' binds, "
        "'>' connects (default: connect, or bind with --bind).",
    )
    @click.argument("endpoints", metavar="ENDPOINT...", nargs=-1, required=True)
    @click.option("--bind", "-b", is_flag=True, help="Bind the endpoints instead of connecting.")
    @click.option("--raw", is_flag=True, help="Messages as ZMTP frames, not lines (binary-safe).")
    @click.option(
        "-d",
        "--delimiter",
        default="\t",
        show_default="tab",
        help="Separates a message's frames on a line ('' : one frame per line).",
    )
    @click.option("-n", "--count", type=click.IntRange(min=1), help="Stop after COUNT messages.")
    @click.option(
        "--linger",
        type=int,
        default=-1,
        show_default=True,
        help="ms to deliver what is queued when done (-1: until delivered).",
    )
    @option_settings("Set a socket option (e.g. sndhwm=1000, routing_id=me); repeatable.")
    @click.option(
        "--topic",
        "-t",
        "topics",
        multiple=role.type == zmq.SUB,
        hidden=role.type not in (zmq.PUB, zmq.SUB),
        help=topic_help,
    )
    def command(
        endpoints: tuple[str, ...],
        bind: bool,
        raw: bool,
        delimiter: str,
        count: int | None,
        linger: int,
        options: tuple[str, ...],
        topics: tuple[str, ...] | str | None,
    ) -> None:
        if topics and role.type not in (zmq.PUB, zmq.SUB):
            raise click.UsageError(f"--topic is for pub and sub, not {name}")
        framing: Framing = (
            Raw() if raw else Lines(delimiter.encode(), hex_first=role.type == zmq.ROUTER)
        )
        context = zmq.Context()
        socket = context.socket(role.type)
        bad_input = None
        try:
            set_options(socket, options)
            prefix: Message = []
            if role.type == zmq.SUB:
                for topic in topics or ("",):
                    socket.setsockopt(zmq.SUBSCRIBE, topic.encode())
            elif role.type == zmq.PUB and topics:
                prefix = [str(topics).encode()]
            attach(socket, endpoints, bind)
            stdin_fd = sys.stdin.fileno() if role.sends else -1
            shuttle = Shuttle(socket, role, framing, count, stdin_fd, sys.stdout.buffer, prefix)
            try:
                shuttle.run()
            except FramingError as exc:  # what came before it was sent: deliver that
                bad_input = exc
        except BaseException:
            _deliver(context, socket, linger=0)  # interrupted or failed: nothing to wait for
            raise
        _deliver(context, socket, linger)
        if bad_input is not None:
            raise click.ClickException(str(bad_input))

    return command


COMMANDS = [make_command(name, role) for name, role in ROLES.items()]
