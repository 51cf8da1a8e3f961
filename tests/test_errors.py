"""ZMQError and its subclasses, and which errno each misuse of a socket raises (as libzmq)."""

from __future__ import annotations

import errno
import time

import pytest

import brokerless as zmq
from tests.helpers import IPC_BEYOND_LIBZMQ, bind, recv_within

# -- the exception classes -------------------------------------------------------------------


def test_zmq_error_carries_errno_and_message():
    err = zmq.ZMQError(zmq.EINVAL)
    assert err.errno == zmq.EINVAL
    assert str(err)
    assert str(err) == zmq.strerror(zmq.EINVAL)
    assert isinstance(err, Exception)


def test_zmq_error_accepts_a_custom_message():
    err = zmq.ZMQError(zmq.EINVAL, "custom text")
    assert err.errno == zmq.EINVAL
    assert str(err) == "custom text"


def test_a_message_in_place_of_the_errno_is_taken_as_pyzmq_takes_it():
    """``raise zmq.Again("window full")`` is pyzmq code that runs: the class keeps its errno."""
    err = zmq.ZMQError("no room left")
    assert err.errno is None
    assert str(err) == "no room left"
    for cls, number in (
        (zmq.Again, zmq.EAGAIN),
        (zmq.ContextTerminated, zmq.ETERM),
        (zmq.InterruptedSystemCall, errno.EINTR),
    ):
        assert cls("window full").errno == number


def test_interrupted_system_call_keeps_its_errno_and_message():
    """Its OSError base's __init__ must not reset what ZMQError set (str() raised TypeError)."""
    err = zmq.InterruptedSystemCall()
    assert isinstance(err, InterruptedError)
    assert err.errno == errno.EINTR
    assert str(err)


@pytest.mark.beyond_pyzmq
def test_a_typed_error_made_with_a_message_says_it():
    """pyzmq's Again, ContextTerminated and InterruptedSystemCall drop the text they are given."""
    assert str(zmq.Again("the window is full")) == "the window is full"
    assert zmq.Again(None).errno == zmq.EAGAIN


@pytest.mark.parametrize("name", ["EFSM", "ETERM", "EAGAIN", "ENOTSOCK", "EPROTONOSUPPORT"])
def test_strerror_describes_every_errno(name):
    assert zmq.strerror(getattr(zmq, name))


def test_strerror_of_zmq_specific_errnos():
    assert zmq.strerror(zmq.ETERM) == "Context was terminated"
    assert zmq.strerror(zmq.EFSM) == "Operation cannot be accomplished in current state"


def test_again_is_a_zmq_error_with_eagain():
    assert issubclass(zmq.Again, zmq.ZMQError)
    assert zmq.Again().errno == zmq.EAGAIN
    assert str(zmq.Again())


def test_context_terminated_is_a_zmq_error_with_eterm():
    assert issubclass(zmq.ContextTerminated, zmq.ZMQError)
    assert zmq.ContextTerminated().errno == zmq.ETERM
    assert str(zmq.ContextTerminated())


def test_error_hierarchy_shares_a_base():
    assert issubclass(zmq.ZMQError, zmq.ZMQBaseError)
    assert issubclass(zmq.ZMQBindError, zmq.ZMQBaseError)
    assert issubclass(zmq.ZMQBaseError, Exception)
    # As in pyzmq, ZMQBindError (bind_to_random_port giving up) carries no errno.
    assert not issubclass(zmq.ZMQBindError, zmq.ZMQError)
    assert str(zmq.ZMQBindError("no free port")) == "no free port"


def test_nonblocking_recv_with_nothing_queued_raises_again(make, endpoint):
    pull = make(zmq.PULL)
    pull.bind(endpoint())
    with pytest.raises(zmq.Again) as info:
        pull.recv(zmq.NOBLOCK)
    assert info.value.errno == zmq.EAGAIN
    assert isinstance(info.value, zmq.ZMQError)
    assert str(info.value)


def test_again_is_caught_as_zmq_error(make, endpoint):
    pull = make(zmq.PULL)
    pull.bind(endpoint())
    with pytest.raises(zmq.ZMQError) as info:
        pull.recv(zmq.DONTWAIT)
    assert info.value.errno == zmq.EAGAIN


# -- closed sockets --------------------------------------------------------------------------

CLOSED_SOCKET_OPERATIONS = {
    "send": lambda s: s.send(b"x"),
    "recv": lambda s: s.recv(),
    "send_multipart": lambda s: s.send_multipart([b"a", b"b"]),
    "recv_multipart": lambda s: s.recv_multipart(),
    "bind": lambda s: s.bind("inproc://closed-socket-bind"),
    "connect": lambda s: s.connect("inproc://closed-socket-connect"),
    "setsockopt": lambda s: s.setsockopt(zmq.LINGER, 0),
    "getsockopt": lambda s: s.getsockopt(zmq.LINGER),
    "option attribute": lambda s: s.rcvhwm,
    "subscribe": lambda s: s.subscribe(b""),
}


@pytest.mark.parametrize(
    "operation", CLOSED_SOCKET_OPERATIONS.values(), ids=list(CLOSED_SOCKET_OPERATIONS)
)
def test_operation_on_closed_socket_raises_enotsock(ctx, operation):
    sock = ctx.socket(zmq.SUB)
    sock.close()
    with pytest.raises(zmq.ZMQError) as info:
        operation(sock)
    assert info.value.errno == zmq.ENOTSOCK


def test_poll_on_closed_socket_raises(ctx):
    """pyzmq raises ENOTSUP here (its Python-level check), not ENOTSOCK; either is an error."""
    sock = ctx.socket(zmq.PULL)
    sock.close()
    with pytest.raises(zmq.ZMQError):
        sock.poll(0)


def test_closing_a_closed_socket_is_harmless(ctx):
    sock = ctx.socket(zmq.PULL)
    sock.close()
    sock.close()
    assert sock.closed


# -- endpoints -------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["bind", "connect"])
def test_unknown_transport_raises_eprotonosupport(make, method):
    sock = make(zmq.PAIR)
    with pytest.raises(zmq.ZMQError) as info:
        getattr(sock, method)("foo://x")
    assert info.value.errno == zmq.EPROTONOSUPPORT


@pytest.mark.parametrize("method", ["bind", "connect"])
@pytest.mark.parametrize("address", ["noscheme", "inproc://"], ids=["no-scheme", "empty-inproc"])
def test_malformed_endpoint_raises_einval(make, method, address):
    sock = make(zmq.PAIR)
    with pytest.raises(zmq.ZMQError) as info:
        getattr(sock, method)(address)
    assert info.value.errno == zmq.EINVAL


@pytest.mark.parametrize("transport", IPC_BEYOND_LIBZMQ)
def test_binding_an_endpoint_twice_raises_eaddrinuse(make, endpoint):
    sock = make(zmq.PULL)
    addr = endpoint()
    sock.bind(addr)
    with pytest.raises(zmq.ZMQError) as info:
        sock.bind(addr)
    assert info.value.errno == zmq.EADDRINUSE


@pytest.mark.parametrize("transport", IPC_BEYOND_LIBZMQ)
def test_binding_an_endpoint_another_socket_holds_raises_eaddrinuse(make, endpoint):
    first, second = make(zmq.PULL), make(zmq.PULL)
    addr = bind(first, endpoint())
    with pytest.raises(zmq.ZMQError) as info:
        second.bind(addr)
    assert info.value.errno == zmq.EADDRINUSE


def test_endpoint_is_free_again_after_unbind(make, endpoint):
    first, second = make(zmq.PULL), make(zmq.PULL)
    addr = bind(first, endpoint())
    first.unbind(addr)
    second.bind(addr)
    assert second.last_endpoint.decode() == addr


def test_endpoint_is_free_again_after_close(ctx, make, endpoint):
    """libzmq releases a closed socket's endpoints from its reaper thread, so a re-bind right
    after close may still see EADDRINUSE for a moment; it must succeed soon after."""
    first = ctx.socket(zmq.PULL)
    addr = bind(first, endpoint())
    first.close(linger=0)
    second = make(zmq.PULL)
    deadline = time.monotonic() + 5
    while True:
        try:
            second.bind(addr)
            break
        except zmq.ZMQError as exc:
            assert exc.errno == zmq.EADDRINUSE
            assert time.monotonic() < deadline, "the endpoint was never released"
    assert second.last_endpoint.decode() == addr


def test_connecting_to_an_inproc_name_nobody_binds_is_fine(make):
    push = make(zmq.PUSH)
    push.connect("inproc://nobody-binds-this-yet")
    push.send(b"queued before bind")
    pull = make(zmq.PULL)
    pull.bind("inproc://nobody-binds-this-yet")
    assert recv_within(pull) == b"queued before bind"


def test_unbinding_an_endpoint_that_is_not_bound_raises_enoent(make, endpoint):
    sock = make(zmq.PULL)
    with pytest.raises(zmq.ZMQError) as info:
        sock.unbind(endpoint())
    assert info.value.errno == errno.ENOENT


def test_unbinding_twice_raises_enoent(make, endpoint):
    sock = make(zmq.PULL)
    addr = bind(sock, endpoint())
    sock.unbind(addr)
    with pytest.raises(zmq.ZMQError) as info:
        sock.unbind(addr)
    assert info.value.errno == errno.ENOENT


def test_disconnecting_an_endpoint_that_is_not_connected_raises_enoent(make, endpoint):
    sock = make(zmq.PUSH)
    with pytest.raises(zmq.ZMQError) as info:
        sock.disconnect(endpoint())
    assert info.value.errno == errno.ENOENT


# -- socket state and capabilities -----------------------------------------------------------


def test_req_recv_before_send_raises_efsm(make):
    req = make(zmq.REQ)
    with pytest.raises(zmq.ZMQError) as info:
        req.recv()
    assert info.value.errno == zmq.EFSM


def test_req_second_send_before_reply_raises_efsm(make, endpoint):
    rep, req = make(zmq.REP), make(zmq.REQ)
    req.connect(bind(rep, endpoint()))
    req.send(b"first")
    with pytest.raises(zmq.ZMQError) as info:
        req.send(b"second")
    assert info.value.errno == zmq.EFSM


def test_rep_send_before_recv_raises_efsm(make):
    rep = make(zmq.REP)
    with pytest.raises(zmq.ZMQError) as info:
        rep.send(b"unasked")
    assert info.value.errno == zmq.EFSM


def test_efsm_leaves_req_usable(make, endpoint):
    rep, req = make(zmq.REP), make(zmq.REQ)
    req.connect(bind(rep, endpoint()))
    with pytest.raises(zmq.ZMQError):
        req.recv()
    req.send(b"ping")
    assert recv_within(rep) == b"ping"
    rep.send(b"pong")
    assert recv_within(req) == b"pong"


@pytest.mark.parametrize(
    ("kind", "direction"),
    [(zmq.PUB, "recv"), (zmq.PUSH, "recv"), (zmq.SUB, "send"), (zmq.PULL, "send")],
    ids=["recv-on-PUB", "recv-on-PUSH", "send-on-SUB", "send-on-PULL"],
)
def test_unsupported_direction_raises_enotsup(make, kind, direction):
    sock = make(kind)
    with pytest.raises(zmq.ZMQError) as info:
        if direction == "recv":
            sock.recv()
        else:
            sock.send(b"x")
    assert info.value.errno == zmq.ENOTSUP


def test_option_for_another_socket_type_raises_einval(make):
    pull = make(zmq.PULL)
    with pytest.raises(zmq.ZMQError) as info:
        pull.setsockopt(zmq.SUBSCRIBE, b"")
    assert info.value.errno == zmq.EINVAL


def test_unknown_socket_type_raises_einval(ctx):
    with pytest.raises(zmq.ZMQError) as info:
        ctx.socket(999)
    assert info.value.errno == zmq.EINVAL


def test_sending_a_str_raises_type_error_with_a_message(make, endpoint):
    push = make(zmq.PUSH)
    push.bind(endpoint())
    with pytest.raises(TypeError) as info:
        push.send("text is not bytes")
    assert str(info.value)
