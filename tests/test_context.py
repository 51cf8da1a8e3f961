"""Context: creation, the process-wide instance, default socket options, term and destroy."""

from __future__ import annotations

import threading
import warnings

import pytest

import brokerless as zmq
from tests.helpers import bind, recv_within


def run_in_thread(target) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


# -- creation --------------------------------------------------------------------------------


def test_context_with_one_io_thread_makes_working_sockets(endpoint):
    context = zmq.Context(io_threads=1)
    try:
        a, b = context.socket(zmq.PAIR), context.socket(zmq.PAIR)
        b.connect(bind(a, endpoint()))
        a.send(b"hi")
        assert recv_within(b) == b"hi"
        a.close(linger=0)
        b.close(linger=0)
    finally:
        context.destroy(linger=0)


def test_new_context_is_open(ctx):
    assert ctx.closed is False


def test_socket_is_created_with_the_requested_type(ctx):
    sock = ctx.socket(zmq.PUSH)
    try:
        assert sock.type == zmq.PUSH
        assert sock.context is ctx
    finally:
        sock.close(linger=0)


def test_sockets_of_one_context_talk_over_inproc(ctx, endpoint):
    push, pull = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
    try:
        push.connect(bind(pull, endpoint()))
        push.send(b"same context")
        assert recv_within(pull) == b"same context"
    finally:
        push.close(linger=0)
        pull.close(linger=0)


@pytest.mark.parametrize("transport", ["inproc"])
def test_inproc_names_are_private_to_a_context(ctx, endpoint):
    other = zmq.Context()
    try:
        pull = ctx.socket(zmq.PULL)
        addr = bind(pull, endpoint())
        foreign = other.socket(zmq.PULL)
        foreign.bind(addr)  # no EADDRINUSE: another context's inproc namespace
        push = other.socket(zmq.PUSH)
        push.connect(addr)
        push.send(b"to my own context")
        assert recv_within(foreign) == b"to my own context"
        assert pull.poll(50) == 0
        pull.close(linger=0)
    finally:
        other.destroy(linger=0)


# -- the global instance ---------------------------------------------------------------------


def test_instance_is_the_same_object_every_time():
    first = zmq.Context.instance()
    try:
        assert zmq.Context.instance() is first
        assert isinstance(first, zmq.Context)
        assert not first.closed
    finally:
        first.term()


def test_instance_is_replaced_once_terminated():
    first = zmq.Context.instance()
    first.term()
    second = zmq.Context.instance()
    try:
        assert second is not first
        assert not second.closed
    finally:
        second.term()


# -- default socket options ------------------------------------------------------------------


def test_context_setsockopt_applies_to_new_sockets(ctx):
    ctx.setsockopt(zmq.LINGER, 0)
    ctx.setsockopt(zmq.SNDHWM, 5)
    sock = ctx.socket(zmq.PUSH)
    try:
        assert sock.linger == 0
        assert sock.sndhwm == 5
        assert ctx.getsockopt(zmq.SNDHWM) == 5
    finally:
        sock.close()


def test_context_option_attributes_apply_to_new_sockets(ctx):
    ctx.linger = 0
    ctx.rcvhwm = 7
    sock = ctx.socket(zmq.PULL)
    try:
        assert (sock.linger, sock.rcvhwm) == (0, 7)
    finally:
        sock.close()


def test_context_defaults_leave_existing_sockets_alone(ctx):
    before = ctx.socket(zmq.PUSH)
    try:
        ctx.setsockopt(zmq.SNDHWM, 5)
        assert before.sndhwm == 1000
    finally:
        before.close(linger=0)


def test_context_defaults_that_do_not_apply_are_skipped(ctx):
    ctx.setsockopt(zmq.SUBSCRIBE, b"")  # only SUB accepts it
    ctx.setsockopt(zmq.LINGER, 0)
    push = ctx.socket(zmq.PUSH)  # does not raise
    try:
        assert push.linger == 0
    finally:
        push.close()


# -- term ------------------------------------------------------------------------------------


def test_term_with_no_sockets_returns_and_closes():
    context = zmq.Context()
    context.term()
    assert context.closed is True


def test_term_after_sockets_are_closed_returns(endpoint):
    context = zmq.Context()
    push, pull = context.socket(zmq.PUSH), context.socket(zmq.PULL)
    push.connect(bind(pull, endpoint()))
    push.close()
    pull.close()
    terminator = run_in_thread(context.term)
    terminator.join(5)
    assert not terminator.is_alive()
    assert context.closed


def test_term_waits_for_open_sockets_to_close():
    context = zmq.Context()
    sock = context.socket(zmq.PULL)
    terminator = run_in_thread(context.term)
    terminator.join(0.2)
    assert terminator.is_alive(), "term() returned while a socket was still open"
    assert not context.closed
    sock.close()
    terminator.join(5)
    assert not terminator.is_alive(), "term() did not return after the last socket closed"
    assert context.closed


def test_term_is_idempotent():
    context = zmq.Context()
    context.term()
    context.term()
    assert context.closed


def test_creating_a_socket_after_term_raises():
    """pyzmq raises ENOTSUP (its own closed check); the errno is pinned down below."""
    context = zmq.Context()
    context.term()
    with pytest.raises(zmq.ZMQError):
        context.socket(zmq.PAIR)


def test_creating_a_socket_after_term_raises_enotsup():
    """pyzmq checks ``closed`` itself before libzmq is asked, and raises ENOTSUP (libzmq's
    zmq_socket answers ETERM while a context is being terminated, and after that the context
    is freed): code written for pyzmq meets ENOTSUP."""
    context = zmq.Context()
    context.term()
    with pytest.raises(zmq.ZMQError) as info:
        context.socket(zmq.PAIR)
    assert info.value.errno == zmq.ENOTSUP


# -- destroy ---------------------------------------------------------------------------------


def test_destroy_closes_every_socket_and_the_context(endpoint):
    context = zmq.Context()
    push, pull = context.socket(zmq.PUSH), context.socket(zmq.PULL)
    push.connect(bind(pull, endpoint()))
    context.destroy()
    assert push.closed and pull.closed
    assert context.closed


def test_destroy_with_linger_zero_drops_undelivered_messages(endpoint):
    context = zmq.Context()
    push = context.socket(zmq.PUSH)  # LINGER -1: term() alone would wait forever
    push.connect(endpoint())  # nobody binds it
    push.send(b"never delivered")
    destroyer = run_in_thread(lambda: context.destroy(linger=0))
    destroyer.join(5)
    assert not destroyer.is_alive(), "destroy(linger=0) waited for an undeliverable message"
    assert push.closed and context.closed


def test_destroy_of_a_terminated_context_is_harmless():
    context = zmq.Context()
    context.term()
    context.destroy()
    assert context.closed


def test_creating_a_socket_after_destroy_raises():
    context = zmq.Context()
    context.destroy()
    with pytest.raises(zmq.ZMQError):
        context.socket(zmq.PAIR)


# -- context manager -------------------------------------------------------------------------


def test_context_manager_yields_the_context_and_terminates_it():
    with zmq.Context() as context:
        assert isinstance(context, zmq.Context)
        assert not context.closed
        sock = context.socket(zmq.PAIR)
        sock.close()
    assert context.closed


def test_context_manager_exit_closes_leftover_sockets():
    """pyzmq's __exit__ is destroy(): leftover sockets are closed (with a ResourceWarning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        with zmq.Context() as context:
            sock = context.socket(zmq.PAIR)
            sock.linger = 0
    assert sock.closed
    assert context.closed


def test_context_manager_terminates_on_error():
    with pytest.raises(RuntimeError), zmq.Context() as context:
        raise RuntimeError("boom")
    assert context.closed
