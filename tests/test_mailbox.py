"""A socket's mailbox: the commands other threads queue for the socket's thread, and the
descriptor that wakes it (polled by the socket's own blocking calls, or by a Poller or event
loop).  Interleavings that matter are forced by pausing a thread at a line of the mailbox's
own code (a trace function), never by timing.  (Not collected when the suite runs against
pyzmq: libzmq's mailboxes are not Python.)"""

from __future__ import annotations

import inspect
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import brokerless as zmq
from brokerless.mailbox import Mailbox
from brokerless.socket.waiting import WaitingMixin

pytestmark = pytest.mark.timeout(60)


def _line_of(function: Callable[..., Any], text: str) -> int:
    """The line number of the first line of ``function`` holding ``text``."""
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if text in line)


@contextmanager
def paused_at(
    function: Callable[..., Any], text: str, when: Callable[[Any], bool], action: Callable[[], None]
) -> Iterator[None]:
    """In the calling thread, run ``action`` once when ``function`` is about to run its line
    holding ``text`` for a frame whose locals satisfy ``when`` (the first time only)."""
    code, line = function.__code__, _line_of(function, text)
    done = False

    def trace(frame: Any, event: str, arg: Any) -> Any:
        nonlocal done
        if (
            not done
            and frame.f_code is code
            and event == "line"
            and frame.f_lineno == line
            and when(frame.f_locals)
        ):
            done = True
            action()
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        yield
    finally:
        sys.settrace(previous)


def test_a_wait_is_woken_after_a_sender_was_paused_between_queueing_and_signalling():
    """A sender queues its command, then looks whether the mailbox is armed.  Paused between
    the two while the owner drains the queue (it took the command, and its message), the
    sender then disarms the mailbox and signals the fd -- for nothing anyone will read soon.
    The owner's next blocking recv found no command, tried, and slept (then on a lock): no
    sender signals while the mailbox is disarmed, so a message sent then was never seen
    (RCVTIMEO -1: for ever).  The wait now returns at once while disarmed, and the next look
    arms it."""
    context = zmq.Context()
    a, b = context.socket(zmq.PAIR), context.socket(zmq.PAIR)
    try:
        a.bind("inproc://mailbox-race")
        b.connect("inproc://mailbox-race")
        a.send(b"warm")
        assert b.recv() == b"warm"
        b.getsockopt(zmq.EVENTS)  # as a Poller's user does: senders now signal the fd
        mailbox = b._mailbox
        queued, drained = threading.Event(), threading.Event()

        def hold_the_sender() -> None:
            queued.set()
            assert drained.wait(10)

        def send_x() -> None:
            with paused_at(
                Mailbox.send, "if self._armed:", lambda f: f["self"] is mailbox, hold_the_sender
            ):
                a.send(b"x")

        sender = threading.Thread(target=send_x)
        sender.start()
        assert queued.wait(10)
        assert b.recv(zmq.NOBLOCK) == b"x"  # the owner drains meanwhile
        drained.set()
        sender.join(10)

        # b's next recv blocks; y is sent once it is about to sleep.
        asleep, sent = threading.Event(), threading.Event()

        def send_y() -> None:
            assert asleep.wait(10)
            a.send(b"y")
            sent.set()

        def going_to_sleep() -> None:
            asleep.set()
            assert sent.wait(10)

        threading.Thread(target=send_y).start()
        b.rcvtimeo = 5000
        started = time.monotonic()
        with paused_at(Mailbox.wait, "poll_once(poller", lambda f: True, going_to_sleep):
            assert b.recv() == b"y"  # (before the fix: only once RCVTIMEO ran out)
        assert time.monotonic() - started < 4
    finally:
        a.close(linger=0)
        b.close(linger=0)
        context.term()


def _blocked_in_poll(thread: threading.Thread) -> bool:
    """Whether ``thread`` is inside a poll system call now (/proc: x86-64 poll and ppoll,
    arm64 ppoll)."""
    with open(f"/proc/self/task/{thread.native_id}/syscall") as f:
        return f.read().split()[0] in ("7", "271", "73")


@pytest.mark.parametrize("how", ["close", "destroy"])
def test_a_recv_blocked_in_another_thread_ends_as_its_socket_is_closed(how):
    """A thread asleep in ``recv`` while another thread closes its socket (or destroys the
    context) raises at once: the closing thread wakes it, and it closes the mailbox's
    descriptor as it leaves (closed under it, the poll went on until RCVTIMEO)."""
    context = zmq.Context()
    rep = context.socket(zmq.REP)
    rep.bind("inproc://closed-under-it")
    req = context.socket(zmq.REQ)
    req.connect("inproc://closed-under-it")
    req.rcvtimeo = 20_000
    req.send(b"q")
    ended: list[Any] = []

    def blocked() -> None:
        started = time.monotonic()
        try:
            req.recv()
        except zmq.ZMQError as exc:
            ended.append((exc.errno, time.monotonic() - started))

    thread = threading.Thread(target=blocked)
    thread.start()
    deadline = time.monotonic() + 10
    while not _blocked_in_poll(thread):  # (asleep in its mailbox's poll)
        assert time.monotonic() < deadline, "the recv never went to sleep"
        os.sched_yield()
    if how == "close":
        req.close(linger=0)
    else:
        context.destroy(linger=0)
    thread.join(10)
    assert ended and ended[0][0] == zmq.ENOTSOCK and ended[0][1] < 5, ended
    rep.close(linger=0)
    context.term()


def test_a_late_wake_up_leaves_a_lent_wait_seeing_commands():
    """A wake-up that lands after the wait it was for ended (a writer that saw the reader
    waiting, then ran late: ``Socket.poke``) leaves the mailbox disarmed with nothing queued.
    The next wait on a lent connection watches the descriptor: it must stay signalled, or a
    command sent then (the context's end) goes unseen until RCVTIMEO."""
    context, other = zmq.Context(), zmq.Context()
    rep = other.socket(zmq.REP)  # (its own context: term() leaves its connection be)
    port = rep.bind_to_random_port("tcp://127.0.0.1")
    req = context.socket(zmq.REQ)
    req.connect(f"tcp://127.0.0.1:{port}")
    terminator = threading.Thread(target=context.term)
    try:
        req.send(b"1")
        assert rep.recv() == b"1"
        rep.send(b"1")
        assert req.recv() == b"1"
        req.poll(1)  # a wait on the mailbox itself (as the last wait before the late wake-up)
        req.poke()  # the late wake-up
        req.rcvtimeo = 20_000
        req.send(b"2")
        assert rep.recv() == b"2"  # (never answered)

        def end_the_context() -> None:
            terminator.start()  # (sends STOP as this thread polls its connection and mailbox)

        started = time.monotonic()
        lent_poll = paused_at(
            WaitingMixin._poll_lent, "for fd, _ in", lambda f: True, end_the_context
        )
        with lent_poll, pytest.raises(zmq.ContextTerminated):
            req.recv()
        assert time.monotonic() - started < 5
    finally:
        req.close(linger=0)
        if terminator.ident is not None:
            terminator.join(10)
        rep.close(linger=0)
        other.term()


def test_a_wake_up_from_a_signal_handler_as_a_write_returns_completes():
    """A signal handler runs as a built-in returns -- right after the write that wakes an owner,
    with its Signaler's lock still held.  A handler that wakes the same owner again (it sends to
    that socket, whose thread re-armed meanwhile) must not wait for the lock its own thread
    holds: the handler is run here, at that point, by a profile function."""
    signaler = Mailbox().signaler
    done = threading.Event()

    def handler_at_the_write(frame: Any, event: str, arg: Any) -> None:
        if event == "c_return" and getattr(arg, "__name__", "") == "write" and not done.is_set():
            done.set()
            signaler.send()  # the handler's wake-up, nested in the first one

    def wake() -> None:
        sys.setprofile(handler_at_the_write)
        try:
            signaler.send()
        finally:
            sys.setprofile(None)

    thread = threading.Thread(target=wake, daemon=True)
    thread.start()
    thread.join(5)
    assert done.is_set() and not thread.is_alive(), "the nested wake-up waited for its own lock"
    signaler.close()
