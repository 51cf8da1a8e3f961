"""zmq.Poller and zmq.select over sockets and plain file descriptors: level-triggered, with
libzmq's timeout semantics (milliseconds for Poller.poll, seconds for select)."""

from __future__ import annotations

import os
import threading
import time

import pytest

import brokerless as zmq
from tests.helpers import bind, connect, recv_within


@pytest.fixture
def pair(make, endpoint):
    """Two connected PAIR sockets (sender, receiver)."""
    a, b = make(zmq.PAIR), make(zmq.PAIR)
    connect(b, bind(a, endpoint()), a)
    return a, b


@pytest.fixture
def pipe():
    """An os.pipe() as (read fd, write fd), closed after the test."""
    r, w = os.pipe()
    yield r, w
    os.close(r)
    os.close(w)


class HasFileno:
    """Not a socket, not an int: only a fileno() method, as select.select accepts."""

    def __init__(self, fd: int):
        self.fd = fd

    def fileno(self) -> int:
        return self.fd


def wait_for_pollin(poller, sock, timeout_ms: int = 2000) -> dict:
    events = dict(poller.poll(timeout_ms))
    assert events.get(sock) == zmq.POLLIN, f"no POLLIN for {sock!r} within {timeout_ms} ms"
    return events


# -- Poller over sockets ---------------------------------------------------------------------


def test_poll_with_nothing_ready_returns_an_empty_list(pair):
    _, b = pair
    poller = zmq.Poller()
    poller.register(b, zmq.POLLIN)
    assert poller.poll(0) == []


def test_poll_reports_a_waiting_message_as_socket_event_pairs(pair):
    a, b = pair
    poller = zmq.Poller()
    poller.register(b, zmq.POLLIN)
    a.send(b"x")
    result = poller.poll(2000)
    assert result == [(b, zmq.POLLIN)]
    sock, event = result[0]
    assert sock is b
    assert type(event) is int  # (pyzmq's are plain ints; a PollEvent member differs in repr)


def test_an_fds_events_are_plain_ints_too(pipe):
    r, w = pipe
    os.write(w, b"x")
    poller = zmq.Poller()
    poller.register(r, zmq.POLLIN)
    assert [(fd, type(event)) for fd, event in poller.poll(2000)] == [(r, int)]


def test_poll_result_makes_a_dict(pair):
    a, b = pair
    poller = zmq.Poller()
    poller.register(b, zmq.POLLIN)
    a.send(b"x")
    events = dict(poller.poll(2000))
    assert events == {b: zmq.POLLIN}
    assert events[b] & zmq.POLLIN


def test_poll_is_level_triggered(pair):
    a, b = pair
    poller = zmq.Poller()
    poller.register(b, zmq.POLLIN)
    a.send(b"x")
    wait_for_pollin(poller, b)
    # Unread, so it is reported again, every time.
    assert dict(poller.poll(0)) == {b: zmq.POLLIN}
    assert dict(poller.poll(0)) == {b: zmq.POLLIN}
    b.recv()
    assert poller.poll(0) == []


def test_poll_keeps_reporting_while_messages_remain(pair, transport):
    a, b = pair
    poller = zmq.Poller()
    poller.register(b, zmq.POLLIN)
    a.send(b"1")
    a.send(b"2")
    wait_for_pollin(poller, b)
    b.recv()
    # over the wire the second message may still be on its way; inproc it is already queued
    wait_for_pollin(poller, b, 0 if transport == "inproc" else 2000)
    b.recv()
    assert poller.poll(0) == []


def test_poll_reports_only_the_ready_sockets(make, endpoint):
    pull1, pull2, push = make(zmq.PULL), make(zmq.PULL), make(zmq.PUSH)
    addr1 = bind(pull1, endpoint())
    bind(pull2, endpoint())
    push.connect(addr1)
    poller = zmq.Poller()
    poller.register(pull1, zmq.POLLIN)
    poller.register(pull2, zmq.POLLIN)
    push.send(b"only for pull1")
    assert dict(poller.poll(2000)) == {pull1: zmq.POLLIN}


def test_pollout_on_a_push_with_room(make, endpoint):
    pull, push = make(zmq.PULL), make(zmq.PUSH)
    push.connect(bind(pull, endpoint()))
    poller = zmq.Poller()
    poller.register(push, zmq.POLLOUT)
    assert dict(poller.poll(2000)) == {push: zmq.POLLOUT}


def test_no_pollout_on_a_push_without_peers(make):
    push = make(zmq.PUSH)
    poller = zmq.Poller()
    poller.register(push, zmq.POLLOUT)
    assert poller.poll(0) == []


def test_no_pollout_on_a_push_at_its_high_water_mark(make, endpoint):
    pull, push = make(zmq.PULL), make(zmq.PUSH)
    pull.rcvhwm = 1
    push.sndhwm = 1
    push.connect(bind(pull, endpoint()))
    with pytest.raises(zmq.Again):  # fill the pipe
        for _ in range(100):
            push.send(b"fill", zmq.NOBLOCK)
    poller = zmq.Poller()
    poller.register(push, zmq.POLLOUT)
    assert poller.poll(0) == []
    recv_within(pull)
    assert dict(poller.poll(2000)) == {push: zmq.POLLOUT}


def test_register_defaults_to_pollin_and_pollout(pair):
    a, b = pair
    poller = zmq.Poller()
    poller.register(b)
    a.send(b"x")
    assert b.poll(2000)
    assert dict(poller.poll(0)) == {b: zmq.POLLIN | zmq.POLLOUT}


def test_events_are_masked_by_the_registered_flags(pair):
    a, b = pair
    poller = zmq.Poller()
    poller.register(b, zmq.POLLOUT)
    a.send(b"x")
    assert b.poll(2000)
    assert dict(poller.poll(0)) == {b: zmq.POLLOUT}


def test_modify_changes_the_flags(pair):
    _, b = pair
    poller = zmq.Poller()
    poller.register(b, zmq.POLLIN)
    assert poller.poll(0) == []
    poller.modify(b, zmq.POLLOUT)
    assert dict(poller.poll(0)) == {b: zmq.POLLOUT}


def test_registering_again_replaces_the_flags(pair):
    _, b = pair
    poller = zmq.Poller()
    poller.register(b, zmq.POLLIN)
    poller.register(b, zmq.POLLOUT)
    assert poller.poll(0) == [(b, zmq.POLLOUT)]


def test_unregister_stops_reporting(pair):
    a, b = pair
    poller = zmq.Poller()
    poller.register(b, zmq.POLLIN)
    a.send(b"x")
    wait_for_pollin(poller, b)
    poller.unregister(b)
    assert poller.poll(0) == []


def test_register_with_no_flags_unregisters(pair):
    a, b = pair
    poller = zmq.Poller()
    poller.register(b, zmq.POLLIN)
    a.send(b"x")
    wait_for_pollin(poller, b)
    poller.register(b, 0)
    assert poller.poll(0) == []


def test_unregistering_an_unknown_socket_raises_key_error(pair):
    a, _ = pair
    with pytest.raises(KeyError):
        zmq.Poller().unregister(a)


def test_empty_poller_returns_an_empty_list():
    assert zmq.Poller().poll(0) == []
    assert zmq.Poller().poll(10) == []


@pytest.mark.parametrize(
    "call",
    [
        lambda: zmq.Poller().poll(),
        lambda: zmq.Poller().poll(-1),
        lambda: zmq.zmq_poll([], -1),
        lambda: zmq.select([], [], []),
    ],
    ids=["poll()", "poll(-1)", "zmq_poll", "select"],
)
def test_polling_nothing_without_a_timeout_returns_at_once(call):
    """pyzmq returns at once when nothing is registered (its zmq_poll never reaches libzmq's,
    which would sleep): a loop that polls after unregistering its last socket must not hang."""
    done = []
    waiter = threading.Thread(target=lambda: done.append(call()), daemon=True)
    waiter.start()
    waiter.join(5)
    assert done and not any(done[0]), "polling nothing blocked"


def test_a_poller_whose_last_socket_was_unregistered_returns_at_once(pair):
    a, _ = pair
    poller = zmq.Poller()
    poller.register(a, zmq.POLLIN)
    poller.unregister(a)
    start = time.monotonic()
    assert poller.poll(2000) == []
    assert time.monotonic() - start < 1.0


def test_poller_lists_its_registrations(pair):
    a, b = pair
    poller = zmq.Poller()
    poller.register(a, zmq.POLLIN)
    poller.register(b, zmq.POLLOUT)
    assert list(poller.sockets) == [(a, zmq.POLLIN), (b, zmq.POLLOUT)]


# -- plain file descriptors ------------------------------------------------------------------


def test_poll_an_os_pipe(pipe):
    r, w = pipe
    poller = zmq.Poller()
    poller.register(r, zmq.POLLIN)
    assert poller.poll(0) == []
    os.write(w, b"!")
    assert poller.poll(2000) == [(r, zmq.POLLIN)]
    assert poller.poll(0) == [(r, zmq.POLLIN)]  # level-triggered: still unread
    os.read(r, 1)
    assert poller.poll(0) == []


def test_poll_an_object_with_fileno_reports_its_fd(pipe):
    """As select.poll does (and pyzmq), a non-socket is reported by its integer fd."""
    r, w = pipe
    poller = zmq.Poller()
    poller.register(HasFileno(r), zmq.POLLIN)
    os.write(w, b"!")
    assert poller.poll(2000) == [(r, zmq.POLLIN)]


def test_poll_pollout_on_a_pipe_write_end(pipe):
    _, w = pipe
    poller = zmq.Poller()
    poller.register(w, zmq.POLLOUT)
    assert poller.poll(0) == [(w, zmq.POLLOUT)]


def test_poll_sockets_and_fds_together(pair, pipe):
    a, b = pair
    r, w = pipe
    other_r, other_w = os.pipe()
    try:
        poller = zmq.Poller()
        poller.register(b, zmq.POLLIN)
        poller.register(r, zmq.POLLIN)
        poller.register(HasFileno(other_r), zmq.POLLIN)
        assert poller.poll(0) == []

        os.write(w, b"!")
        assert dict(poller.poll(2000)) == {r: zmq.POLLIN}

        a.send(b"x")
        os.write(other_w, b"!")
        assert b.poll(2000)
        assert dict(poller.poll(0)) == {b: zmq.POLLIN, r: zmq.POLLIN, other_r: zmq.POLLIN}
    finally:
        os.close(other_r)
        os.close(other_w)


def test_a_socket_message_wakes_a_poll_that_also_watches_an_fd(pair, pipe):
    a, b = pair
    r, _ = pipe
    poller = zmq.Poller()
    poller.register(r, zmq.POLLIN)
    poller.register(b, zmq.POLLIN)
    result = run_blocking_poll_then(lambda: a.send(b"wake"), lambda: poller.poll(None))
    assert dict(result) == {b: zmq.POLLIN}


def test_an_fd_wakes_a_poll_that_also_watches_a_socket(pair, pipe):
    _, b = pair
    r, w = pipe
    poller = zmq.Poller()
    poller.register(b, zmq.POLLIN)
    poller.register(r, zmq.POLLIN)
    result = run_blocking_poll_then(lambda: os.write(w, b"!"), lambda: poller.poll(-1))
    assert dict(result) == {r: zmq.POLLIN}


# -- timeouts --------------------------------------------------------------------------------


def run_blocking_poll_then(wake, poll):
    """Run ``poll`` in a thread, check it is still waiting, then ``wake`` it; return its result.

    The poll is expected to wait for ``wake``: if it returns early, the test fails.
    """
    started = threading.Event()
    outcome = {}

    def poll_in_thread():
        started.set()
        try:
            outcome["result"] = poll()
        except BaseException as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=poll_in_thread, daemon=True)
    thread.start()
    assert started.wait(5)
    thread.join(0.2)
    assert thread.is_alive(), f"poll returned before anything was ready: {outcome}"
    wake()
    thread.join(5)
    assert not thread.is_alive(), "poll did not wake up"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def test_poll_timeout_zero_returns_at_once(pair):
    _, b = pair
    poller = zmq.Poller()
    poller.register(b, zmq.POLLIN)
    start = time.monotonic()
    assert poller.poll(0) == []
    assert time.monotonic() - start < 0.5


def test_poll_timeout_is_in_milliseconds(pair):
    _, b = pair
    poller = zmq.Poller()
    poller.register(b, zmq.POLLIN)
    start = time.monotonic()
    assert poller.poll(100) == []
    elapsed = time.monotonic() - start
    assert 0.09 <= elapsed < 2


@pytest.mark.parametrize("forever", [None, -1], ids=["None", "-1"])
def test_poll_without_timeout_waits_for_a_message(pair, forever):
    a, b = pair
    poller = zmq.Poller()
    poller.register(b, zmq.POLLIN)
    result = run_blocking_poll_then(lambda: a.send(b"late"), lambda: poller.poll(forever))
    assert result == [(b, zmq.POLLIN)]


def test_poll_default_timeout_waits_for_a_message(pair):
    a, b = pair
    poller = zmq.Poller()
    poller.register(b, zmq.POLLIN)
    result = run_blocking_poll_then(lambda: a.send(b"late"), poller.poll)
    assert result == [(b, zmq.POLLIN)]


def test_socket_poll_without_timeout_waits_for_a_message(pair):
    a, b = pair
    result = run_blocking_poll_then(lambda: a.send(b"late"), lambda: b.poll(None))
    assert result == zmq.POLLIN


def test_message_sent_from_another_thread_wakes_a_timed_poll(pair):
    a, b = pair
    poller = zmq.Poller()
    poller.register(b, zmq.POLLIN)
    result = run_blocking_poll_then(lambda: a.send(b"late"), lambda: poller.poll(10_000))
    assert result == [(b, zmq.POLLIN)]


# -- closed sockets --------------------------------------------------------------------------


def test_unregistering_a_closed_socket_keeps_the_poller_usable(make, pair):
    a, b = pair
    doomed = make(zmq.PULL)
    poller = zmq.Poller()
    poller.register(doomed, zmq.POLLIN)
    poller.register(b, zmq.POLLIN)
    doomed.close()
    poller.unregister(doomed)
    a.send(b"x")
    assert dict(poller.poll(2000)) == {b: zmq.POLLIN}


@pytest.mark.beyond_libzmq
def test_polling_a_registered_socket_that_was_closed_raises_enotsock(make):
    """libzmq's zmq_poll answers ENOTSOCK for a closed socket; pyzmq never gets that far: it
    hands libzmq a NULL socket, which libzmq polls as file descriptor 0 (stdin)."""
    doomed = make(zmq.PULL)
    poller = zmq.Poller()
    poller.register(doomed, zmq.POLLIN)
    doomed.close()
    with pytest.raises(zmq.ZMQError) as info:
        poller.poll(0)
    assert info.value.errno == zmq.ENOTSOCK


# -- zmq.select ------------------------------------------------------------------------------


def test_select_with_nothing_ready_returns_empty_lists(pair, pipe):
    _, b = pair
    r, _ = pipe
    assert zmq.select([b, r], [], [], 0) == ([], [], [])


def test_select_reports_readable_sockets_and_fds(pair, pipe):
    a, b = pair
    r, w = pipe
    a.send(b"x")
    os.write(w, b"!")
    assert b.poll(2000)
    readable, writable, errored = zmq.select([b, r], [], [], 0)
    assert set(readable) == {b, r}
    assert (writable, errored) == ([], [])


def test_select_reports_writable_sockets(pair):
    a, b = pair
    readable, writable, _ = zmq.select([b], [a], [], 0)
    assert readable == []
    assert writable == [a]


def test_select_is_level_triggered(pair):
    a, b = pair
    a.send(b"x")
    assert b.poll(2000)
    assert zmq.select([b], [], [], 0)[0] == [b]
    assert zmq.select([b], [], [], 0)[0] == [b]
    b.recv()
    assert zmq.select([b], [], [], 0)[0] == []


def test_select_timeout_is_in_seconds(pair):
    _, b = pair
    start = time.monotonic()
    assert zmq.select([b], [], [], 0.1) == ([], [], [])
    elapsed = time.monotonic() - start
    assert 0.09 <= elapsed < 2


def test_select_without_timeout_waits_for_a_message(pair):
    a, b = pair
    result = run_blocking_poll_then(lambda: a.send(b"late"), lambda: zmq.select([b], [], []))
    assert result == ([b], [], [])


def test_select_timeout_none_waits_for_an_fd(pair, pipe):
    _, b = pair
    r, w = pipe
    result = run_blocking_poll_then(
        lambda: os.write(w, b"!"), lambda: zmq.select([b, r], [], [], None)
    )
    assert result == ([r], [], [])


@pytest.mark.parametrize("how", ["close", "destroy"])
def test_a_poller_in_another_thread_is_woken_when_its_socket_is_closed(how):
    """pyzmq's poller raises ENOTSOCK at once when another thread closes a socket it polls (or
    destroys the context); brokerless's slept on -- for ever without a timeout, so a worker
    looping on ``poller.poll()`` kept the program from ending."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PULL)
    sock.bind("tcp://127.0.0.1:*")
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    started, outcome = threading.Event(), []

    def wait() -> None:
        started.set()
        try:
            outcome.append(poller.poll())
        except zmq.ZMQError as exc:
            outcome.append(exc.errno)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    started.wait(5)
    assert not waiter.join(0.2) and waiter.is_alive()  # (it sleeps in the poll)
    if how == "close":
        sock.close()
    else:
        ctx.destroy(linger=0)
    waiter.join(5)
    assert outcome == [zmq.ENOTSOCK], "the poller slept on"
    ctx.destroy(linger=0)


def test_two_threads_waiting_on_one_socket_or_poller_time_out_as_pyzmqs():
    """Sockets are not thread-safe, but pyzmq tolerates one thread receiving while another
    polls the same socket, and a Poller shared by threads: each times out.  The second waiter
    got Python's RuntimeError("concurrent poll() invocation"), which ``except zmq.ZMQError``
    code does not catch."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.rcvtimeo = 300
    sock.connect("tcp://127.0.0.1:1")  # nobody there: nothing ever arrives
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    outcomes: list[tuple[str, str]] = []

    def attempt(name, call) -> None:
        try:
            call()
            outcomes.append((name, "returned"))
        except zmq.Again:
            outcomes.append((name, "Again"))
        except Exception as exc:  # the failure under test
            outcomes.append((name, type(exc).__name__))

    calls = {
        "recv": sock.recv,
        "sock.poll": lambda: sock.poll(300),
        "poller": lambda: poller.poll(300),
        "poller again": lambda: poller.poll(300),
    }
    threads = [threading.Thread(target=attempt, args=item) for item in calls.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    ctx.destroy(linger=0)
    assert sorted(outcomes) == [
        ("poller", "returned"),
        ("poller again", "returned"),
        ("recv", "Again"),
        ("sock.poll", "returned"),
    ]
