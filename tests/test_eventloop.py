"""brokerless.eventloop (pyzmq's zmq.eventloop) on tornado: ZMQStream, tornado-future sockets,
and the deprecated ioloop module.

tornado's IOLoop runs on asyncio; every coroutine test runs on asyncio's default loop and on
uvloop, bounded as a whole (see conftest), and waits it expects to end are bounded again.
"""

from __future__ import annotations

import asyncio
import json
import logging
import pickle
import warnings

import pytest
import tornado.ioloop
import zmq as libzmq  # the pyzmq peer
import zmq.asyncio as libzmq_asyncio
from tornado.ioloop import IOLoop

import brokerless as zmq
import brokerless.asyncio as zaio
from brokerless.eventloop import future as zfuture
from brokerless.eventloop import zmqstream
from tests.helpers import bind, connect

WAIT = 5.0


async def within(awaitable, timeout: float = WAIT):
    return await asyncio.wait_for(awaitable, timeout)


@pytest.fixture
def push_pull(make, endpoint):
    """A connected PUSH and PULL (plain sockets; handshake done)."""
    push, pull = make(zmq.PUSH, bounded=False), make(zmq.PULL, bounded=False)
    connect(pull, bind(push, endpoint()), push)
    return push, pull


@pytest.fixture
def unbounded_inproc(make):
    """A PUSH and PULL over inproc with no HWM: a burst of any size can wait in the pipe."""
    push = make(zmq.PUSH, bounded=False, SNDHWM=0)
    pull = make(zmq.PULL, bounded=False, RCVHWM=0)
    addr = f"inproc://burst-{id(push):x}"
    push.bind(addr)
    pull.connect(addr)
    return push, pull


class Collector:
    """An on_recv callback that resolves ``done`` once ``expected`` messages came."""

    def __init__(self, expected: int) -> None:
        self.messages: list[list] = []
        self.expected = expected
        self.done = asyncio.get_running_loop().create_future()

    def __call__(self, msg: list) -> None:
        self.messages.append(msg)
        if len(self.messages) == self.expected and not self.done.done():
            self.done.set_result(None)


# -- ioloop -------------------------------------------------------------------------------------


def test_the_ioloop_module_is_tornados_and_install_is_deprecated() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from brokerless.eventloop import ioloop
    assert ioloop.IOLoop is tornado.ioloop.IOLoop
    assert ioloop.ZMQIOLoop is ioloop.IOLoop
    with pytest.warns(DeprecationWarning):
        ioloop.install()


# -- ZMQStream: receiving ------------------------------------------------------------------------


async def test_on_recv_delivers_every_message_in_order(push_pull) -> None:
    push, pull = push_pull
    stream = zmqstream.ZMQStream(pull)
    collect = Collector(20)
    stream.on_recv(collect)
    for i in range(20):
        push.send_multipart([b"%d" % i, b"body"])
    await within(collect.done)
    assert collect.messages == [[b"%d" % i, b"body"] for i in range(20)]
    stream.close()


async def test_on_recv_with_copy_false_gives_frames(push_pull) -> None:
    push, pull = push_pull
    stream = zmqstream.ZMQStream(pull)
    collect = Collector(1)
    stream.on_recv(collect, copy=False)
    push.send_multipart([b"head", b"x" * 100_000])
    await within(collect.done)
    (msg,) = collect.messages
    assert all(isinstance(frame, zmq.Frame) for frame in msg)
    assert [frame.bytes for frame in msg] == [b"head", b"x" * 100_000]
    stream.close()


async def test_on_recv_stream_passes_the_stream(push_pull) -> None:
    push, pull = push_pull
    stream = zmqstream.ZMQStream(pull)
    got = asyncio.get_running_loop().create_future()
    stream.on_recv_stream(lambda s, msg: got.done() or got.set_result((s, msg)))
    push.send(b"hi")
    assert await within(got) == (stream, [b"hi"])
    stream.close()


async def test_a_burst_is_delivered_in_order_without_starving_the_loop(unbounded_inproc) -> None:
    push, pull = unbounded_inproc
    count = 2000
    for i in range(count):
        push.send(b"%d" % i)
    stream = zmqstream.ZMQStream(pull)
    collect = Collector(count)
    loop = IOLoop.current()
    ticks = 0

    def tick() -> None:  # another client of the loop: it runs once per loop iteration
        nonlocal ticks
        ticks += 1
        if not collect.done.done():
            loop.add_callback(tick)

    stream.on_recv(collect)
    loop.add_callback(tick)
    await within(collect.done)
    assert [int(m[0]) for m in collect.messages] == list(range(count))
    assert ticks >= count // 2  # the loop went round between deliveries
    stream.close()


async def test_a_coroutine_callback_is_run(push_pull) -> None:
    push, pull = push_pull
    stream = zmqstream.ZMQStream(pull)
    got = asyncio.get_running_loop().create_future()

    async def on_message(msg: list) -> None:
        await asyncio.sleep(0)
        got.set_result(msg)

    stream.on_recv(on_message)
    push.send(b"async")
    assert await within(got) == [b"async"]
    stream.close()


@pytest.mark.beyond_pyzmq  # pyzmq's stream stalls until another message arrives
async def test_a_failing_callback_is_logged_and_the_stream_goes_on(push_pull, caplog) -> None:
    push, pull = push_pull
    stream = zmqstream.ZMQStream(pull)
    collect = Collector(2)

    def on_message(msg: list) -> None:
        collect(msg)
        if msg == [b"bad"]:
            raise RuntimeError("callback failed")

    stream.on_recv(on_message)
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: None)
    with caplog.at_level(logging.ERROR):
        push.send(b"bad")
        push.send(b"good")
        await within(collect.done)
    assert collect.messages == [[b"bad"], [b"good"]]
    assert "Uncaught exception in ZMQStream callback" in caplog.text
    stream.close()


async def test_stop_on_recv_leaves_messages_in_the_socket(push_pull) -> None:
    push, pull = push_pull
    stream = zmqstream.ZMQStream(pull)
    stream.on_recv(lambda msg: pytest.fail(f"received {msg} after stop_on_recv"))
    stream.stop_on_recv()
    assert not stream.receiving()
    push.send(b"stays")
    assert pull.poll(WAIT * 1000) == zmq.POLLIN
    for _ in range(20):  # let the loop handle whatever the stream would
        await asyncio.sleep(0)
    assert pull.recv(zmq.NOBLOCK) == b"stays"
    stream.close()


async def test_flush_handles_what_is_pending_now(unbounded_inproc) -> None:
    push, pull = unbounded_inproc
    for i in range(5):
        push.send(b"%d" % i)
    stream = zmqstream.ZMQStream(pull)
    got: list[list] = []
    stream.on_recv(got.append)
    assert stream.flush(limit=2) == 2
    assert got == [[b"0"], [b"1"]]
    assert stream.flush() == 3
    assert got == [[b"%d" % i] for i in range(5)]
    assert stream.flush() == 0
    stream.close()


# -- ZMQStream: sending ------------------------------------------------------------------------


async def test_send_calls_on_send_with_the_message_and_status(push_pull) -> None:
    push, pull = push_pull
    stream = zmqstream.ZMQStream(push)
    sent = asyncio.get_running_loop().create_future()
    stream.on_send(lambda msg, status: sent.set_result((msg, status)))
    stream.send_multipart([b"a", b"b"])
    assert stream.sending()
    assert await within(sent) == ([b"a", b"b"], None)
    assert pull.recv_multipart() == [b"a", b"b"]
    stream.close()


async def test_sends_past_the_hwm_all_arrive_in_order(make) -> None:
    push = make(zmq.PUSH, bounded=False, SNDHWM=1)
    pull = make(zmq.PULL, bounded=False, RCVHWM=1)
    addr = f"inproc://stream-hwm-{id(push):x}"
    push.bind(addr)
    pull.connect(addr)
    sender = zmqstream.ZMQStream(push)
    receiver = zmqstream.ZMQStream(pull)
    collect = Collector(200)
    receiver.on_recv(collect)
    for i in range(100):
        sender.send(b"%d" % i)
        sender.send_string(str(100 + i))
    await within(collect.done)
    assert [int(m[0]) for m in collect.messages] == [n for i in range(100) for n in (i, 100 + i)]
    assert not sender.sending()
    sender.close()
    receiver.close()


async def test_send_json_and_pyobj_serialize_at_once(push_pull) -> None:
    push, pull = push_pull
    stream = zmqstream.ZMQStream(push)
    sent = Collector(2)
    stream.on_send(lambda msg, status: sent(msg))
    obj = {"a": [1]}
    stream.send_json(obj)
    stream.send_pyobj(("t", 2))
    obj["a"].append("changed later")  # queued messages were serialized when queued
    await within(sent.done)
    assert json.loads(pull.recv()) == {"a": [1]}
    assert pickle.loads(pull.recv()) == ("t", 2)
    stream.close()


# -- ZMQStream: lifecycle ------------------------------------------------------------------------


async def test_close_closes_the_socket_and_calls_the_close_callback(push_pull) -> None:
    _, pull = push_pull
    stream = zmqstream.ZMQStream(pull)
    closed = []
    stream.set_close_callback(lambda: closed.append(True))
    stream.close()
    assert pull.closed
    assert stream.closed()
    assert closed == [True]
    with pytest.raises(OSError):
        stream.on_recv(print)


async def test_closing_a_stream_after_its_socket_warns_in_pyzmqs_words(push_pull) -> None:
    """The warning names the FD "after closing socket", as pyzmq's does (its suite matches
    those words)."""
    _, pull = push_pull
    stream = zmqstream.ZMQStream(pull)
    pull.close()
    with pytest.warns(UserWarning, match="after closing socket"):
        stream.close()


async def test_an_async_socket_is_unwrapped_with_a_warning(push_pull) -> None:
    _, pull = push_pull
    async_pull = zaio.Socket.from_socket(pull)
    with pytest.warns(RuntimeWarning):
        stream = zmqstream.ZMQStream(async_pull)
    assert type(stream.socket) is zmq.Socket
    assert stream.socket.underlying == async_pull.underlying
    stream.close()


async def test_a_router_stream_serves_a_pyzmq_dealer_over_tcp(make) -> None:
    # The shape of a Jupyter kernel's shell channel: a ROUTER stream answering a client.
    router = make(zmq.ROUTER, bounded=False)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    stream = zmqstream.ZMQStream(router)
    stream.on_recv_stream(lambda s, msg: s.send_multipart([msg[0], b"reply", *msg[1:]]))
    lctx = libzmq_asyncio.Context()
    try:
        dealer = lctx.socket(libzmq.DEALER)
        dealer.linger = 0
        dealer.connect(f"tcp://127.0.0.1:{port}")
        for i in range(50):
            await within(dealer.send_multipart([b"request", b"%d" % i]))
            assert await within(dealer.recv_multipart()) == [b"reply", b"request", b"%d" % i]
    finally:
        lctx.destroy(linger=0)
        stream.close()


# -- eventloop.future ----------------------------------------------------------------------------


@pytest.fixture
def future_push_pull():
    """A PUSH and PULL of brokerless.eventloop.future, over inproc."""
    ctx = zfuture.Context()
    push, pull = ctx.socket(zmq.PUSH), ctx.socket(zmq.PULL)
    addr = f"inproc://future-{id(push):x}"
    push.bind(addr)
    pull.connect(addr)
    yield push, pull
    ctx.destroy(linger=0)


def test_future_reprs_are_pyzmqs() -> None:
    ctx = zfuture.Context()
    sock = ctx.socket(zmq.PULL)
    assert repr(sock).startswith(f"<zmq.eventloop.future.Socket(zmq.PULL) at {id(sock):#x}")
    assert repr(ctx).startswith("<zmq.eventloop.future.Context(1 socket) at 0x")
    ctx.destroy(linger=0)


async def test_future_sockets_resolve_tornado_futures(future_push_pull) -> None:
    push, pull = future_push_pull
    assert isinstance(pull, zfuture.Socket)
    waiting = pull.recv_multipart()
    assert not waiting.done()
    await within(push.send_multipart([b"tornado", b"!"]))
    assert await within(waiting) == [b"tornado", b"!"]
    assert await within(pull.poll(10)) == 0


async def test_a_cancelled_future_recv_loses_no_message(future_push_pull) -> None:
    push, pull = future_push_pull
    cancelled = pull.recv()
    assert cancelled.cancel()
    assert cancelled.cancelled()
    with pytest.raises(zfuture.CancelledError):
        cancelled.result()
    await within(push.send(b"kept"))
    assert await within(pull.recv()) == b"kept"


async def test_a_future_poller_watches_a_socket(future_push_pull) -> None:
    push, pull = future_push_pull
    poller = zfuture.Poller()
    poller.register(pull, zmq.POLLIN)
    f = poller.poll(WAIT * 1000)
    await within(push.send(b"x"))
    assert await within(f) == [(pull, zmq.POLLIN)]
