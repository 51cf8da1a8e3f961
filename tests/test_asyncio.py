"""brokerless.asyncio (pyzmq's zmq.asyncio): sockets whose send/recv/poll return futures.

Every coroutine test runs on asyncio's default loop and on uvloop, bounded as a whole (see
conftest); waits the test expects to end are bounded again with ``asyncio.wait_for``.
"""

from __future__ import annotations

import asyncio
import os
import threading
import warnings

import pytest
import zmq as libzmq  # the pyzmq peer
import zmq.asyncio as libzmq_asyncio

import brokerless as zmq
import brokerless.asyncio as zaio
from brokerless.utils.monitor import recv_monitor_message
from tests.helpers import bind, connect

WAIT = 5.0  # seconds for something the test expects to happen


async def within(awaitable, timeout: float = WAIT):
    return await asyncio.wait_for(awaitable, timeout)


@pytest.fixture
def actx():
    context = zaio.Context()
    yield context
    context.destroy(linger=0)


@pytest.fixture
def amake(actx):
    """Async socket factory: options by name, linger 0 (closed with the context)."""

    def factory(kind, **options):
        sock = actx.socket(kind)
        sock.linger = 0
        for name, value in options.items():
            sock.setsockopt(getattr(zmq, name), value)
        return sock

    return factory


def connected(make, endpoint, binder_type: int, connecter_type: int) -> tuple:
    """Two sync sockets connected over ``endpoint`` (handshake done), as async sockets."""
    binder, connecter = make(binder_type, bounded=False), make(connecter_type, bounded=False)
    connect(connecter, bind(binder, endpoint()), binder)
    return zaio.Socket.from_socket(binder), zaio.Socket.from_socket(connecter)


@pytest.fixture
def push_pull(make, endpoint):
    return connected(make, endpoint, zmq.PUSH, zmq.PULL)


@pytest.fixture
def inproc_push_pull(amake):
    push, pull = amake(zmq.PUSH), amake(zmq.PULL)
    addr = f"inproc://aio-{id(push):x}"
    push.bind(addr)
    pull.connect(addr)
    return push, pull


# -- the classes --------------------------------------------------------------------------------


def test_sockets_of_an_asyncio_context_are_asyncio_sockets(actx) -> None:
    with actx.socket(zmq.PUSH) as sock:
        assert isinstance(sock, zaio.Socket)
        assert isinstance(sock, zmq.Socket)  # usable wherever a socket is
        assert sock.context is actx


def test_the_asyncio_instance_is_its_own(actx) -> None:
    actx_instance = zaio.Context.instance()
    ctx_instance = zmq.Context.instance()
    try:
        assert type(actx_instance) is zaio.Context
        assert type(ctx_instance) is zmq.Context
        assert zaio.Context.instance() is actx_instance
    finally:
        actx_instance.term()
        ctx_instance.term()


def test_reprs_are_pyzmqs(actx) -> None:
    assert repr(actx).startswith("<zmq.asyncio.Context() at 0x")
    sock = actx.socket(zmq.PUSH)
    assert repr(sock).startswith(f"<zmq.asyncio.Socket(zmq.PUSH) at {id(sock):#x}")
    assert repr(actx).startswith("<zmq.asyncio.Context(1 socket) at 0x")
    sock.close()
    assert repr(sock).endswith(" closed>")


def test_install_and_zmqeventloop_are_deprecated() -> None:
    with pytest.warns(DeprecationWarning):
        zaio.install()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        loop = zaio.ZMQEventLoop()
    try:
        assert isinstance(loop, asyncio.SelectorEventLoop)
    finally:
        loop.close()


# -- receiving ----------------------------------------------------------------------------------


async def test_recv_waits_for_the_message(push_pull) -> None:
    push, pull = push_pull
    f = pull.recv_multipart()
    assert not f.done()
    await within(push.send_multipart([b"hi", b"there"]))
    assert await within(f) == [b"hi", b"there"]


async def test_recv_of_parts_resolves_part_by_part(push_pull) -> None:
    push, pull = push_pull
    first, rest = pull.recv(), pull.recv_multipart()
    await within(push.send_multipart([b"a", b"b", b"c"]))
    assert await within(first) == b"a"
    assert await within(rest) == [b"b", b"c"]


async def test_a_cancelled_recv_loses_no_message(push_pull) -> None:
    push, pull = push_pull
    cancelled = pull.recv()
    cancelled.cancel()
    await asyncio.sleep(0)  # let the cancellation run its callbacks
    await within(push.send(b"kept"))
    assert await within(pull.recv()) == b"kept"
    assert cancelled.cancelled()


@pytest.mark.parametrize("kind", ["recv_string", "recv_json", "recv_pyobj", "recv_multipart"])
async def test_a_cancelled_deserializing_recv_loses_no_message(inproc_push_pull, kind) -> None:
    push, pull = inproc_push_pull
    cancelled = getattr(pull, kind)()
    await asyncio.sleep(0)
    cancelled.cancel()
    await asyncio.sleep(0)
    await within(push.send_pyobj({"n": 1}) if kind == "recv_pyobj" else push.send(b'"kept"'))
    expected = {
        "recv_string": '"kept"',
        "recv_json": "kept",
        "recv_pyobj": {"n": 1},
        "recv_multipart": [b'"kept"'],
    }[kind]
    assert await within(getattr(pull, kind)()) == expected


async def test_a_recv_cancelled_by_a_timeout_loses_no_message(push_pull) -> None:
    push, pull = push_pull
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(pull.recv(), 0.05)
    await within(push.send(b"after"))
    assert await within(pull.recv()) == b"after"


async def test_concurrent_recvs_are_resolved_in_call_order(inproc_push_pull) -> None:
    push, pull = inproc_push_pull
    futures = [pull.recv() for _ in range(200)]
    for i in range(200):
        await within(push.send(b"%d" % i))
    assert await within(asyncio.gather(*futures)) == [b"%d" % i for i in range(200)]


async def test_tasks_waiting_together_share_the_stream_in_order_even_when_some_cancel(
    push_pull,
) -> None:
    push, pull = push_pull
    tasks = [asyncio.ensure_future(pull.recv()) for _ in range(100)]
    await asyncio.sleep(0)  # every task is now waiting in recv
    for task in tasks[::3]:
        task.cancel()
    live = [t for i, t in enumerate(tasks) if i % 3]
    for i in range(len(live)):
        await within(push.send(b"%d" % i))
    assert await within(asyncio.gather(*live)) == [b"%d" % i for i in range(len(live))]


async def test_a_message_that_is_there_resolves_recv_at_once(inproc_push_pull) -> None:
    push, pull = inproc_push_pull
    await within(push.send(b"ready"))
    assert await within(pull.poll(WAIT * 1000)) == zmq.POLLIN
    f = pull.recv(zmq.NOBLOCK)
    assert f.done()
    assert f.result() == b"ready"


async def test_recv_noblock_with_nothing_there_raises_again(push_pull) -> None:
    _, pull = push_pull
    with pytest.raises(zmq.Again):
        await within(pull.recv(zmq.NOBLOCK))


@pytest.mark.parametrize("implementation", ["brokerless", "pyzmq"])
async def test_a_noblock_send_waits_behind_the_sends_queued_before_it(implementation) -> None:
    """As pyzmq's: a NOBLOCK send made while sends are queued joins the queue, so messages go
    in the order sent.  brokerless sent it at once, ahead of them, and the queued send then
    never completed (that send had taken the descriptor's signal)."""
    lib, aio = (zmq, zaio) if implementation == "brokerless" else (libzmq, libzmq_asyncio)
    ctx = aio.Context()
    try:
        push, pull = ctx.socket(lib.PUSH), ctx.socket(lib.PULL)
        push.sndhwm, pull.rcvhwm = 1, 1
        push.bind("inproc://noblock-order")
        pull.connect("inproc://noblock-order")
        filled = []
        while True:  # full: the next send would block
            try:
                push.send(b"fill%d" % len(filled), lib.NOBLOCK).result()
            except lib.Again:
                break
            filled.append(b"fill%d" % len(filled))
        queued = push.send(b"A")
        first = pull.recv(lib.NOBLOCK).result()  # room, taken without letting the loop run
        noblock = push.send(b"B", lib.NOBLOCK)
        assert not noblock.done()  # behind A
        got = [first] + [await within(pull.recv()) for _ in range(len(filled) + 1)]
        assert got == [*filled, b"A", b"B"]
        await within(queued)
        await within(noblock)
    finally:
        ctx.destroy(linger=0)


@pytest.mark.beyond_pyzmq  # pyzmq's waiting receive stalls: the NOBLOCK one took the signal
async def test_a_noblock_recv_taken_ahead_of_a_waiting_one_leaves_it_served(actx) -> None:
    """A NOBLOCK receive is tried at once even while receives wait (as pyzmq's); the one that
    waits then gets the next message."""
    pull = actx.socket(zmq.PULL)
    pull.bind("inproc://noblock-recv")
    waiting = pull.recv()
    await asyncio.sleep(0)  # (the loop watches the socket for it)
    push = zmq.Context.shadow(actx.underlying).socket(zmq.PUSH)  # a sync sender: no yield
    push.connect("inproc://noblock-recv")
    push.send(b"one")
    push.send(b"two")
    assert pull.recv(zmq.NOBLOCK).result() == b"one"
    assert await within(waiting) == b"two"
    push.close(linger=0)


async def test_rcvtimeo_raises_again_through_the_future_and_costs_no_message(push_pull) -> None:
    push, pull = push_pull
    pull.rcvtimeo = 50
    timed_out = pull.recv()
    pull.rcvtimeo = -1
    waiting = pull.recv_multipart()
    with pytest.raises(zmq.Again):
        await within(timed_out)
    await within(push.send_multipart([b"a", b"b"]))
    assert await within(waiting) == [b"a", b"b"]


async def test_timed_out_recvs_do_not_pile_up(push_pull) -> None:
    _, pull = push_pull
    pull.rcvtimeo = 1
    for _ in range(20):
        with pytest.raises(zmq.Again):
            await within(pull.recv())
    assert len(pull._recv_futures) == 0


async def test_recv_copy_false_gives_frames(push_pull) -> None:
    push, pull = push_pull
    await within(push.send_multipart([b"head", b"x" * 10_000]))
    frames = await within(pull.recv_multipart(copy=False))
    assert all(isinstance(frame, zmq.Frame) for frame in frames)
    assert [frame.bytes for frame in frames] == [b"head", b"x" * 10_000]


async def test_recv_into_fills_a_buffer(push_pull) -> None:
    push, pull = push_pull
    buf = bytearray(4)
    f = pull.recv_into(buf)
    await within(push.send(b"abcdef"))
    assert await within(f) == 6  # the full size; what did not fit is cut
    assert buf == b"abcd"


async def test_a_bad_message_fails_its_own_recv_only(inproc_push_pull) -> None:
    push, pull = inproc_push_pull
    await within(push.send(b"not json"))
    await within(push.send(b'{"a": 1}'))
    with pytest.raises(ValueError):
        await within(pull.recv_json())
    assert await within(pull.recv_json()) == {"a": 1}


# -- sending ------------------------------------------------------------------------------------


async def test_send_at_the_hwm_waits_until_the_peer_reads(amake) -> None:
    push = amake(zmq.PUSH, SNDHWM=2)
    pull = amake(zmq.PULL, RCVHWM=2)
    addr = f"inproc://hwm-{id(push):x}"
    push.bind(addr)
    pull.connect(addr)
    sends = [push.send(b"%d" % i) for i in range(50)]
    await asyncio.sleep(0)
    assert not sends[-1].done()  # far past the HWM: waiting
    received = [await within(pull.recv()) for _ in range(50)]
    await within(asyncio.gather(*sends))
    assert received == [b"%d" % i for i in range(50)]


async def test_sndtimeo_raises_again_through_the_future(amake) -> None:
    push = amake(zmq.PUSH, SNDTIMEO=50)
    push.bind(f"inproc://nobody-{id(push):x}")
    with pytest.raises(zmq.Again):
        await within(push.send(b"nowhere"))


async def test_send_string_json_pyobj_and_serialized_return_futures(push_pull) -> None:
    push, pull = push_pull
    await within(push.send_string("text"))
    await within(push.send_json({"k": [1, 2]}))
    await within(push.send_pyobj((1, "two")))
    await within(push.send_serialized("a,b", lambda s: [p.encode() for p in s.split(",")]))
    assert await within(pull.recv_string()) == "text"
    assert await within(pull.recv_json()) == {"k": [1, 2]}
    assert await within(pull.recv_pyobj()) == (1, "two")
    assert await within(pull.recv_serialized(lambda parts: b"+".join(parts))) == b"a+b"


async def test_multipart_frames_round_trip(make, endpoint) -> None:
    router, dealer = connected(make, endpoint, zmq.ROUTER, zmq.DEALER)
    await within(dealer.send_multipart([b"", zmq.Frame(b"body"), memoryview(b"tail")]))
    ident, *rest = await within(router.recv_multipart())
    assert rest == [b"", b"body", b"tail"]
    await within(router.send_multipart([ident, b"reply", b"more"]))
    assert await within(dealer.recv_multipart()) == [b"reply", b"more"]


# -- the FD's edge: an operation that consumed the signal must not strand a waiting call -----


async def test_a_send_that_consumes_the_signal_does_not_strand_a_waiting_recv(amake) -> None:
    dealer, router = amake(zmq.DEALER, ROUTING_ID=b"d"), amake(zmq.ROUTER)
    addr = f"inproc://edge-{id(dealer):x}"
    router.bind(addr)
    dealer.connect(addr)
    await within(dealer.send(b"hello"))
    assert await within(router.recv_multipart()) == [b"d", b"hello"]
    waiting = dealer.recv()
    await asyncio.sleep(0)
    # The reply arrives (signalling the FD), then a send processes the socket's commands
    # before the loop ever saw the signal.
    router.send_multipart([b"d", b"reply"]).result()
    await within(dealer.send(b"again"))
    assert await within(waiting) == b"reply"


# -- polling ------------------------------------------------------------------------------------


async def test_poll_with_a_timeout(push_pull) -> None:
    push, pull = push_pull
    assert await within(pull.poll(timeout=0)) == 0
    assert await within(pull.poll(timeout=20)) == 0
    f = pull.poll(timeout=WAIT * 1000)
    assert not f.done()
    await within(push.send(b"x"))
    assert await within(f) == zmq.POLLIN
    assert await within(pull.recv()) == b"x"  # polling took nothing


async def test_a_poll_answered_at_once_gives_a_done_future(push_pull) -> None:
    """A poll the socket answers without waiting (timeout 0, or events already there) is done
    when ``poll`` returns, as on pyzmq: no loop iteration needed to read it."""
    push, pull = push_pull
    nothing = pull.poll(timeout=0)
    assert nothing.done() and nothing.result() == 0
    await within(push.send(b"x"))
    assert await within(pull.poll(timeout=WAIT * 1000)) == zmq.POLLIN
    ready = pull.poll(timeout=0)
    assert ready.done() and ready.result() == zmq.POLLIN


async def test_poller_over_async_and_sync_sockets_and_a_pipe(push_pull, make) -> None:
    push, pull = push_pull
    sync_pair = make(zmq.PAIR)
    sync_peer = make(zmq.PAIR)
    addr = f"inproc://poller-{id(sync_pair):x}"
    sync_pair.bind(addr)
    sync_peer.connect(addr)
    r, w = os.pipe()
    try:
        poller = zaio.Poller()
        poller.register(pull, zmq.POLLIN)
        poller.register(sync_pair, zmq.POLLIN)
        poller.register(r, zmq.POLLIN)
        assert await within(poller.poll(10)) == []
        f = poller.poll(WAIT * 1000)
        sync_peer.send(b"sync")
        assert await within(f) == [(sync_pair, zmq.POLLIN)]
        assert sync_pair.recv() == b"sync"
        f = poller.poll(WAIT * 1000)
        os.write(w, b"!")
        assert await within(f) == [(r, zmq.POLLIN)]
        os.read(r, 1)
        await within(push.send(b"async"))
        assert await within(poller.poll(WAIT * 1000)) == [(pull, zmq.POLLIN)]
        assert await within(pull.recv()) == b"async"
    finally:
        os.close(r)
        os.close(w)


async def test_cancelled_polls_leave_nothing_queued(push_pull) -> None:
    _, pull = push_pull
    for _ in range(10):
        f = asyncio.ensure_future(pull.poll(timeout=WAIT * 1000))
        await asyncio.sleep(0)
        f.cancel()
        await asyncio.sleep(0)
    await asyncio.sleep(0.01)
    assert len(pull._recv_futures) == 0


def _poll_forms():
    """Ways to wait on a socket's POLLIN, each returning the awaitable (pyzmq's API)."""

    def poller(*timeout):
        def poll(sock):
            p = zaio.Poller()
            p.register(sock, zmq.POLLIN)
            return p.poll(*timeout)

        return poll

    long_ms = 2 * WAIT * 1000  # outlasts ``within``: only RCVTIMEO ends the wait in time
    return {
        "poll()": lambda sock: sock.poll(),
        "poll(None)": lambda sock: sock.poll(None),
        "poll(timeout)": lambda sock: sock.poll(long_ms),
        "Poller.poll()": poller(),
        "Poller.poll(None)": poller(None),
        "Poller.poll(timeout)": poller(long_ms),
    }


@pytest.mark.parametrize("form", list(_poll_forms()))
async def test_a_poll_for_pollin_raises_again_after_rcvtimeo(push_pull, form) -> None:
    """pyzmq registers a poll as a receive, RCVTIMEO and all: ``zmq.Again`` when it passes."""
    _, pull = push_pull
    pull.rcvtimeo = 20
    with pytest.raises(zmq.Again):
        await within(_poll_forms()[form](pull))
    assert len(pull._recv_futures) == 0


async def test_the_earlier_of_the_poll_timeout_and_rcvtimeo_ends_a_poll(push_pull, make) -> None:
    push, pull = push_pull
    pull.rcvtimeo = int(WAIT * 1000)
    assert await within(pull.poll(20)) == 0  # the poll's timeout first: nothing ready
    pull.rcvtimeo = 20
    with pytest.raises(zmq.Again):
        await within(pull.poll(int(2 * WAIT * 1000)))
    pull.rcvtimeo = 0  # "do not wait": Again, unless the message is there already
    with pytest.raises(zmq.Again):
        await within(pull.poll(int(WAIT * 1000)))
    await within(push.send(b"x"))
    pull.rcvtimeo = -1
    assert await within(pull.poll(int(WAIT * 1000))) == zmq.POLLIN
    pull.rcvtimeo = 0
    assert await within(pull.poll(int(WAIT * 1000))) == zmq.POLLIN
    assert await within(pull.recv()) == b"x"
    # A sync socket in an async Poller is watched the same way.
    sync_pull = make(zmq.PULL, RCVTIMEO=20)
    sync_pull.bind(f"inproc://rcvtimeo-{id(sync_pull):x}")
    poller = zaio.Poller()
    poller.register(sync_pull, zmq.POLLIN)
    with pytest.raises(zmq.Again):
        await within(poller.poll(int(2 * WAIT * 1000)))


async def test_a_poll_for_pollout_raises_again_after_sndtimeo(amake, inproc_push_pull) -> None:
    """POLLOUT waits as a send, under SNDTIMEO; POLLIN|POLLOUT under both: the first to pass
    raises ``zmq.Again``, even when the other direction may wait for ever."""
    dealer = amake(zmq.DEALER)  # no peer: never writable, nothing to read
    dealer.sndtimeo = 20
    assert await within(dealer.poll(20)) == 0  # POLLIN only: SNDTIMEO does not apply
    with pytest.raises(zmq.Again):
        await within(dealer.poll(int(2 * WAIT * 1000), zmq.POLLOUT))
    with pytest.raises(zmq.Again):
        await within(dealer.poll(None, zmq.POLLIN | zmq.POLLOUT))
    dealer.sndtimeo, dealer.rcvtimeo = -1, 20
    assert await within(dealer.poll(20, zmq.POLLOUT)) == 0  # POLLOUT only: RCVTIMEO does not
    with pytest.raises(zmq.Again):
        await within(dealer.poll(None, zmq.POLLIN | zmq.POLLOUT))
    assert len(dealer._recv_futures) == len(dealer._send_futures) == 0
    push, _ = inproc_push_pull  # writable: SNDTIMEO never comes into it
    push.sndtimeo = int(WAIT * 1000)
    assert await within(push.poll(int(2 * WAIT * 1000), zmq.POLLOUT)) == zmq.POLLOUT
    poller = zaio.Poller()
    poller.register(push, zmq.POLLOUT)
    assert await within(poller.poll()) == [(push, zmq.POLLOUT)]
    # SNDTIMEO 0 ("do not wait"): pyzmq looks at once only for POLLIN, so a poll for POLLOUT
    # raises Again even on a writable socket.
    push.sndtimeo = 0
    with pytest.raises(zmq.Again):
        await within(push.poll(int(WAIT * 1000), zmq.POLLOUT))


async def test_a_poll_woken_by_a_message_reports_it_though_a_later_recv_takes_it(
    push_pull,
) -> None:
    """A poll resolves with the events that woke it, as pyzmq's: a recv waiting behind it may
    take the message before the poll's future is read, and a 0 would look like a timeout."""
    push, pull = push_pull
    polled = asyncio.ensure_future(pull.poll(int(2 * WAIT * 1000)))
    await asyncio.sleep(0)
    received = pull.recv()
    await within(push.send(b"m"))
    assert await within(polled) == zmq.POLLIN
    assert await within(received) == b"m"

    poller = zaio.Poller()
    poller.register(pull, zmq.POLLIN)
    polled = asyncio.ensure_future(poller.poll(int(2 * WAIT * 1000)))
    await asyncio.sleep(0)
    received = pull.recv()
    await within(push.send(b"n"))
    assert await within(polled) == [(pull, zmq.POLLIN)]
    assert await within(received) == b"n"


# -- closing ------------------------------------------------------------------------------------


async def test_closing_cancels_every_waiting_call(amake) -> None:
    dealer = amake(zmq.DEALER)
    dealer.bind(f"inproc://closing-{id(dealer):x}")
    recv = dealer.recv()
    send = dealer.send(b"no peer: waits")
    poll = dealer.poll(WAIT * 1000)
    await asyncio.sleep(0)
    assert not (recv.done() or send.done() or poll.done())
    dealer.close()
    for waiting in (recv, send, poll):
        with pytest.raises(asyncio.CancelledError):
            await within(waiting)


async def test_destroying_the_context_cancels_waiting_calls() -> None:
    ctx = zaio.Context()
    pull = ctx.socket(zmq.PULL)
    pull.bind(f"inproc://destroyed-{id(pull):x}")
    f = pull.recv()
    await asyncio.sleep(0)
    ctx.destroy(linger=0)
    with pytest.raises(asyncio.CancelledError):
        await within(f)
    assert pull.closed


# -- wrapping a sync socket and context ----------------------------------------------------------


async def test_an_async_socket_from_a_sync_one_is_the_same_socket(ctx) -> None:
    sync = ctx.socket(zmq.PULL)
    addr = f"inproc://shadowed-{id(sync):x}"
    sync.bind(addr)
    push = ctx.socket(zmq.PUSH)
    push.connect(addr)
    wrappers = (  # (shadow= takes the address too, as pyzmq's: it was a TypeError)
        zaio.Socket.from_socket(sync),
        zaio.Socket(sync),
        zaio.Socket(shadow=sync.underlying),
    )
    for async_sock in wrappers:
        assert isinstance(async_sock, zaio.Socket)
        assert async_sock.underlying == sync.underlying
        assert async_sock.type == sync.type == zmq.PULL
        async_sock.rcvhwm = 77
        assert sync.rcvhwm == 77
        f = async_sock.recv()
        push.send(b"via the wrapper")
        assert await within(f) == b"via the wrapper"
        push.send(b"via the socket")
        assert sync.recv() == b"via the socket"
    async_sock.close()
    assert sync.closed
    push.close(linger=0)


async def test_an_async_context_on_a_sync_one_shares_its_sockets(ctx) -> None:
    actx = zaio.Context(ctx)
    pull = actx.socket(zmq.PULL)
    addr = f"inproc://shared-{id(pull):x}"
    pull.bind(addr)
    push = ctx.socket(zmq.PUSH)  # the same inproc namespace: the same context
    push.connect(addr)
    push.send(b"across")
    assert isinstance(pull, zaio.Socket)
    assert await within(pull.recv()) == b"across"
    pull.close()
    push.close(linger=0)


def test_a_socket_works_under_successive_loops(inproc_push_pull) -> None:
    push, pull = inproc_push_pull

    async def exchange(payload: bytes) -> bytes:
        waiting = pull.recv()
        await push.send(payload)
        return await waiting

    for i in range(3):
        assert asyncio.run(within(exchange(b"run %d" % i))) == b"run %d" % i


# -- monitoring ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "made_by",
    # pyzmq's from_socket façade has no context to make the PAIR with (AttributeError)
    ["async context", pytest.param("from_socket", marks=pytest.mark.beyond_pyzmq)],
)
async def test_the_monitor_socket_is_one_async_socket(amake, make, made_by) -> None:
    """As pyzmq: every call gives the same async PAIR -- two façades on one socket would each
    watch its FD, and the loop keeps only the last watcher, stranding the other's recvs."""
    sock = zaio.Socket.from_socket(make(zmq.PULL)) if made_by == "from_socket" else amake(zmq.PULL)
    monitor = sock.get_monitor_socket()
    assert isinstance(monitor, zaio.Socket)
    first = recv_monitor_message(monitor)
    assert sock.get_monitor_socket() is monitor
    sock.bind_to_random_port("tcp://127.0.0.1")
    assert (await within(first))["event"] == zmq.EVENT_LISTENING
    sock.disable_monitor()
    monitor.close(linger=0)


# -- termination ---------------------------------------------------------------------------------


@pytest.mark.beyond_pyzmq  # pyzmq's asyncio leaves the futures waiting (its handler raises)
async def test_terminating_the_context_fails_waiting_calls_with_eterm() -> None:
    ctx = zaio.Context()
    pull = ctx.socket(zmq.PULL)
    pull.bind(f"inproc://term-{id(pull):x}")
    f = pull.recv()
    await asyncio.sleep(0)
    terminator = threading.Thread(target=ctx.term)
    terminator.start()
    with pytest.raises(zmq.ContextTerminated):
        await within(f)
    pull.close()
    await within(asyncio.to_thread(terminator.join, WAIT))
    assert not terminator.is_alive()


# -- with pyzmq over tcp --------------------------------------------------------------------------


async def test_request_reply_over_tcp_with_a_pyzmq_peer_both_ways(amake) -> None:
    lctx = libzmq_asyncio.Context()
    try:
        rep = amake(zmq.REP)
        port = rep.bind_to_random_port("tcp://127.0.0.1")
        lreq = lctx.socket(libzmq.REQ)
        lreq.linger = 0
        lreq.connect(f"tcp://127.0.0.1:{port}")
        lrep = lctx.socket(libzmq.REP)
        lrep.linger = 0
        lport = lrep.bind_to_random_port("tcp://127.0.0.1")
        req = amake(zmq.REQ)
        req.connect(f"tcp://127.0.0.1:{lport}")
        for i in range(20):
            await within(lreq.send_multipart([b"ping", b"%d" % i]))
            await within(rep.send_multipart(await within(rep.recv_multipart())))
            assert await within(lreq.recv_multipart()) == [b"ping", b"%d" % i]
            await within(req.send(b"pong %d" % i))
            await within(lrep.send(await within(lrep.recv())))
            assert await within(req.recv()) == b"pong %d" % i
    finally:
        lctx.destroy(linger=0)


def test_an_async_context_takes_any_socket_factory() -> None:
    """``socket_class`` may be any callable ``(context, socket_type) -> socket``, as pyzmq's
    Context.socket takes it (a factory function raised TypeError in issubclass)."""
    ctx = zaio.Context()
    made: list[zaio.Socket] = []

    def factory(context: zaio.Context, socket_type: int) -> zaio.Socket:
        made.append(zaio.Socket(context, socket_type))
        return made[-1]

    sock = ctx.socket(zmq.PUSH, socket_class=factory)
    sock.close(linger=0)
    ctx.term()
    assert made == [sock]


def test_a_sync_context_that_made_an_async_socket_terminates_once_it_is_closed() -> None:
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PULL, socket_class=zaio.Socket)
    assert isinstance(sock, zaio.Socket)
    sock.close()
    terminator = threading.Thread(target=ctx.term, daemon=True)
    terminator.start()
    terminator.join(WAIT)
    assert not terminator.is_alive(), "term() waits for a socket that was closed"
    assert sock.closed


async def test_a_receive_or_a_poll_on_a_closed_socket_fails_at_the_call(amake) -> None:
    """As pyzmq's: ``recv``/``recv_multipart`` raise ENOTSOCK and ``poll`` ENOTSUP when called
    on a closed socket (they returned failed futures, and a future not awaited then logged
    "exception was never retrieved"); a ``send``'s future fails with ENOTSOCK."""
    sock = amake(zmq.PULL)
    sock.close()
    for receive in (sock.recv, sock.recv_multipart):
        with pytest.raises(zmq.ZMQError) as refused:
            receive()
        assert refused.value.errno == zmq.ENOTSOCK
    with pytest.raises(zmq.ZMQError) as refused:
        sock.poll()
    assert refused.value.errno == zmq.ENOTSUP
    with pytest.raises(zmq.ZMQError) as refused:
        await within(sock.send(b"x"))
    assert refused.value.errno == zmq.ENOTSOCK
