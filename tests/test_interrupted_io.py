"""An exception from a signal handler that lands inside brokerless's transport costs nothing.

Python raises a signal handler's exception (Ctrl-C's ``KeyboardInterrupt``) in the main thread
wherever it runs Python code: on entering a function and right after a built-in returns.  The
socket's thread runs the transport's code itself -- it reads a REQ's reply from the connection
while it waits (``transport/engine_lent.py``) and writes a message to an idle connection
(``transport/engine_output.py``) -- so an interruption can land there, between reading octets
and handing them on, or between taking a message and writing it.  Over inproc a REQ or REP
takes its one pipe in before it sleeps, and its peer only wakes it (``socket/waiting.py``,
``Lane.reader_waiting``): an interruption can land between those steps too.

These tests raise an exception at each of those points in turn: at the K-th function entry or
built-in return in brokerless's transport, codec, I/O thread and mailbox frames (and the pipe's,
except the socket's own ``Pipe.read``: the message that a ``recv`` has taken to return is the
caller's, as it is with pyzmq when the interrupt comes right after libzmq returned it), for
every K a call reaches (and, for a receiver that wakes its connection stopped at the HWM, as
each step of that wake-up begins).  The interrupted call is retried, and every message must
arrive once, in order, over a connection that keeps working.
"""

from __future__ import annotations

import itertools
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import zmq as libzmq

import brokerless as zmq
from brokerless.zmtp.frames import DIRECT_READ_MAX, LARGE
from tests.security_helpers import make_keys, secure

pytestmark = pytest.mark.timeout(120)

SRC = os.path.dirname(zmq.__file__)
TARGETS = tuple(
    os.path.join(SRC, part) for part in ("transport/", "zmtp/", "io/", "mailbox.py", "pipe.py")
)
LENDER = os.path.join(SRC, "transport", "engine_lent.py")
MAILBOX = os.path.join(SRC, "mailbox.py")
STRATEGIES = os.path.join(SRC, "patterns", "strategies.py")  # (the fair queue's)
#: What a writer's thread runs to wake a socket asleep on its pipe.
WAKING = (MAILBOX, os.path.join(SRC, "pipe.py"), os.path.join(SRC, "socket", "socket.py"))
#: What a REP's thread runs to send its reply.
REPLYING = (*WAKING, os.path.join(SRC, "patterns", "reqrep.py"))
#: What an inproc REQ's thread runs to wait for its reply.
ON_A_PIPE = (
    MAILBOX,
    os.path.join(SRC, "pipe.py"),
    STRATEGIES,
    os.path.join(SRC, "socket", "waiting.py"),
    os.path.join(SRC, "socket", "socket.py"),
)
NOT_TARGETED = {"read"}  # Pipe.read: the socket taking the message it returns (see above)
REPLY_TIMEOUT = 5.0  # seconds


class Interrupted(Exception):
    """What the injected "signal handler" raises."""


class Injector:
    """Raises :class:`Interrupted` at the K-th interruption point reached in the targeted
    frames of the calling thread (a profile function sees every function entry and built-in
    return: the points where CPython runs signal handlers)."""

    def __init__(self, targets: tuple[str, ...] = TARGETS) -> None:
        self.targets = targets
        self.left = 0
        self.reached = 0
        self.where: tuple[str, int, str] | None = None
        self.only: frozenset[str] | None = None
        #: Set once the calling thread has borrowed a connection's input (or stopped trying):
        #: a peer that answers only then makes every trial read its reply itself.
        self.borrowed = threading.Event()
        #: Set once the calling thread goes to sleep on its mailbox (or stopped trying).
        self.sleeping = threading.Event()

    @contextmanager
    def at(self, k: int, only: frozenset[str] | None = None) -> Iterator[None]:
        """Interrupt at the ``k``-th point (counting only the functions named in ``only``)."""
        self.left, self.reached, self.where, self.only = k, 0, None, only
        sys.setprofile(self._profile)
        try:
            yield
        finally:
            sys.setprofile(None)
            self.borrowed.set()
            self.sleeping.set()

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "return" and code.co_name == "lend_input" and code.co_filename == LENDER:
            self.borrowed.set()
        if event == "call" and code.co_name == "wait" and code.co_filename == MAILBOX:
            self.sleeping.set()
        if event not in ("call", "c_return"):
            return
        if not code.co_filename.startswith(self.targets) or code.co_name in NOT_TARGETED:
            return
        if self.only is not None and (event != "call" or code.co_name not in self.only):
            return
        self.reached += 1
        if self.reached == self.left:
            self.where = (code.co_name, frame.f_lineno, getattr(arg, "__name__", event))
            raise Interrupted  # (Python then drops the profile function, as for a signal)


def retried(call: Callable[[], Any], injector: Injector, k: int) -> Any:
    """``call()`` with an interruption at point ``k``, retried once interrupted."""
    with injector.at(k):
        try:
            return call()
        except Interrupted:
            pass
    return call()


def interrupted(
    call: Callable[[], object], injector: Injector, k: int, only: frozenset[str] | None = None
) -> None:
    """``call()`` with an interruption at point ``k`` (a send: what it did stays done)."""
    with injector.at(k, only):
        try:
            call()
        except Interrupted:
            pass


def receives(call: Callable[[], Any], injector: Injector, k: int, body: bytes) -> None:
    """``call()`` (a ``recv``) interrupted at point ``k`` and retried returns ``body`` in time
    (found only by the last look once RCVTIMEO ran out, its wake-up was lost)."""
    started = time.monotonic()
    try:
        got = retried(call, injector, k)
    except zmq.Again:
        pytest.fail(f"the message was lost, interrupted at {injector.where}")
    assert got == body, f"interrupted at {injector.where}"
    assert time.monotonic() - started < REPLY_TIMEOUT / 2, f"late: {injector.where}"


def every_point(
    trial: Callable[[Injector, int], object], targets: tuple[str, ...] = TARGETS
) -> int:
    """Count the points a ``trial(injector, 0)`` reaches, then run ``trial(injector, k)`` for
    each of them (and any a trial reaches beyond: a large message comes in as many reads as
    it happens to); how many there were."""
    injector = Injector(targets)
    trial(injector, 0)
    points = injector.reached
    k = 1
    while k <= points:
        trial(injector, k)
        points = max(points, injector.reached)
        k += 1
    return points


class SecondInterruption:
    """Wraps ``owner``'s method ``name`` -- the handling of a first interruption -- so that a
    trial can interrupt it too, at its ``at``-th point (once; 0: not at all); ``reached`` says
    how many points the handling then reached (none if it did not run)."""

    def __init__(self, owner: Any, name: str) -> None:
        self.injector = Injector()
        self.at = self.reached = 0
        handling = getattr(owner, name)

        def handled_again(*args: Any) -> Any:
            at, self.at = self.at, 0
            if not at:
                return handling(*args)
            injector = self.injector
            injector.left, injector.reached, injector.where = at, 0, None
            sys.setprofile(injector._profile)
            try:
                return handling(*args)
            finally:
                sys.setprofile(None)
                self.reached = injector.reached

        setattr(owner, name, handled_again)

    def each_point(self, trial: Callable[[int, int], object], first: Injector) -> tuple[int, int]:
        """``trial(0, 0)``, counting the points ``first`` reaches; then ``trial(k, j)`` for every
        one of them ``k`` and every point ``j`` its handling reaches.  Returns how many first
        points there were, and how many second interruptions were made."""
        trial(0, 0)
        points = first.reached
        made = 0
        for k in range(1, points + 1):
            j = 1
            while True:
                self.at, self.reached = j, 0
                trial(k, j)
                if self.reached < j:  # (no j-th point in the handling, if it ran at all)
                    break
                made += 1
                j += 1
        return points, made


@pytest.fixture
def ctx() -> Iterator[zmq.Context]:
    context = zmq.Context()
    yield context
    context.destroy(linger=0)


@pytest.fixture
def libzmq_ctx() -> Iterator[libzmq.Context]:
    context = libzmq.Context()
    yield context
    context.term()  # (its sockets' threads close them: see serve)


def serve(sock: libzmq.Socket, handle: Callable[[bytes], None]) -> threading.Thread:
    """A thread that hands each message ``sock`` receives to ``handle`` until b"end" (or the
    context's end), then closes the socket -- libzmq sockets are closed by their own thread."""

    def run() -> None:
        try:
            while True:
                msg = sock.recv()
                handle(msg)
                if msg == b"end":
                    return
        except libzmq.ContextTerminated:
            pass
        finally:
            sock.close(linger=0)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(
    ("security", "loan", "size", "targets"),
    [
        ("null", "kept", 0, TARGETS),
        ("null", "given back", 0, TARGETS),
        ("curve", "kept", 0, TARGETS),
        ("curve", "given back", 0, TARGETS),
        ("null", "kept", 1_000_000, TARGETS),  # its body read on in several reads
        ("null", "kept", 0, (STRATEGIES,)),  # the fair queue taking the pipe in and out
    ],
    ids=["null-kept", "null-given-back", "curve-kept", "curve-given-back", "large", "fq"],
)
def test_a_reply_read_by_an_interrupted_recv_is_not_lost(
    ctx, libzmq_ctx, security, loan, size, targets
):
    """A REQ in the main thread reads each reply itself; an interruption at any point of that
    (the read, decoding -- a CURVE box's nonce included --, the hand-over into the pipe, the
    loan taken or given back, a large reply's body read on, the fair queue setting the pipe
    aside and taking it back) leaves the reply to the retried ``recv``."""
    rep = libzmq_ctx.socket(libzmq.REP)
    req = ctx.socket(zmq.REQ)
    if security == "curve":
        secure("curve", rep, req, libzmq, zmq, make_keys(zmq))
    port = rep.bind_to_random_port("tcp://127.0.0.1")
    gate: list[Injector] = []  # the trial's injector: the echo answers once it says borrowed

    def answer(msg: bytes) -> None:
        if gate:
            gate[0].borrowed.wait(REPLY_TIMEOUT)
        rep.send(msg)

    echo = serve(rep, answer)
    req.rcvtimeo = int(REPLY_TIMEOUT * 1000)
    req.connect(f"tcp://127.0.0.1:{port}")
    req.send(b"first")
    assert req.recv() == b"first"

    padding = b"." * size
    (pipe,) = req._pipes
    io = pipe.peer.owner.io  # the connection's I/O thread

    def trial(injector: Injector, k: int) -> None:
        body = b"request %d:" % k + padding
        gate[:] = [injector]
        injector.borrowed.clear()
        if loan == "given back":
            req.getsockopt(zmq.EVENTS)  # the loan goes back: recv borrows the connection anew
        io.call_and_wait(lambda _: None)  # (its turn taken: it holds no lock recv would need)
        req.send(body)
        receives(req.recv, injector, k, body)

    assert every_point(trial, targets) >= (3 if targets != TARGETS else 20)
    gate.clear()
    req.send(b"end")
    assert req.recv() == b"end"
    echo.join(REPLY_TIMEOUT)


def test_an_inproc_reply_awaited_by_an_interrupted_recv_is_not_lost(ctx):
    """A REQ in the main thread waits for each reply on its one inproc pipe, which it takes
    into its fair queue before it sleeps so that the REP only wakes it (``_wait_on_pipe``): an
    interruption at any point of that (the pipe taken in, the wait begun, cut short or ended,
    the pipe set aside again) leaves the reply to the retried ``recv``, in time."""
    gate: queue.Queue[Injector | None] = queue.Queue()  # each trial's: the echo answers
    # once its thread sleeps

    def echo() -> None:
        rep = ctx.socket(zmq.REP)
        try:
            rep.bind("inproc://interrupted-wait")
            bound.set()
            while (injector := gate.get()) is not None:
                msg = rep.recv()
                injector.sleeping.wait(REPLY_TIMEOUT)
                rep.send(msg)
        finally:
            rep.close()

    bound = threading.Event()
    thread = threading.Thread(target=echo, daemon=True)
    thread.start()
    assert bound.wait(REPLY_TIMEOUT)
    req = ctx.socket(zmq.REQ)
    req.rcvtimeo = int(REPLY_TIMEOUT * 1000)
    req.connect("inproc://interrupted-wait")

    poller = zmq.Poller()
    poller.register(req, zmq.POLLIN)

    def trial(injector: Injector, k: int) -> None:
        body = b"request %d" % k
        injector.sleeping.clear()
        gate.put(injector)
        req.send(body)
        receives(req.recv, injector, k, body)
        gate.put(injector)  # (and then a reply awaited by a Poller, woken as usual)
        req.send(b"polled")
        events = poller.poll(REPLY_TIMEOUT * 1000)
        assert events == [(req, zmq.POLLIN)], f"a Poller missed it after {injector.where}"
        assert req.recv() == b"polled"

    try:
        assert every_point(trial, ON_A_PIPE) >= 10
    finally:
        gate.put(None)
        thread.join(REPLY_TIMEOUT)


@contextmanager
def asleep(
    ctx: zmq.Context, kind: int, endpoint: str, request: bytes | None = None
) -> Iterator[tuple[Callable[[], Injector], queue.Queue[bytes]]]:
    """A thread with a socket of ``kind`` connected to ``endpoint`` that, for each trial,
    (sends ``request``, then) receives one message asleep on its one inproc pipe, puts it in
    the queue yielded, and echoes it back from a REP.  Yields ``(next_trial, received)``:
    ``next_trial()`` starts a trial and returns the injector whose ``sleeping`` says the
    thread sleeps (it injects nothing)."""
    sleeps: queue.Queue[Injector | None] = queue.Queue()
    received: queue.Queue[bytes] = queue.Queue()

    def run() -> None:
        sock = ctx.socket(kind)
        try:
            sock.rcvtimeo = int(REPLY_TIMEOUT * 1000)
            sock.connect(endpoint)
            while (sleep := sleeps.get()) is not None:
                if request is not None:
                    sock.send(request)
                with sleep.at(0):
                    msg = sock.recv()
                received.put(msg)
                if kind == zmq.REP:
                    sock.send(msg)
        finally:
            sock.close()

    def next_trial() -> Injector:
        sleep = Injector(ON_A_PIPE)
        sleeps.put(sleep)
        return sleep

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield next_trial, received
    finally:
        sleeps.put(None)
        thread.join(REPLY_TIMEOUT)


def test_a_request_whose_wake_up_is_interrupted_still_wakes_its_replier(ctx):
    """A DEALER in the main thread sends requests to a REP asleep on its one inproc pipe, which
    only needs waking (``Lane.reader_waiting``, ``Mailbox.poke``): an interruption as any step
    of that wake-up begins (every one past queueing the request) still wakes the REP, which
    answers every request once, in time."""
    dealer = ctx.socket(zmq.DEALER)
    dealer.rcvtimeo = int(REPLY_TIMEOUT * 1000)
    dealer.bind("inproc://interrupted-wake")
    wake_up = frozenset({"wake_reader", "poke", "send"})
    injector = Injector(WAKING)
    with asleep(ctx, zmq.REP, "inproc://interrupted-wake") as (next_trial, _):

        def trial(k: int) -> int:
            assert next_trial().sleeping.wait(REPLY_TIMEOUT)
            body = b"request %d" % k
            interrupted(lambda: dealer.send_multipart([b"", body]), injector, k, wake_up)
            try:
                assert dealer.recv_multipart() == [b"", body], f"interrupted at {injector.where}"
            except zmq.Again:
                pytest.fail(f"the replier was not woken, interrupted at {injector.where}")
            return injector.reached

        points = trial(0)
        assert points >= 4  # (Lane.wake_reader, Socket.poke, Mailbox.poke, Signaler.send)
        for k in range(1, points + 1):
            trial(k)
    dealer.close()


def test_a_reply_whose_send_is_interrupted_is_sent_once(ctx):
    """A REP in the main thread answers a REQ asleep on its one inproc pipe: an interruption at
    any point of the reply's send leaves the REP owing the reply only when it did not go in
    (``EVENTS`` says POLLOUT, and the retried ``send`` sends it), as with libzmq, whose state
    changes with the send; a reply that went in wakes its requester.  Each arrives once, in
    time (a reply sent twice would answer the next request)."""
    rep = ctx.socket(zmq.REP)
    rep.bind("inproc://interrupted-reply")
    with asleep(ctx, zmq.REQ, "inproc://interrupted-reply", b"request") as (next_trial, replies):

        def trial(injector: Injector, k: int) -> None:
            sleep = next_trial()
            assert rep.recv() == b"request"
            assert sleep.sleeping.wait(REPLY_TIMEOUT)
            body = b"reply %d" % k
            interrupted(lambda: rep.send(body), injector, k)
            if rep.getsockopt(zmq.EVENTS) & zmq.POLLOUT:  # still owed: it did not go in
                rep.send(body)
            try:
                got = replies.get(timeout=REPLY_TIMEOUT)
            except queue.Empty:
                pytest.fail(f"the requester was not woken, interrupted at {injector.where}")
            assert got == body, f"a reply twice, or none: interrupted before at {injector.where}"

        assert every_point(trial, REPLYING) >= 5
    rep.close()


def test_a_message_queued_by_an_interrupted_inproc_send_wakes_its_reader(ctx):
    """A PUSH in the main thread queues each message straight into its one inproc pipe, its
    PULL asleep: an interruption at any point of that send either leaves the message unsent
    (for the retried ``send``) or wakes the PULL for it -- one that goes in and stays unseen
    until the next message is a lost wake-up."""
    push = ctx.socket(zmq.PUSH)
    push.bind("inproc://interrupted-push")
    messages = os.path.join(SRC, "socket", "messages.py")
    with asleep(ctx, zmq.PULL, "inproc://interrupted-push") as (next_trial, received):

        def trial(injector: Injector, k: int) -> None:
            assert next_trial().sleeping.wait(REPLY_TIMEOUT)
            push.getsockopt(zmq.EVENTS)  # (the PULL's pipe attached: its commands handled)
            (pipe,) = push._pipes
            lane = pipe.outbound  # (the PULL's inbound lane: inproc pipes share it)
            body = b"message %d" % k
            interrupted(lambda: push.send(body), injector, k)
            if not any(m is body for m in lane.q):  # not in the pipe: read already, or not sent
                try:
                    assert received.get(timeout=1.0) == body, f"interrupted at {injector.where}"
                    return
                except queue.Empty:
                    push.send(body)  # it did not go in: sent now
            try:
                got = received.get(timeout=REPLY_TIMEOUT)
            except queue.Empty:
                pytest.fail(f"the PULL was not woken, interrupted at {injector.where}")
            assert got == body, f"interrupted at {injector.where}"

        assert every_point(trial, (messages, *WAKING)) >= 5
    push.close()


#: What a PUB's thread runs to send one message to its subscribers.
FANNING_OUT = (
    os.path.join(SRC, "socket", "messages.py"),
    os.path.join(SRC, "patterns", "pubsub.py"),
    STRATEGIES,
    *WAKING,
)


@pytest.mark.parametrize(
    "topic",
    [b"", b"t"],  # everything: the fan-out fast path (write_all); a topic: Distributor.send_to
    ids=["everything", "a-topic"],
)
def test_a_message_fanned_out_by_an_interrupted_pub_send_reaches_every_subscriber_or_none(
    ctx, topic
):
    """A PUB sends to three inproc SUBs: an interruption at any point of the send leaves the
    message with every subscriber or with none, each getting it once -- libzmq's send is all or
    nothing; here one that went into a subscriber's pipe is sent, and the rest get it too
    (a retried send would give that one a second copy)."""
    pub = ctx.socket(zmq.PUB)
    pub.bind("inproc://interrupted-fan-out")
    subs = []
    for _ in range(3):
        sub = ctx.socket(zmq.SUB)
        sub.rcvtimeo = int(REPLY_TIMEOUT * 1000)
        sub.setsockopt(zmq.SUBSCRIBE, topic)
        sub.connect("inproc://interrupted-fan-out")
        subs.append(sub)
    waiting = list(subs)
    deadline = time.monotonic() + REPLY_TIMEOUT
    while waiting:  # until the PUB has every subscription (each SUB gets a message)
        assert time.monotonic() < deadline, "the subscriptions never reached the PUB"
        pub.send(b"t-warm")
        waiting = [sub for sub in waiting if not sub.poll(10)]
    for sub in subs:
        while sub.poll(0):
            sub.recv()

    def trial(injector: Injector, k: int) -> None:
        body = b"t%d" % k
        interrupted(lambda: pub.send(body), injector, k)
        pub.send(b"t-end")
        got = []
        for sub in subs:
            before_end = []
            while (msg := sub.recv()) != b"t-end":
                before_end.append(msg)
            got.append(before_end)
        assert got in ([[body]] * 3, [[]] * 3), f"interrupted at {injector.where}: {got}"

    assert every_point(trial, FANNING_OUT) >= 20  # (29 and 35: several points a subscriber)
    for sock in (pub, *subs):
        sock.close()


class UsingTheSocket(Injector):
    """An injector whose "signal handler" runs ``action`` before it raises."""

    def __init__(self, targets: tuple[str, ...], action: Callable[[], object]) -> None:
        super().__init__(targets)
        self.action = action

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        try:
            super()._profile(frame, event, arg)
        except Interrupted:
            sys.setprofile(None)  # (the handler's own calls are not interrupted)
            self.action()
            raise


def test_a_handler_that_sends_on_the_pub_it_interrupted_gets_its_own_exception_back(ctx):
    """A signal handler that uses the PUB it interrupted mid-fan-out (a farewell message, as a
    SIGTERM handler may send) while a new subscription comes in: not covered by the fan-out's
    all-or-nothing (``Distributor.send_to``), but the handler's exception is what propagates --
    not a RuntimeError from the subscribers' set changing under the fan-out's completion."""
    pub = ctx.socket(zmq.PUB)
    pub.bind("inproc://interrupted-by-a-handler")
    subs = []
    for _ in range(4):
        sub = ctx.socket(zmq.SUB)
        sub.connect("inproc://interrupted-by-a-handler")
        subs.append(sub)
    for sub in subs[:3]:
        sub.setsockopt(zmq.SUBSCRIBE, b"t")
    waiting = subs[:3]
    deadline = time.monotonic() + REPLY_TIMEOUT
    while waiting:  # until the PUB has those subscriptions
        assert time.monotonic() < deadline, "the subscriptions never reached the PUB"
        pub.send(b"t-warm")
        waiting = [sub for sub in waiting if not sub.poll(10)]
    late = subs[3]
    joins = itertools.cycle([zmq.SUBSCRIBE, zmq.UNSUBSCRIBE])

    def farewell() -> None:
        late.setsockopt(next(joins), b"t")  # (the PUB takes it in as it sends: the set of
        pub.send(b"t-bye")  # "t"'s subscribers changes)

    injector = UsingTheSocket(FANNING_OUT, farewell)
    with injector.at(0):  # (counts the points)
        pub.send(b"t-message")
    points = injector.reached
    assert points >= 10
    for k in range(1, points + 1):
        with injector.at(k), pytest.raises(Interrupted):  # (a RuntimeError fails the test)
            pub.send(b"t-message")
    for sock in (pub, *subs):
        sock.close()


@contextmanager
def large_stream(
    ctx: zmq.Context, libzmq_ctx: libzmq.Context, padding: bytes
) -> Iterator[tuple[zmq.Socket, Callable[[Injector, bytes], None]]]:
    """A brokerless PULL and ``send(injector, body)``, which has a libzmq PUSH send ``body``
    once the PULL's thread borrowed its connection's input (so that it reads the body itself);
    the first message, ``padding``, is read by the I/O thread (a PULL borrows only after a
    read that met a large frame)."""
    push = libzmq_ctx.socket(libzmq.PUSH)
    port = push.bind_to_random_port("tcp://127.0.0.1")
    bodies: queue.Queue[tuple[Injector, bytes] | None] = queue.Queue()

    def send_each() -> None:  # (libzmq's socket, used by this thread only from here on)
        try:
            while (item := bodies.get()) is not None:
                item[0].borrowed.wait(REPLY_TIMEOUT)
                push.send(item[1])
        finally:
            push.close(linger=0)

    def send(injector: Injector, body: bytes) -> None:
        injector.borrowed.clear()
        io.call_and_wait(lambda _: None)  # (its turn taken: it holds no lock recv would need)
        bodies.put((injector, body))

    sender = threading.Thread(target=send_each, daemon=True)
    sender.start()
    try:
        pull = ctx.socket(zmq.PULL)
        pull.rcvtimeo = int(REPLY_TIMEOUT * 1000)
        pull.connect(f"tcp://127.0.0.1:{port}")
        warm = Injector()
        warm.borrowed.set()
        bodies.put((warm, padding))
        assert pull.recv() == padding
        (pipe,) = pull._pipes
        io = pipe.peer.owner.io  # the connection's I/O thread
        yield pull, send
    finally:
        bodies.put(None)  # (the sender closes libzmq's socket, or the context never ends)
        sender.join(REPLY_TIMEOUT)


# (300,000: its body read on at once; beyond DIRECT_READ_MAX: the rest waited for in one read)
@pytest.mark.parametrize("size", [LARGE + 10, 300_000, DIRECT_READ_MAX + 300_000])
def test_a_large_message_read_by_an_interrupted_pull_is_not_lost(ctx, libzmq_ctx, size):
    """A PULL in the main thread reads large messages itself, into its engine's lent buffer;
    an interruption at any point of that (the read, decoding, the hand-over into the pipe, the
    loan taken or kept, a large body's rest read on at once or waited for) leaves the message
    to the retried ``recv``: every one whole, in order."""
    padding = b"." * size
    with large_stream(ctx, libzmq_ctx, padding) as (pull, send):
        (pipe,) = pull._pipes
        loans = pipe.source.engine._loans

        def trial(injector: Injector, k: int) -> None:
            body = b"%d:" % k + padding
            send(injector, body)
            receives(pull.recv, injector, k, body)

        assert every_point(trial) > 20
        assert pipe.source.engine._loans > loans  # (the PULL did read them itself)


def test_a_second_interruption_while_the_first_is_handled_loses_nothing(ctx, libzmq_ctx):
    """A signal that comes while the first one's exception is being handled lands in the lent
    read's handler (``_interrupted_read``): for every point of a PULL's lent read, and every
    point of the handling that follows, a second interruption there still leaves the message to
    the retried ``recv``, whole and in order."""
    padding = b"." * (LARGE + 10)
    with large_stream(ctx, libzmq_ctx, padding) as (pull, send):
        (pipe,) = pull._pipes
        engine = pipe.source.engine
        loans = engine._loans
        again = SecondInterruption(engine, "_interrupted_read")
        second = again.injector
        first = Injector()
        sent = 0

        def trial(k: int, j: int) -> None:
            nonlocal sent
            sent += 1
            body = b"%d:" % sent + padding
            send(first, body)
            try:
                got = retried(pull.recv, first, k)
            except zmq.Again:
                pytest.fail(f"lost: interrupted at {first.where}, then at {second.where}")
            assert got == body, f"interrupted at {first.where}, then at {second.where}"

        points, made = again.each_point(trial, first)
        assert points > 20
        assert made > 20
        assert engine._loans > loans


@pytest.mark.parametrize("size", [100, LARGE + 10])
def test_a_pull_interrupted_as_its_fair_queue_takes_a_pipe_in_or_out_keeps_it(
    ctx, libzmq_ctx, size
):
    """A PULL's fair queue sets its pipe aside when it finds it empty and takes it back when
    it is activated (by the I/O thread's command, or after a lent read): an interruption at any
    point of that leaves the pipe where the next ``recv`` finds it -- every message arrives."""
    padding = b"." * size
    with large_stream(ctx, libzmq_ctx, padding) as (pull, send):

        def trial(injector: Injector, k: int) -> None:
            body = b"%d:" % k + padding
            send(injector, body)
            receives(pull.recv, injector, k, body)

        assert every_point(trial, (STRATEGIES,)) >= 3


@pytest.mark.parametrize("size", [10, 300_000])
def test_a_message_written_by_an_interrupted_send_arrives_once(ctx, libzmq_ctx, size):
    """A PUSH in the main thread writes each message to its idle connection itself; an
    interruption at any point of that (the message taken from the pipe, encoded, written --
    in part, for the large one, into a small send buffer -- and the rest left to the I/O
    thread) sends it once: the receiver gets every message once, in order."""
    pull = libzmq_ctx.socket(libzmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    received: queue.Queue[bytes] = queue.Queue()
    collector = serve(pull, received.put)
    push = ctx.socket(zmq.PUSH)
    push.sndbuf = 4096
    push.linger = 5000
    push.connect(f"tcp://127.0.0.1:{port}")
    push.send(b"first")
    assert received.get(timeout=REPLY_TIMEOUT) == b"first"
    (pipe,) = push._pipes
    io = pipe.peer.owner.io  # the connection's I/O thread
    padding = b"." * size

    def trial(injector: Injector, k: int) -> None:
        io.call_and_wait(lambda _: None)  # its turn after the last write: the connection idles
        body = b"%d:" % k + padding
        interrupted(lambda: push.send(body), injector, k)  # (every point is past queueing it)
        try:
            got = received.get(timeout=REPLY_TIMEOUT)
        except queue.Empty:
            pytest.fail(f"the message was lost, interrupted at {injector.where}")
        assert got == body, f"interrupted at {injector.where}"

    assert every_point(trial) > 10
    push.send(b"end")
    assert received.get(timeout=REPLY_TIMEOUT) == b"end"  # (nothing twice before it)
    collector.join(REPLY_TIMEOUT)


def test_a_second_interruption_while_a_direct_write_is_cut_short_loses_nothing(ctx, libzmq_ctx):
    """A signal that comes while the first one's exception cuts a direct write short lands in
    that handling (``_direct_cut_short``, ``out_lock`` held): for every point of a PUSH's
    direct write, and every point of the handling that follows, a second interruption there
    still sends the message once, lets the lock go (held, it stalled the connection's I/O
    thread for good) and leaves the connection working."""
    pull = libzmq_ctx.socket(libzmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    received: queue.Queue[bytes] = queue.Queue()
    collector = serve(pull, received.put)
    push = ctx.socket(zmq.PUSH)
    push.linger = 5000
    push.connect(f"tcp://127.0.0.1:{port}")
    push.send(b"first")
    assert received.get(timeout=REPLY_TIMEOUT) == b"first"
    (pipe,) = push._pipes
    engine = pipe.peer.owner.engine
    again = SecondInterruption(engine, "_direct_cut_short")
    second = again.injector
    first = Injector()
    sent = 0

    def trial(k: int, j: int) -> None:
        nonlocal sent
        engine.io.call_and_wait(lambda _: None)  # its turn after the last write: idle
        sent += 1
        body = b"%d" % sent
        interrupted(lambda: push.send(body), first, k)  # (every point is past queueing it)
        assert not engine.out_lock._is_owned(), f"{first.where}, then {second.where}"
        try:
            got = received.get(timeout=REPLY_TIMEOUT)
        except queue.Empty:
            pytest.fail(f"lost: interrupted at {first.where}, then at {second.where}")
        assert got == body, f"interrupted at {first.where}, then at {second.where}"

    points, made = again.each_point(trial, first)
    assert points > 10
    assert made > 50  # (33 and 208 here)
    push.send(b"end")
    assert received.get(timeout=REPLY_TIMEOUT) == b"end"  # (nothing twice before it)
    collector.join(REPLY_TIMEOUT)


@pytest.mark.parametrize("entering", ["_notify_peer", "send_command", "call_soon"])
def test_a_reader_drained_by_interrupted_recvs_wakes_its_connection(ctx, libzmq_ctx, entering):
    """A PULL's pipe fills to its HWM and its connection stops reading; a ``recv`` that drains
    it to the low-water mark wakes that connection (``Lane.wake_writer``).  Each such wake-up
    interrupted as it enters ``entering``, the stream still comes whole, in order."""
    push = libzmq_ctx.socket(libzmq.PUSH)
    port = push.bind_to_random_port("tcp://127.0.0.1")
    pull = ctx.socket(zmq.PULL)
    pull.rcvhwm = pull.sndhwm = 10  # (a pipe holds both: 20 messages)
    pull.rcvtimeo = int(REPLY_TIMEOUT * 1000)
    pull.connect(f"tcp://127.0.0.1:{port}")
    count = 400
    feeder = threading.Thread(
        target=lambda: [push.send(b"%d" % i) for i in range(count)], daemon=True
    )
    feeder.start()
    injector = Injector()
    interrupted = 0
    for i in range(count):
        with injector.at(1, frozenset({entering})):
            try:
                msg = pull.recv()
            except Interrupted:
                interrupted += 1
                msg = None
        if msg is None:
            try:
                msg = pull.recv()
            except zmq.Again:
                pytest.fail(f"the stream stopped after {i} messages, interrupted {interrupted}")
        assert msg == b"%d" % i
    feeder.join(REPLY_TIMEOUT)
    assert interrupted > 0
    push.close(linger=0)
