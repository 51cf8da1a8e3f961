"""pyzmq's public API beyond sending and receiving: constants, option attributes, subclassing,
shadows, copies, reprs, warnings, frames and trackers -- the details pyzmq's own suite checks.

Run against pyzmq (BROKERLESS_TEST_AGAINST=pyzmq) these describe pyzmq; tests marked
``beyond_libzmq`` describe where brokerless deliberately says more or refuses more.
"""

from __future__ import annotations

import copy
import errno
import gc
import warnings

import pytest
import zmq as reference  # always real pyzmq: conftest only swaps the name "brokerless"

import brokerless as zmq
from tests.helpers import bind, recv_within

# -- constants -------------------------------------------------------------------------------


def test_every_pyzmq_constant_exists_with_pyzmqs_value():
    for name in reference.constants.__all__:
        theirs = getattr(reference.constants, name)
        if name in ("Enum", "IntEnum", "IntFlag"):
            continue
        mine = getattr(zmq.constants, name)
        if isinstance(theirs, type):
            for member, value in theirs.__members__.items():
                assert int(getattr(mine, member)) == int(value), f"{name}.{member}"
        else:
            assert int(mine) == int(theirs), name
            assert getattr(zmq, name) is mine, name


def test_flat_names_are_the_enum_members():
    assert zmq.PUSH is zmq.SocketType.PUSH
    assert zmq.constants.SUBSCRIBE is zmq.SocketOption.SUBSCRIBE
    assert zmq.RECONNECT_STOP_AFTER_DISCONNECT is zmq.constants.ReconnectStop.AFTER_DISCONNECT
    assert zmq.NOTIFY_CONNECT is zmq.constants.RouterNotify.CONNECT
    assert zmq.NORM_CC is zmq.constants.NormMode.CC
    assert zmq.QUEUE is zmq.constants.DeviceType.QUEUE
    assert zmq.EVENT_CONNECTED is zmq.Event.CONNECTED
    assert zmq.PROTOCOL_ERROR_ZAP_BAD_VERSION is zmq.Event.PROTOCOL_ERROR_ZAP_BAD_VERSION
    assert zmq.IDENTITY is zmq.ROUTING_ID
    assert zmq.BLOCKY is zmq.SocketOption.BLOCKY  # pyzmq's choice where two enums meet


def test_socket_option_value_types_are_pyzmqs():
    for name, theirs in reference.SocketOption.__members__.items():
        assert getattr(zmq.SocketOption, name)._opt_type.name == theirs._opt_type.name, name


def test_every_event_repr_names_the_event():
    for name in reference.Event.__members__:
        assert name in repr(getattr(zmq.Event, name))


def test_has_ipc():
    assert zmq.has("ipc")
    assert not zmq.has("something weird")


def test_ipc_path_max_len_is_sun_path_less_one():
    assert zmq.IPC_PATH_MAX_LEN == 107  # Linux: sizeof(sockaddr_un.sun_path) - 1


@pytest.mark.parametrize("how", ["bind", "connect"])
def test_an_ipc_path_too_long_is_refused_naming_the_limit(make, how):
    """At bind and, as libzmq, at connect (where it was taken, each attempt then failing)."""
    with pytest.raises(zmq.ZMQError) as info:
        getattr(make(zmq.PUB), how)("ipc://" + "a" * (zmq.IPC_PATH_MAX_LEN + 1))
    assert info.value.errno == errno.ENAMETOOLONG
    assert str(zmq.IPC_PATH_MAX_LEN) in info.value.strerror


@pytest.mark.parametrize(
    "args", [(), (errno.EAGAIN,), (errno.EINVAL, "bad"), ("just a text",)], ids=repr
)
def test_an_error_keeps_the_arguments_it_was_made_with_as_pyzmqs(args):
    """``args`` are what the error was made with (``ZMQError(EAGAIN).args == (EAGAIN,)``:
    code reads ``e.args[0]``; brokerless kept only the text), and one made with nothing has
    libzmq's errno, 0, "Success" (it had None and an empty text)."""
    mine, theirs = zmq.ZMQError(*args), reference.ZMQError(*args)
    assert mine.args == theirs.args
    if args:
        assert (mine.errno, str(mine)) == (theirs.errno, str(theirs))
    else:  # pyzmq's reads libzmq's errno as left by this process's last call: 0 in a fresh one
        assert (mine.errno, str(mine)) == (0, "Success")


def test_zmqerror_zero_is_success():
    assert str(zmq.ZMQError(0)) == "Success" == zmq.strerror(0)


# -- options as attributes -------------------------------------------------------------------


def test_every_option_name_is_an_attribute_in_both_cases(make):
    sock = make(zmq.DEALER)
    sock.sndhwm = 7
    assert sock.SNDHWM == 7 == sock.getsockopt(zmq.SNDHWM)
    sock.LINGER = 3
    assert sock.linger == 3
    assert {"IDENTITY", "AFFINITY", "FD", "send"} <= set(dir(sock))


def test_subscribe_can_be_assigned(make):
    pub, sub = make(zmq.PUB), make(zmq.SUB)
    sub.connect(bind(pub, "inproc://assign-subscribe"))
    sub.subscribe = "b"  # pyzmq's other spelling of sub.subscribe("b")
    for _ in range(50):  # until the subscription has reached the PUB
        pub.send(b"a-skipped")
        pub.send(b"b-wanted")
        if sub.poll(100):
            break
    assert sub.recv() == b"b-wanted"


def test_context_options_are_attributes(ctx):
    ctx.max_sockets = 100
    assert ctx.max_sockets == 100 == ctx.get(zmq.MAX_SOCKETS)
    assert ctx.get(zmq.IO_THREADS) == ctx.IO_THREADS
    assert "IO_THREADS" in dir(ctx)


def test_context_socket_option_attributes_are_defaults_for_new_sockets(ctx):
    ctx.linger = 5
    with ctx.socket(zmq.REQ) as sock:
        assert sock.linger == 5
    ctx.subscribe = b""  # skipped where it does not apply (REQ)
    ctx.socket(zmq.REQ).close()
    del ctx.linger
    with ctx.socket(zmq.REQ) as sock:
        assert sock.linger == -1


def test_unicode_option_spellings(make):
    sock = make(zmq.SUB)
    sock.setsockopt_unicode(zmq.IDENTITY, "tést", "utf16")
    assert sock.getsockopt_unicode(zmq.IDENTITY, "utf16") == "tést"
    with pytest.raises(TypeError):
        sock.getsockopt_unicode(zmq.AFFINITY)


def test_hwm_methods_set_both_and_read_sndhwm(make):
    sock = make(zmq.DEALER)
    sock.set_hwm(11)
    assert (sock.sndhwm, sock.rcvhwm, sock.get_hwm(), sock.hwm) == (11, 11, 11, 11)


def test_an_unknown_option_number_is_einval_for_an_int_and_type_error_for_bytes(make):
    sock = make(zmq.PUB)
    with pytest.raises(zmq.ZMQError) as info:
        sock.setsockopt(9999, 5)
    assert info.value.errno == zmq.EINVAL
    with pytest.raises(TypeError):
        sock.setsockopt(9999, b"5")


def test_options_of_features_left_out_are_einval_both_ways(make):
    sock = make(zmq.ROUTER)
    for name in ["GSSAPI_SERVER", "VMCI_CONNECT_TIMEOUT", "NORM_MODE", "ROUTER_NOTIFY", "HWM"]:
        option = getattr(zmq, name)
        for args in [(option,), (option, 1)]:
            with pytest.raises(zmq.ZMQError) as info:
                (sock.getsockopt if len(args) == 1 else sock.setsockopt)(*args)
            assert info.value.errno == zmq.EINVAL, name


@pytest.mark.beyond_libzmq
def test_the_einval_for_a_left_out_feature_says_what_is_missing(make):
    with pytest.raises(zmq.ZMQError, match="GSSAPI"):
        make(zmq.ROUTER).setsockopt(zmq.GSSAPI_SERVER, 1)


@pytest.mark.parametrize(("name", "default"), [("USE_FD", -1), ("SOCKS_PROXY", b"")])
def test_options_brokerless_does_not_honour_read_back_their_default(make, name, default):
    assert make(zmq.DEALER).getsockopt(getattr(zmq, name)) == default


@pytest.mark.beyond_libzmq
@pytest.mark.parametrize(
    ("name", "value", "says"),
    [("SOCKS_PROXY", b"127.0.0.1:1080", "SOCKS5"), ("USE_FD", 3, "file descriptor")],
)
def test_a_value_brokerless_cannot_honour_is_refused_saying_so(make, name, value, says):
    """libzmq acts on these; brokerless would only store them, so it refuses instead."""
    with pytest.raises(zmq.ZMQError, match=says) as info:
        make(zmq.DEALER).setsockopt(getattr(zmq, name), value)
    assert info.value.errno == zmq.EINVAL


# -- endpoints -------------------------------------------------------------------------------


def test_an_endpoint_error_names_the_endpoint(make):
    sock = make(zmq.PUSH)
    for verb, url in [("bind", "tcp://1.2.3.4.5:1234567"), ("connect", "noproc://no/such/file")]:
        with pytest.raises(zmq.ZMQError) as info:
            getattr(sock, verb)(url)
        assert url in str(info.value)


def test_bind_and_connect_return_context_managers_that_say_what_they_undo(make):
    a, b = make(zmq.PUSH), make(zmq.PULL)
    bound = a.bind("inproc://cm-repr")
    connected = b.connect("inproc://cm-repr")
    assert "bind='inproc://cm-repr'" in repr(bound)
    assert "connect='inproc://cm-repr'" in repr(connected)


def test_recv_into_a_non_contiguous_buffer_is_a_buffer_error(make):
    with pytest.raises(BufferError):
        make(zmq.PULL).recv_into(memoryview(bytearray(10))[::2], flags=zmq.DONTWAIT)


# -- subclassing, shadows and copies ---------------------------------------------------------


class _TaggedSocket(zmq.Socket):
    tag = None

    def __init__(self, *args, **kwargs):
        self.tag = kwargs.pop("tag", None)
        super().__init__(*args, **kwargs)


class _TaggedContext(zmq.Context):
    _socket_class = _TaggedSocket


def test_socket_keyword_arguments_go_to_the_socket_class():
    with _TaggedContext() as ctx, ctx.socket(zmq.DEALER, tag="mine") as sock:
        assert isinstance(sock, _TaggedSocket)
        assert sock.tag == "mine"


def test_context_and_socket_are_generic():
    assert zmq.Context[zmq.Socket] is not None
    assert zmq.Socket[bytes] is not None
    assert zmq.SyncContext is not None and zmq.SyncSocket is not None


def test_socket_shadow_is_the_same_socket(make):
    pull = make(zmq.PULL)
    shadow = zmq.Socket.shadow(pull.underlying)
    assert shadow.underlying == pull.underlying
    assert zmq.Socket(pull).underlying == pull.underlying
    assert zmq.Socket.shadow(pull).context is pull.context
    push = make(zmq.PUSH)
    shadow.bind("inproc://through-a-shadow")
    push.connect("inproc://through-a-shadow")
    push.send(b"hi")
    assert recv_within(pull) == b"hi"
    del shadow
    gc.collect()
    assert not pull.closed  # dropping a shadow closes nothing


def test_context_shadow_is_the_same_context(ctx):
    shadow = zmq.Context.shadow(ctx.underlying)
    assert shadow.underlying == ctx.underlying
    with shadow.socket(zmq.PUB) as sock:
        assert not sock.closed
    del shadow
    gc.collect()
    assert not ctx.closed
    assert zmq.Context(ctx).underlying == ctx.underlying


def test_a_copy_is_a_shadow(ctx, make):
    sock = make(zmq.PUB)
    for original in (ctx, sock):
        for duplicate in (copy.copy(original), copy.deepcopy(original)):
            assert duplicate._shadow
            assert duplicate.underlying == original.underlying


@pytest.mark.beyond_libzmq
def test_shadowing_an_address_that_is_no_brokerless_socket_is_efault():
    """With libzmq this would be a pointer (and a wrong one, a crash): here it is refused."""
    with pytest.raises(zmq.ZMQError) as info:
        zmq.Socket.shadow(12345)
    assert info.value.errno == zmq.EFAULT


# -- reprs and warnings ----------------------------------------------------------------------


def test_socket_repr_is_pyzmqs(ctx):
    sock = ctx.socket(zmq.PUSH)
    assert "zmq.Socket(zmq.PUSH)" in repr(sock) and "closed" not in repr(sock)
    sock.close()
    assert "zmq.Socket(zmq.PUSH)" in repr(sock) and "closed" in repr(sock)


@pytest.mark.beyond_libzmq
def test_socket_repr_keeps_its_live_state(make):
    sock = make(zmq.PUSH)
    sock.bind("inproc://live-repr")
    assert repr(sock).startswith("<zmq.Socket(zmq.PUSH) at 0x")
    assert repr(sock).endswith(" bound inproc://live-repr, 0 peers, 0 queued>")


def test_context_repr_is_pyzmqs():
    with zmq.Context() as ctx:
        assert "zmq.Context()" in repr(ctx)
        with ctx.socket(zmq.PUSH):
            assert "zmq.Context(1 socket)" in repr(ctx)
    assert "closed" in repr(ctx)


def test_leaving_a_context_with_a_socket_open_warns():
    with pytest.warns(ResourceWarning), zmq.Context() as ctx:
        sock = ctx.socket(zmq.PUSH)
    assert sock.closed and ctx.closed


@pytest.mark.parametrize("module", [zmq, reference], ids=["brokerless", "pyzmq"])
def test_a_socket_dropped_open_is_closed_with_pyzmqs_resource_warning(module):
    """Worded as pyzmq words it, so that filters written for pyzmq's
    (``ignore:Unclosed socket:ResourceWarning``) match (brokerless's were lower-case)."""
    ctx = module.Context()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ctx.socket(module.PUSH)
        gc.collect()
    ctx.destroy()
    texts = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert any(text.startswith("Unclosed socket") for text in texts), texts


@pytest.mark.parametrize("module", [zmq, reference], ids=["brokerless", "pyzmq"])
def test_a_closed_socket_keeps_its_type_and_refuses_its_descriptor_as_pyzmqs(module):
    """After ``close``: ``sock.type`` still answers (cleanup and logging code reads it; it
    raised ENOTSOCK), ``fileno()`` is ENOTSOCK (it gave -1); ``close(linger="x")`` is a
    TypeError that leaves the socket open (it closed it)."""
    ctx = module.Context()
    try:
        sock = ctx.socket(module.DEALER)
        with pytest.raises(TypeError):
            sock.close(linger="x")
        assert not sock.closed
        sock.close()
        assert sock.type == module.DEALER
        with pytest.raises(module.ZMQError) as refused:
            sock.fileno()
        assert refused.value.errno == module.ENOTSOCK
    finally:
        ctx.destroy(linger=0)


# -- frames and trackers ---------------------------------------------------------------------


def test_a_frame_of_what_is_not_a_buffer_is_refused_at_once():
    for bad in [5, object(), "str"]:
        with pytest.raises(TypeError):
            zmq.Frame(bad)


def test_frames_compare_and_hash_by_identity_as_pyzmqs():
    """pyzmq's Frame has no ``__eq__``: a frame equals itself only, and hashes, so frames serve
    as dict keys and set members (brokerless's compared contents and was unhashable)."""
    for module in (zmq, reference):
        a, b = module.Frame(b"same"), module.Frame(b"same")
        assert (a == a, a == b, a == b"same") == (True, False, False)
        assert {a: 1, b: 2}[a] == 1 and len({a, b}) == 2


@pytest.mark.parametrize("module", [zmq, reference], ids=["brokerless", "pyzmq"])
def test_trackers_of_what_was_copied_are_done_at_once_as_pyzmqs(module):
    """A tracked frame small enough to be copied holds nothing of the caller's: pyzmq's tracker
    is done at once, and ``wait()`` returns (brokerless's waited for the frame to be collected:
    a wait without timeout hung).  An empty ``MessageTracker()`` is done too (it waited for
    ever); a frame received with ``track=True`` has a tracker (it had None)."""
    ctx = module.Context()
    try:
        push, pull = ctx.socket(module.PUSH), ctx.socket(module.PULL)
        push.bind("inproc://trackers")
        pull.connect("inproc://trackers")
        frame = module.Frame(b"small", track=True)
        tracker = push.send(frame)
        assert tracker.done and frame.tracker.done
        tracker.wait(1)
        assert module.MessageTracker().done
        module.MessageTracker().wait(1)
        push.send(b"tracked on arrival")
        received = [pull.recv(), pull.recv(copy=False, track=True)]
        assert isinstance(received[1].tracker, module.MessageTracker)
        big = module.Frame(b"x" * 100_000, track=True)  # shared, not copied: tracked
        assert not push.send(big).done
    finally:
        ctx.destroy(linger=0)


def test_a_frame_of_a_non_contiguous_buffer_is_a_buffer_error():
    with pytest.raises(BufferError):
        zmq.Frame(memoryview(bytearray(10))[::2])


@pytest.mark.parametrize(
    ("size", "shown"),
    [(0, "b''"), (9, "b'xxxxxxxxx'"), (20, "b'xxxxxxxxxxxx'...20B"), (2000, "...2kB")],
)
def test_frame_repr_is_pyzmqs(size, shown):
    assert shown in repr(zmq.Frame(b"x" * size))
    assert repr(zmq.Frame(b"x" * size)).startswith("<zmq.Frame(")


def test_a_frame_copies_a_small_buffer_and_keeps_a_large_one():
    """pyzmq's default (``copy=None``): fewer bytes than COPY_THRESHOLD are copied, so the
    buffer changed afterwards leaves the frame as it was; a larger one is zero-copy."""
    small, large = bytearray(b"hello"), bytearray(zmq.COPY_THRESHOLD)
    small_frame, large_frame = zmq.Frame(small), zmq.Frame(large)
    small[0], large[0] = ord("j"), 1
    assert small_frame.bytes == b"hello"
    assert large_frame.buffer[0] == 1
    shared = zmq.Frame(small, copy=False)
    small[0] = ord("y")
    assert shared.bytes == b"yello"
    copied = zmq.Frame(large, copy_threshold=len(large) + 1)
    large[0] = 2
    assert copied.buffer[0] == 1


def test_a_frame_of_none_is_empty():
    assert zmq.Frame(None).bytes == b""


@pytest.mark.parametrize("multipart", [False, True])
def test_a_small_buffer_sent_without_copy_is_copied_anyway(make, multipart):
    """``copy=False`` below the socket's copy_threshold copies, as pyzmq does: a buffer the
    sender reuses at once (a recv_into buffer, say) must not change what is delivered."""
    a, b = make(zmq.PAIR), make(zmq.PAIR)
    b.connect(bind(a, "inproc://small-copy-false"))
    buf = bytearray(b"hello")
    if multipart:
        a.send_multipart([b"head", buf], copy=False)
    else:
        a.send(buf, copy=False)
    buf[0] = ord("j")
    received = recv_within(b, multipart=True)
    assert received[-1] == b"hello"


def test_frame_buffer_is_made_once():
    frame = zmq.Frame(b"abc")
    assert frame.buffer is frame.buffer


def test_a_tracked_frame_is_done_when_it_is_gone():
    frame = zmq.Frame(b"asdf", copy=False, track=True)
    tracker = zmq.MessageTracker(frame)
    assert not tracker.done
    del frame
    gc.collect()
    tracker.wait(5)
    assert tracker.done


def test_an_untracked_frame_cannot_be_tracked(make):
    frame = zmq.Frame(b"asdf")
    with pytest.raises(ValueError):
        zmq.MessageTracker(frame)
    with pytest.raises(ValueError):
        make(zmq.PAIR).send(frame, copy=False, track=True, flags=zmq.DONTWAIT)


def test_sending_a_tracked_frame_returns_its_tracker_done_when_all_copies_are(make):
    push, pull = make(zmq.PUSH), make(zmq.PULL)
    pull.connect(bind(push, "inproc://tracked-frame"))
    frame = zmq.Frame(b"again", copy=False, track=True)
    first, second = push.send(frame, copy=False), push.send(frame, copy=False)
    assert first is second is frame.tracker
    assert recv_within(pull) == recv_within(pull) == b"again"
    gc.collect()
    assert not first.done  # the frame itself still holds the message
    del frame
    gc.collect()
    first.wait(5)


def test_a_small_tracked_send_is_copied_and_done_at_once(make):
    push, pull = make(zmq.PUSH), make(zmq.PULL)
    pull.connect(bind(push, "inproc://small-tracked"))
    tracker = push.send(b"small", copy=False, track=True)
    assert tracker is zmq._FINISHED_TRACKER and tracker.done


def test_a_tracked_send_above_copy_threshold_is_done_once_delivered(make):
    push, pull = make(zmq.PUSH), make(zmq.PULL)
    pull.connect(bind(push, "inproc://copy-threshold"))
    push.copy_threshold = 0
    tracker = push.send_multipart([b"something", b"else"], copy=False, track=True)
    assert isinstance(tracker, zmq.MessageTracker)
    assert recv_within(pull, multipart=True) == [b"something", b"else"]
    gc.collect()
    tracker.wait(5)


def test_get_monitor_socket_gives_the_same_socket_until_disabled(make):
    sock = make(zmq.PULL)
    monitor = sock.get_monitor_socket()
    assert sock.get_monitor_socket() is monitor
    sock.disable_monitor()
    monitor.close(linger=0)


@pytest.mark.parametrize("secret", [b"~" * 40, b"short"], ids=["not-z85", "too-short"])
def test_curve_public_of_a_bad_secret_key_fails_as_pyzmqs(secret):
    """A secret key that is not Z85 is libzmq's EINVAL (a ZMQError; brokerless raised its
    Z85Error, which ``except zmq.ZMQError`` misses); one of the wrong length, ValueError."""
    failures = []
    for module in (zmq, reference):
        try:
            module.curve_public(secret)
        except module.ZMQError as exc:
            failures.append(("ZMQError", exc.errno))
        except ValueError:
            failures.append(("ValueError", None))
    assert failures[0] == failures[1] and len(failures) == 2
