"""The pollers an I/O thread waits on (``brokerless.io.poller``): epoll's and the selectors
module's, which must answer alike -- the I/O thread's turn (``test_transport_io_thread.py``)
runs on either.  (Not collected when the suite runs against pyzmq: libzmq has no Python
poller.)"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

import brokerless.io.poller as poller_module
from brokerless.io.poller import READ, WRITE, EpollPoller, Poller, SelectorPoller, new_poller

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(params=[EpollPoller, SelectorPoller], ids=["epoll", "selectors"])
def poller(request) -> Iterator[Poller]:
    made = request.param()
    yield made
    made.close()


@pytest.fixture
def pair(nonblocking_socketpair):
    return nonblocking_socketpair


def handler(mask: int) -> None:
    raise AssertionError("pollers only report; the I/O thread runs handlers")


def test_this_platform_polls_with_epoll():
    poller = new_poller()
    try:
        assert isinstance(poller, EpollPoller)  # Linux: what CI and the benchmarks run
    finally:
        poller.close()


def test_a_ready_descriptor_is_reported_with_its_registration_then(poller, pair):
    ours, theirs = pair
    poller.register(ours, READ, handler)
    assert poller.poll(0) == []
    theirs.send(b"x")
    [(fd, events, registration)] = poller.poll(5)
    assert (fd, events) == (ours.fileno(), READ)
    assert registration == (ours, READ, handler)
    assert poller.registrations == {ours.fileno(): (ours, READ, handler)}


def test_modify_changes_the_events_and_the_handler(poller, pair):
    ours, _ = pair

    def other(mask: int) -> None: ...

    poller.register(ours, READ, handler)
    poller.modify(ours, READ | WRITE, other)
    [(fd, events, registration)] = poller.poll(5)  # writable at once, nothing to read
    assert (fd, events, registration) == (ours.fileno(), WRITE, (ours, READ | WRITE, other))


def test_a_descriptor_is_registered_once_and_modified_only_when_registered(poller, pair):
    ours, theirs = pair
    with pytest.raises(KeyError):
        poller.modify(ours, READ, handler)
    poller.register(ours, READ, handler)
    with pytest.raises(KeyError):
        poller.register(ours, WRITE, handler)
    poller.register(theirs.fileno(), READ, None)  # a descriptor number does as well
    assert set(poller.registrations) == {ours.fileno(), theirs.fileno()}


def test_unregister_forgets_and_ignores_what_it_does_not_watch(poller, pair):
    ours, theirs = pair
    poller.unregister(ours)  # never registered: nothing happens
    poller.register(ours, READ, handler)
    theirs.send(b"x")
    poller.unregister(ours)
    assert poller.poll(0) == []
    assert poller.registrations == {}
    poller.unregister(ours)  # twice: nothing happens


def test_a_socket_closed_while_watched_is_still_unregistered_by_the_object(poller):
    """A connection's socket may be closed before its engine unregisters it (its fileno() is
    then -1): the registration must still go, or the next socket given that descriptor
    number could not be registered."""
    ours, theirs = socket.socketpair()
    poller.register(ours, READ, handler)
    ours.close()
    poller.unregister(ours)
    assert poller.registrations == {}
    again, other = socket.socketpair()  # given the number just freed, as a rule
    try:
        poller.register(again, READ, handler)  # (a stale registration: KeyError)
        assert list(poller.registrations) == [again.fileno()]
    finally:
        for sock in (theirs, again, other):
            sock.close()


def test_a_closed_socket_or_events_other_than_read_and_write_are_refused(poller, pair):
    ours, _ = pair
    closed = socket.socket()
    closed.close()
    with pytest.raises(ValueError):
        poller.register(closed, READ, handler)
    with pytest.raises(ValueError):
        poller.register(ours, 4, handler)
    with pytest.raises(ValueError):
        poller.register(ours, 0, handler)
    assert poller.registrations == {}


def test_a_hang_up_is_reported_to_readers_and_writers(poller, pair):
    """The peer gone: a reader learns it from its read, a writer from its write -- each is
    told, as the selectors module tells them."""
    ours, theirs = pair
    poller.register(ours, READ | WRITE, handler)
    theirs.close()
    [(_, events, _)] = poller.poll(5)
    assert events == READ | WRITE


def test_poll_waits_no_longer_than_its_timeout(poller, pair):
    ours, _ = pair
    poller.register(ours, READ, handler)
    assert poller.poll(0.01) == []  # nothing comes: it returns (pytest's timeout otherwise)


def test_the_search_for_a_closed_socket_survives_a_registration_made_meanwhile():
    """The I/O thread unregisters a closed socket by searching the registrations, while a
    socket's thread may register its lent connection at any bytecode (return_input): the
    search must not meet the table changing under it ("dictionary changed size during
    iteration").  The registration is made here from a trace function, as the search runs."""
    poller = EpollPoller()
    pairs = [socket.socketpair() for _ in range(3)]
    closed, peer = socket.socketpair()
    late = pairs[2][0]
    try:
        for ours, _ in pairs[:2]:
            poller.register(ours, READ, handler)
        poller.register(closed, READ, handler)
        closed.close()

        def meanwhile(frame, event, arg):
            searching = frame.f_code.co_filename == poller_module.__file__ and (
                frame.f_code.co_name in ("<genexpr>", "<listcomp>")
            )
            if searching and late.fileno() not in poller.registrations:
                poller.register(late, READ, handler)
            return meanwhile

        previous = sys.gettrace()
        sys.settrace(meanwhile)
        try:
            poller.unregister(closed)
        finally:
            sys.settrace(previous)
        assert sorted(poller.registrations) == sorted(ours.fileno() for ours, _ in pairs)
    finally:
        poller.close()
        for sock in (peer, *(s for pair in pairs for s in pair)):
            sock.close()


def test_a_hang_up_alone_is_reported_as_readable(poller):
    """A pipe whose writer closed reports EPOLLHUP without EPOLLIN: its reader must still be
    told (READ), or the I/O thread would wake for it over and over and never read the end."""
    read_end, write_end = os.pipe()
    try:
        poller.register(read_end, READ, handler)
        os.close(write_end)
        [(fd, events, _)] = poller.poll(5)
        assert (fd, events) == (read_end, READ)
    finally:
        poller.unregister(read_end)
        os.close(read_end)


def test_where_there_is_no_epoll_a_context_runs_on_the_selectors_module():
    """The module loads and the I/O thread polls with the selectors module where select has no
    epoll (macOS, Windows): here, epoll is taken away from a fresh interpreter first."""
    script = textwrap.dedent(
        """
        import select
        del select.epoll, select.EPOLLIN, select.EPOLLOUT
        import brokerless as zmq
        from brokerless.io.poller import SelectorPoller, new_poller
        assert isinstance(new_poller(), SelectorPoller)
        context = zmq.Context()
        a, b = context.socket(zmq.PAIR), context.socket(zmq.PAIR)
        port = a.bind_to_random_port("tcp://127.0.0.1")
        b.connect(f"tcp://127.0.0.1:{port}")
        b.rcvtimeo = 10000
        a.send(b"over tcp")
        assert b.recv() == b"over tcp"
        a.close(linger=0)
        b.close(linger=0)
        context.term()
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
