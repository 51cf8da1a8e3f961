"""brokerless.green (pyzmq's zmq.green) on gevent: blocking calls block only their greenlet.

Each test keeps a "ticker" greenlet running where a call waits, to show the hub was free the
whole time.  Under ``BROKERLESS_TEST_AGAINST=pyzmq`` the same tests run on pyzmq's zmq.green.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import gevent
import gevent.event
import pytest
import zmq as libzmq

import brokerless as zmq
import brokerless.green as green

WAIT = 5.0  # seconds any greenlet below may take before the test fails


@pytest.fixture
def gctx():
    context = green.Context()
    yield context
    context.destroy(linger=0)


class Ticker:
    """A greenlet that counts while others wait: the hub was free if it counted."""

    def __init__(self) -> None:
        self.ticks = 0
        self.ticked = threading.Event()  # set at the 3rd tick (another thread may wait for it)
        self._greenlet = gevent.spawn(self._run)

    def _run(self) -> None:
        while True:
            gevent.sleep(0.005)
            self.ticks += 1
            if self.ticks == 3:
                self.ticked.set()

    def stop(self) -> int:
        self._greenlet.kill()
        return self.ticks


def pair(gctx, kind_a=zmq.PAIR, kind_b=zmq.PAIR, transport="tcp"):
    a, b = gctx.socket(kind_a), gctx.socket(kind_b)
    for sock in (a, b):
        sock.linger = 0
    if transport == "tcp":
        port = a.bind_to_random_port("tcp://127.0.0.1")
        b.connect(f"tcp://127.0.0.1:{port}")
    else:
        a.bind(f"inproc://green-{id(a)}")
        b.connect(f"inproc://green-{id(a)}")
    return a, b


# -- the module -----------------------------------------------------------------------------------


def test_exports_everything_with_green_classes():
    for name in zmq.__all__:
        assert hasattr(green, name), name
    assert {"Context", "Socket", "Poller", "device"} <= set(green.__all__)
    assert green.PUSH is zmq.PUSH
    assert green.SocketOption is zmq.SocketOption
    assert green.zmq_version_info is zmq.zmq_version_info
    assert issubclass(green.Context, zmq.Context) and green.Context is not zmq.Context
    assert issubclass(green.Socket, zmq.Socket) and green.Socket is not zmq.Socket
    assert issubclass(green.Poller, zmq.Poller) and green.Poller is not zmq.Poller


def test_context_makes_green_sockets_and_has_its_own_instance(gctx):
    sock = gctx.socket(zmq.PUSH)
    assert isinstance(sock, green.Socket)
    sock.close()
    assert isinstance(green.Context.instance(), green.Context)
    assert green.Context.instance() is not zmq.Context.instance()


def test_a_context_subclass_makes_its_own_socket_class():
    """``_socket_class`` says what ``socket()`` makes, as in pyzmq's zmq.green."""

    class Mine(green.Socket):
        pass

    class MyContext(green.Context):
        _socket_class = Mine

    ctx = MyContext()
    sock = ctx.socket(zmq.PUSH)
    made = type(sock)
    sock.close(linger=0)
    ctx.term()
    assert made is Mine


# -- blocking calls yield to the hub --------------------------------------------------------------


@pytest.mark.parametrize("transport", ["tcp", "inproc"])
def test_recv_waits_in_its_greenlet_only(gctx, transport):
    """The message is sent only once the ticker has ticked 5 times: recv returns only if the
    hub ran other greenlets while it waited.  (Sent after a fixed 0.1 s instead, a loaded
    machine could let the send and the ticker's first sleep end together, and the count
    came out short.)"""
    a, b = pair(gctx, transport=transport)
    ticker = Ticker()

    def send_once_the_hub_has_ticked() -> None:
        while ticker.ticks < 5:
            gevent.sleep(0.005)
        a.send(b"hello")

    gevent.spawn(send_once_the_hub_has_ticked)
    with gevent.Timeout(WAIT):
        assert b.recv() == b"hello"
    ticker.stop()


def test_many_greenlets_over_one_context(gctx):
    """30 REQ/REP pairs (tcp and inproc) and a PUSH/PULL fan-in, all at once, in greenlets."""
    ticker = Ticker()
    rounds = 20
    workers = []
    for n in range(30):
        rep, req = pair(gctx, zmq.REP, zmq.REQ, "tcp" if n % 2 else "inproc")

        def serve(rep=rep):
            for _ in range(rounds):
                rep.send(b"re:" + rep.recv())

        def ask(req=req, n=n):
            return [req.send(b"%d.%d" % (n, i)) or req.recv() for i in range(rounds)]

        workers.append((gevent.spawn(serve), gevent.spawn(ask)))

    pull = gctx.socket(zmq.PULL)
    pull.bind("inproc://fan-in")
    pushes = [gctx.socket(zmq.PUSH) for _ in range(10)]
    for push in pushes:
        push.connect("inproc://fan-in")
    senders = [gevent.spawn(lambda p=p: [p.send(b"x") for _ in range(100)]) for p in pushes]
    collector = gevent.spawn(lambda: [pull.recv() for _ in range(1000)])

    everyone = [g for pair_ in workers for g in pair_] + senders + [collector]
    gevent.joinall(everyone, timeout=30, raise_error=True)
    assert all(g.successful() for g in everyone)
    for n, (_, asker) in enumerate(workers):
        assert asker.value == [b"re:%d.%d" % (n, i) for i in range(rounds)]
    assert len(collector.value) == 1000
    assert ticker.stop() > 0


def test_send_waits_for_room_in_its_greenlet(gctx):
    """A PUSH at its HWM waits (the hub free) until the PULL reads."""
    pull, push = pair(gctx, zmq.PULL, zmq.PUSH, "inproc")
    push.sndhwm = pull.rcvhwm = 1
    sender = gevent.spawn(lambda: [push.send(b"%d" % i) for i in range(20)])
    got = []
    with gevent.Timeout(WAIT):
        while len(got) < 20:
            got.append(pull.recv())
    sender.join(WAIT)
    assert sender.successful()
    assert got == [b"%d" % i for i in range(20)]


@pytest.mark.beyond_libzmq  # pyzmq's zmq.green ignores RCVTIMEO / SNDTIMEO (and warns)
def test_rcvtimeo_raises_again_without_blocking_the_hub(gctx):
    a, b = pair(gctx)
    with pytest.warns(UserWarning, match="RCVTIMEO"):
        b.rcvtimeo = 200
    ticker = Ticker()
    with gevent.Timeout(WAIT), pytest.raises(zmq.Again):
        b.recv()
    assert ticker.stop() >= 10  # ~40 ticks in 200 ms: the wait was on the hub
    a.send(b"late")
    with gevent.Timeout(WAIT):
        assert b.recv() == b"late"  # the socket is fine after a timeout


@pytest.mark.beyond_libzmq  # pyzmq's zmq.green ignores RCVTIMEO / SNDTIMEO (and warns)
def test_sndtimeo_raises_again_without_blocking_the_hub(gctx):
    push = gctx.socket(zmq.PUSH)
    push.linger = 0
    with pytest.warns(UserWarning, match="SNDTIMEO"):
        push.sndtimeo = 200
    ticker = Ticker()
    with gevent.Timeout(WAIT), pytest.raises(zmq.Again):
        push.send(b"nobody listens")
    assert ticker.stop() >= 10


def test_reading_a_timeout_warns_as_pyzmqs_green_does(gctx):
    """pyzmq's zmq.green warns when RCVTIMEO / SNDTIMEO is read as well as set; the warning
    points at the caller's line."""
    sock = gctx.socket(zmq.REQ)
    with pytest.warns(UserWarning, match="SNDTIMEO") as caught:
        assert sock.sndtimeo == -1
    assert caught[0].filename == __file__
    with pytest.warns(UserWarning, match="RCVTIMEO"):
        sock.getsockopt(zmq.RCVTIMEO)
    sock.close(linger=0)


def test_noblock_raises_again_at_once(gctx):
    _a, b = pair(gctx)
    with pytest.raises(zmq.Again):
        b.recv(zmq.NOBLOCK)


def test_gevent_timeout_interrupts_a_wait(gctx):
    a, b = pair(gctx)
    with pytest.raises(gevent.Timeout), gevent.Timeout(0.1):
        b.recv()
    a.send(b"after")
    with gevent.Timeout(WAIT):
        assert b.recv() == b"after"  # nothing was consumed by the interrupted wait


def test_reader_and_writer_greenlets_on_one_socket(gctx):
    """One greenlet blocked in recv and another in send on the same DEALER: whichever call
    consumes the FD's edge, the other greenlet still wakes."""
    router = gctx.socket(zmq.ROUTER)
    dealer = gctx.socket(zmq.DEALER)
    router.bind("inproc://rw")
    dealer.sndhwm = router.rcvhwm = 1
    dealer.connect("inproc://rw")
    sent = gevent.spawn(lambda: [dealer.send(b"%d" % i) for i in range(50)])
    received = gevent.spawn(dealer.recv)
    with gevent.Timeout(WAIT):
        for i in range(50):
            rid, msg = router.recv_multipart()
            assert msg == b"%d" % i
        router.send_multipart([rid, b"reply"])
        assert received.get() == b"reply"
        sent.get()


def test_poller_waits_on_the_hub(gctx):
    a, b = pair(gctx)
    poller = green.Poller()
    poller.register(b, zmq.POLLIN)
    ticker = Ticker()
    assert poller.poll(50) == []  # timed out, the hub free meanwhile
    gevent.spawn_later(0.05, a.send, b"wake")
    with gevent.Timeout(WAIT):
        assert poller.poll(5000) == [(b, zmq.POLLIN)]
    assert b.recv() == b"wake"
    assert ticker.stop() >= 5


def test_poller_and_a_blocked_recv_on_one_socket(gctx):
    """A poller's look at a socket must not steal the wake-up of a greenlet blocked in it."""
    a, b = pair(gctx, transport="inproc")
    receiver = gevent.spawn(b.recv)
    poller = green.Poller()
    poller.register(b, zmq.POLLIN)
    watcher = gevent.spawn(poller.poll, 5000)
    gevent.sleep(0)  # both are waiting now
    a.send(b"one")
    with gevent.Timeout(WAIT):
        assert receiver.get() == b"one"
        watcher.get()


def test_socket_poll_and_poller_with_plain_descriptors(gctx):
    a, b = pair(gctx)
    gevent.spawn_later(0.05, a.send, b"x")
    with gevent.Timeout(WAIT):
        assert b.poll(5000) == zmq.POLLIN
    r, w = os.pipe()
    try:
        poller = green.Poller()
        poller.register(r, zmq.POLLIN)
        gevent.spawn_later(0.05, os.write, w, b"!")
        with gevent.Timeout(WAIT):
            assert poller.poll(5000) == [(r, zmq.POLLIN)]
    finally:
        os.close(r)
        os.close(w)


# -- ending ---------------------------------------------------------------------------------------


def test_close_wakes_a_waiting_greenlet(gctx):
    _a, b = pair(gctx)
    waiter = gevent.spawn(b.recv)
    gevent.sleep(0)
    b.close()
    with gevent.Timeout(WAIT), pytest.raises(zmq.ZMQError) as info:
        waiter.get()
    assert info.value.errno == zmq.ENOTSOCK


def test_term_wakes_a_waiting_greenlet():
    ctx = green.Context()
    sock = ctx.socket(zmq.PULL)
    sock.bind("inproc://term")
    waiter = gevent.spawn(sock.recv)
    gevent.sleep(0)
    terminated = threading.Event()  # term() blocks its thread until the socket is closed

    def term():
        ctx.term()
        terminated.set()

    threading.Thread(target=term, daemon=True).start()
    with gevent.Timeout(WAIT), pytest.raises(zmq.ContextTerminated):
        waiter.get()
    sock.close()
    assert terminated.wait(WAIT)


@pytest.mark.beyond_libzmq  # pyzmq's zmq.green term() blocks the hub: this deadlocks there
@pytest.mark.timeout(30)  # term() blocking the hub would deadlock: pytest-timeout ends it
def test_term_in_a_greenlet_lets_the_others_close_their_sockets():
    ctx = green.Context()
    closed = []

    def worker(n):
        sock = ctx.socket(zmq.PULL)
        sock.bind(f"inproc://term-{n}")
        try:
            sock.recv()
        except zmq.ContextTerminated:
            sock.close()
            closed.append(n)

    workers = [gevent.spawn(worker, n) for n in range(5)]
    gevent.sleep(0)  # every worker waits in recv
    ctx.term()  # returns once every worker closed its socket
    assert sorted(closed) == list(range(5))
    gevent.joinall(workers, timeout=WAIT, raise_error=True)


def test_green_device_relays(gctx):
    rep = gctx.socket(zmq.REP)
    req = gctx.socket(zmq.REQ)
    for sock in (rep, req):
        sock.linger = 0
    port = rep.bind_to_random_port("tcp://127.0.0.1")
    relay = gevent.spawn(green.device, 3, rep, rep)  # 3: QUEUE; a REP relaying to itself echoes
    req.connect(f"tcp://127.0.0.1:{port}")
    with gevent.Timeout(WAIT):
        for i in range(3):
            req.send(b"echo %d" % i)
            assert req.recv() == b"echo %d" % i
    relay.kill()


# -- with libzmq, and under gevent's monkey-patching ----------------------------------------------


@pytest.mark.parametrize("green_side", ["REQ", "REP"])
def test_green_reqrep_with_a_pyzmq_peer(gctx, green_side):
    lctx = libzmq.Context()
    try:
        if green_side == "REQ":
            ours, theirs = gctx.socket(zmq.REQ), lctx.socket(libzmq.REP)
        else:
            ours, theirs = gctx.socket(zmq.REP), lctx.socket(libzmq.REQ)
        for sock in (ours, theirs):
            sock.linger = 0
        theirs.rcvtimeo = theirs.sndtimeo = int(WAIT * 1000)
        port = theirs.bind_to_random_port("tcp://127.0.0.1")
        ours.connect(f"tcp://127.0.0.1:{port}")

        ticker = Ticker()

        def libzmq_side():  # a real thread: libzmq blocks it, not the hub
            # The green side waits meanwhile: the ticker ticks only if that wait left the hub free.
            assert ticker.ticked.wait(WAIT), "the green side blocked the hub"
            for _ in range(5):
                if green_side == "REQ":
                    theirs.send(b"re:" + theirs.recv())
                else:
                    theirs.send(b"ping")
                    assert theirs.recv() == b"re:ping"

        peer = threading.Thread(target=libzmq_side)
        peer.start()
        with gevent.Timeout(WAIT):
            for i in range(5):
                if green_side == "REQ":
                    ours.send(b"%d" % i)
                    assert ours.recv() == b"re:%d" % i
                else:
                    ours.send(b"re:" + ours.recv())
        peer.join(WAIT)
        assert not peer.is_alive()
        assert ticker.stop() >= 3
    finally:
        lctx.destroy(linger=0)


MONKEY_PATCHED = """
    from gevent import monkey
    monkey.patch_all()
    import os, threading
    import gevent
    if os.environ.get("BROKERLESS_TEST_AGAINST") == "pyzmq":
        import zmq as plain
        import zmq.green as green
    else:
        import brokerless as plain
        import brokerless.green as green

    ctx = green.Context()
    rep = ctx.socket(green.REP)
    port = rep.bind_to_random_port("tcp://127.0.0.1")
    req = ctx.socket(green.REQ)
    req.connect("tcp://127.0.0.1:%d" % port)
    server = gevent.spawn(lambda: [rep.send(b"re:" + rep.recv()) for _ in range(3)])
    with gevent.Timeout(10):
        print([req.send(b"%d" % i) or req.recv() for i in range(3)])
    server.get()

    # plain sockets and threads, both green under the patch
    pctx = plain.Context()
    pull = pctx.socket(plain.PULL)
    pull.bind("inproc://patched")
    push = pctx.socket(plain.PUSH)
    push.connect("inproc://patched")
    sender = threading.Thread(target=lambda: [push.send(b"t%d" % i) for i in range(3)])
    sender.start()
    with gevent.Timeout(10):
        print([pull.recv() for _ in range(3)])
    sender.join()
    for sock in (rep, req, pull, push):
        sock.close(linger=0)
    ctx.term()
    pctx.term()
    print("done")
"""


def test_under_monkey_patched_threading():
    """gevent's patch_all makes brokerless's own threads and locks green too: green and
    plain sockets still work (a child process, so the patch stays there)."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(MONKEY_PATCHED)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:3] == [
        "[b're:0', b're:1', b're:2']",
        "[b't0', b't1', b't2']",
        "done",
    ]
