"""A socket's mailbox: the commands other threads queue for the socket's thread, and the
descriptor that wakes it (polled by the socket's own blocking calls, or by a Poller or event
loop).  Interleavings that matter are forced by pausing a thread at a line of the mailbox's
own code (a trace function), never by timing.  (Not collected when the suite runs against
pyzmq: libzmq's mailboxes are not Python.)"""

from __future__ import annotations

import inspect
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import brokerless as zmq
from brokerless.mailbox import Mailbox

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
        with paused_at(Mailbox.wait, "poller.poll(timeout_ms)", lambda f: True, going_to_sleep):
            assert b.recv() == b"y"  # (before the fix: only once RCVTIMEO ran out)
        assert time.monotonic() - started < 4
    finally:
        a.close(linger=0)
        b.close(linger=0)
        context.term()
