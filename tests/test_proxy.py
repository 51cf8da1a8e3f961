"""zmq.proxy, zmq.proxy_steerable and zmq.device, as libzmq's zmq_proxy(3) and
zmq_proxy_steerable(3) document them (and its tests/test_proxy*.cpp exercise them).

Each proxy runs in a thread of its own on sockets the test made and handed over; the thread
closes them when the proxy ends.  A plain ``proxy`` ends only when its context is terminated:
the test closes its own sockets, terminates the context from another thread, and expects
``ContextTerminated`` out of the proxy (pyzmq raises it out of ``zmq.proxy``).  Every wait is
bounded.  Under ``BROKERLESS_TEST_AGAINST=pyzmq`` the proxy is libzmq's C proxy, which checks
the tests; the ones marked ``beyond_libzmq`` follow the documented control commands, which the
libzmq 4.3.5 binary gets wrong (it swaps PAUSE and RESUME and answers a PAIR control socket).
"""

from __future__ import annotations

import struct
import threading

import pytest

import brokerless as zmq

from .helpers import bind, connect, recv_within

TIMEOUT_MS = 5000
JOIN_S = 10.0


class ProxyThread:
    """``fn(*args)`` in a thread: its return value or exception; closes ``sockets`` after."""

    def __init__(self, fn, *args, sockets=()):
        self.result = None
        self.error: BaseException | None = None
        self._sockets = sockets or [a for a in args if isinstance(a, zmq.Socket)]
        self.thread = threading.Thread(target=self._run, args=(fn, args), daemon=True)
        self.thread.start()

    def _run(self, fn, args):
        try:
            self.result = fn(*args)
        except BaseException as exc:
            self.error = exc
        finally:
            for sock in self._sockets:
                sock.close(linger=0)

    def join(self):
        self.thread.join(JOIN_S)
        assert not self.thread.is_alive(), "the proxy did not return"


class Net:
    """One context for the proxy and its peers (inproc needs that), and its shutdown."""

    def __init__(self):
        self.ctx = zmq.Context()
        self.peers: list = []

    def socket(self, kind, **options):
        """A peer of the test thread: linger 0, blocking calls bounded."""
        sock = self.proxy_socket(kind, **options)
        sock.setsockopt(zmq.RCVTIMEO, TIMEOUT_MS)
        sock.setsockopt(zmq.SNDTIMEO, TIMEOUT_MS)
        self.peers.append(sock)
        return sock

    def proxy_socket(self, kind, **options):
        """A socket to hand to a proxy (the proxy thread closes it)."""
        sock = self.ctx.socket(kind)
        sock.setsockopt(zmq.LINGER, 0)
        for name, value in options.items():
            sock.setsockopt(getattr(zmq, name), value)
        return sock

    def capture(self):
        """A capture socket for a proxy, and the test's end of it."""
        capture = self.proxy_socket(zmq.PUSH)
        capture.bind(f"inproc://capture-{id(self)}")
        tap = self.socket(zmq.PULL)
        tap.connect(f"inproc://capture-{id(self)}")
        return capture, tap

    def close_peers(self):
        for sock in self.peers:
            sock.close(linger=0)

    def terminate(self, running: ProxyThread):
        """Close the peers, terminate the context: the proxy must end with ETERM."""
        self.close_peers()
        terminator = threading.Thread(target=self.ctx.term, daemon=True)
        terminator.start()
        running.join()
        terminator.join(JOIN_S)
        assert not terminator.is_alive(), "term() did not return"
        assert isinstance(running.error, zmq.ContextTerminated), running.error
        assert running.error.errno == zmq.ETERM


@pytest.fixture
def net():
    net = Net()
    yield net
    net.close_peers()
    net.ctx.destroy(linger=0)


def start_queue(net, endpoint, capture=None):
    """A ROUTER frontend / DEALER backend queue (the Guide's msgqueue); its two endpoints."""
    frontend = net.proxy_socket(zmq.ROUTER)
    backend = net.proxy_socket(zmq.DEALER)
    front = bind(frontend, endpoint())
    back = bind(backend, endpoint())
    args = (frontend, backend) if capture is None else (frontend, backend, capture)
    return ProxyThread(zmq.proxy, *args), front, back


def test_requests_and_replies_cross_whole_and_reach_their_client(net, endpoint):
    running, front, back = start_queue(net, endpoint)
    worker = net.socket(zmq.REP)
    connect(worker, back)
    clients = [net.socket(zmq.REQ) for _ in range(3)]
    for client in clients:
        connect(client, front)
    for n, client in enumerate(clients):
        client.send_multipart([b"request", b"", str(n).encode(), b"x" * 300])
    for _ in clients:
        request = recv_within(worker, TIMEOUT_MS, multipart=True)
        assert request[:2] == [b"request", b""] and request[3] == b"x" * 300
        worker.send_multipart([b"reply", request[2]])
    for n, client in enumerate(clients):
        assert recv_within(client, TIMEOUT_MS, multipart=True) == [b"reply", str(n).encode()]
    net.terminate(running)


def test_a_long_stream_keeps_its_order_across_full_queues(net, endpoint):
    """HWMs of 5 everywhere: the proxy keeps stopping for room; nothing is lost or reordered,
    and multipart messages of every length stay whole."""
    frontend = net.proxy_socket(zmq.PULL, RCVHWM=5)
    backend = net.proxy_socket(zmq.PUSH, SNDHWM=5)
    front, back = bind(frontend, endpoint()), bind(backend, endpoint())
    running = ProxyThread(zmq.proxy, frontend, backend)
    source = net.socket(zmq.PUSH, SNDHWM=5)
    sink = net.socket(zmq.PULL, RCVHWM=5)
    connect(sink, back)
    connect(source, front)
    count = 3000
    sender = threading.Thread(
        target=lambda: [
            source.send_multipart([str(i).encode()] * (1 + i % 4)) for i in range(count)
        ],
        daemon=True,
    )
    sender.start()
    for i in range(count):
        assert recv_within(sink, TIMEOUT_MS, multipart=True) == [str(i).encode()] * (1 + i % 4)
    sender.join(JOIN_S)
    net.terminate(running)


def test_capture_sees_each_message_of_both_directions_as_forwarded(net, endpoint):
    capture, tap = net.capture()
    running, front, back = start_queue(net, endpoint, capture)
    worker = net.socket(zmq.REP)
    client = net.socket(zmq.REQ)
    connect(worker, back)
    connect(client, front)
    client.send_multipart([b"ping", b"1"])
    assert recv_within(worker, TIMEOUT_MS, multipart=True) == [b"ping", b"1"]
    worker.send(b"pong")
    assert recv_within(client, TIMEOUT_MS) == b"pong"
    # ROUTER in, DEALER out: the request as the frontend gave it (routing id, REQ's delimiter),
    # then the reply as the backend gave it (the REP's envelope back, with that routing id).
    request = recv_within(tap, TIMEOUT_MS, multipart=True)
    reply = recv_within(tap, TIMEOUT_MS, multipart=True)
    assert request[1:] == [b"", b"ping", b"1"]
    assert reply == [request[0], b"", b"pong"]
    net.terminate(running)


def _wait_subscription(publisher, expected: bytes) -> None:
    assert recv_within(publisher, TIMEOUT_MS) == expected


def start_pubsub_proxy(net, endpoint, capture=None):
    """The Guide's pub-sub proxy: XSUB for publishers, XPUB for subscribers."""
    xsub = net.proxy_socket(zmq.XSUB)
    xpub = net.proxy_socket(zmq.XPUB)
    up, down = bind(xsub, endpoint()), bind(xpub, endpoint())
    args = (xsub, xpub) if capture is None else (xsub, xpub, capture)
    return ProxyThread(zmq.proxy, *args), up, down


def test_subscriptions_and_cancellations_travel_upstream(net, endpoint):
    running, up, down = start_pubsub_proxy(net, endpoint)
    publisher = net.socket(zmq.XPUB)  # it hands us the subscriptions that reach it
    subscriber = net.socket(zmq.SUB)
    connect(publisher, up)
    connect(subscriber, down)
    subscriber.subscribe(b"A")
    _wait_subscription(publisher, b"\x01A")
    publisher.send_multipart([b"B", b"not for us"])
    publisher.send_multipart([b"A", b"for us"])
    assert recv_within(subscriber, TIMEOUT_MS, multipart=True) == [b"A", b"for us"]
    subscriber.unsubscribe(b"A")
    _wait_subscription(publisher, b"\x00A")
    net.terminate(running)


def test_a_publishers_welcome_message_reaches_subscribers(net, endpoint):
    """The subscription is in the proxy's XSUB before the publisher comes: the XSUB sends it to
    the new publisher, whose welcome message comes back through the proxy."""
    capture, tap = net.capture()
    running, up, down = start_pubsub_proxy(net, endpoint, capture)
    subscriber = net.socket(zmq.SUB)
    connect(subscriber, down)
    subscriber.subscribe(b"W")
    assert recv_within(tap, TIMEOUT_MS) == b"\x01W"  # forwarded to the XSUB
    publisher = net.socket(zmq.XPUB, XPUB_WELCOME_MSG=b"W:hello")
    connect(publisher, up)
    _wait_subscription(publisher, b"\x01W")
    assert recv_within(subscriber, TIMEOUT_MS) == b"W:hello"
    net.terminate(running)


def test_one_socket_as_frontend_and_backend_echoes(net, endpoint):
    """libzmq proxies a socket to itself: a REP sends every request back as its reply."""
    rep = net.proxy_socket(zmq.REP)
    addr = bind(rep, endpoint())
    running = ProxyThread(zmq.proxy, rep, rep)
    req = net.socket(zmq.REQ)
    connect(req, addr)
    for body in (b"hello", b"", b"again"):
        req.send(body)
        assert recv_within(req, TIMEOUT_MS) == body
    net.terminate(running)


@pytest.mark.beyond_libzmq
def test_one_rep_socket_echoes_multipart_requests_whole(net):
    """libzmq forwards part by part, and its REP refuses to send before the whole request is
    read (EFSM, which ends the proxy); whole messages make the multipart echo work."""
    rep = net.proxy_socket(zmq.REP)
    rep.bind("inproc://echo")
    running = ProxyThread(zmq.proxy, rep, rep)
    req = net.socket(zmq.REQ)
    req.connect("inproc://echo")
    req.send_multipart([b"multi", b"", b"part"])
    assert recv_within(req, TIMEOUT_MS, multipart=True) == [b"multi", b"", b"part"]
    net.terminate(running)


def test_device_is_a_proxy_whatever_its_type(net):
    frontend = net.proxy_socket(zmq.PULL)
    backend = net.proxy_socket(zmq.PUSH)
    frontend.bind("inproc://device-in")
    backend.bind("inproc://device-out")
    running = ProxyThread(zmq.device, zmq.FORWARDER, frontend, backend)
    source = net.socket(zmq.PUSH)
    sink = net.socket(zmq.PULL)
    source.connect("inproc://device-in")
    sink.connect("inproc://device-out")
    source.send(b"through")
    assert recv_within(sink, TIMEOUT_MS) == b"through"
    assert (zmq.STREAMER, zmq.FORWARDER, zmq.QUEUE) == (1, 2, 3)
    assert zmq.DeviceType.QUEUE == zmq.QUEUE
    net.terminate(running)


def test_a_closed_socket_is_refused_with_efault(net):
    frontend = net.proxy_socket(zmq.PULL)
    backend = net.proxy_socket(zmq.PUSH)
    backend.close()
    with pytest.raises(zmq.ZMQError) as info:
        zmq.proxy(frontend, backend)
    assert info.value.errno == zmq.EFAULT
    frontend.close()


@pytest.mark.parametrize("transport", ["ipc", "tcp"])  # inproc does not cross libraries
def test_libzmq_clients_and_worker_through_a_queue(net, lmake, endpoint):
    running, front, back = start_queue(net, endpoint)
    worker = lmake(zmq.REP)
    worker.connect(back)
    clients = [lmake(zmq.REQ) for _ in range(2)]
    for n, client in enumerate(clients):
        client.connect(front)
        client.send_multipart([b"from", str(n).encode()])
    for _ in clients:
        request = worker.recv_multipart()
        worker.send_multipart([b"to", request[1]])
    for n, client in enumerate(clients):
        assert client.recv_multipart() == [b"to", str(n).encode()]
    net.terminate(running)


@pytest.mark.parametrize("transport", ["ipc", "tcp"])
def test_libzmq_publisher_and_subscriber_through_a_pubsub_proxy(net, lmake, endpoint):
    running, up, down = start_pubsub_proxy(net, endpoint)
    publisher = lmake(zmq.XPUB)
    subscriber = lmake(zmq.SUB)
    publisher.connect(up)
    subscriber.connect(down)
    subscriber.subscribe(b"news")
    assert publisher.recv() == b"\x01news"
    publisher.send_multipart([b"sport", b"no"])
    publisher.send_multipart([b"news", b"yes"])
    assert subscriber.recv_multipart() == [b"news", b"yes"]
    net.terminate(running)


# -- proxy_steerable -----------------------------------------------------------------------------


def start_steerable(net, control_type):
    """A PULL -> PUSH proxy with a control socket; the source, sink and controller."""
    name = f"steer-{id(net)}"
    frontend = net.proxy_socket(zmq.PULL)
    backend = net.proxy_socket(zmq.PUSH)
    control = net.proxy_socket(control_type)
    for sock, role in ((frontend, "in"), (backend, "out"), (control, "ctl")):
        sock.bind(f"inproc://{name}-{role}")
    running = ProxyThread(zmq.proxy_steerable, frontend, backend, None, control)
    source = net.socket(zmq.PUSH)
    sink = net.socket(zmq.PULL)
    controller = net.socket(zmq.REQ if control_type == zmq.REP else zmq.PAIR)
    for sock, role in ((source, "in"), (sink, "out"), (controller, "ctl")):
        sock.connect(f"inproc://{name}-{role}")
    return running, source, sink, controller


def statistics(controller) -> list[int]:
    controller.send(b"STATISTICS")
    reply = recv_within(controller, TIMEOUT_MS, multipart=True)
    assert [len(part) for part in reply] == [8] * 8
    return [struct.unpack("=Q", part)[0] for part in reply]


def terminate(controller, running, *, reply: bool) -> None:
    controller.send(b"TERMINATE")
    if reply:
        assert recv_within(controller, TIMEOUT_MS) == b""
    running.join()
    assert running.error is None
    assert running.result == 0


@pytest.mark.parametrize("control_type", [zmq.REP, zmq.PAIR], ids=["REP", "PAIR"])
def test_statistics_count_every_part_and_byte(net, control_type):
    running, source, sink, controller = start_steerable(net, control_type)
    assert statistics(controller) == [0] * 8
    source.send(b"ab")
    source.send_multipart([b"c", b"", b"def"])
    assert recv_within(sink, TIMEOUT_MS) == b"ab"
    assert recv_within(sink, TIMEOUT_MS, multipart=True) == [b"c", b"", b"def"]
    # frontend received 4 parts / 6 bytes, backend sent them; nothing the other way
    assert statistics(controller) == [4, 6, 0, 0, 0, 0, 4, 6]
    controller.send(b"TERMINATE")
    running.join()
    assert running.result == 0


def test_statistics_of_both_directions(net):
    frontend = net.proxy_socket(zmq.ROUTER)
    backend = net.proxy_socket(zmq.DEALER)
    control = net.proxy_socket(zmq.REP)
    for sock, role in ((frontend, "in"), (backend, "out"), (control, "ctl")):
        sock.bind(f"inproc://both-{role}")
    running = ProxyThread(zmq.proxy_steerable, frontend, backend, None, control)
    client, worker, controller = net.socket(zmq.REQ), net.socket(zmq.REP), net.socket(zmq.REQ)
    for sock, role in ((client, "in"), (worker, "out"), (controller, "ctl")):
        sock.connect(f"inproc://both-{role}")
    client.send(b"ping")
    assert recv_within(worker, TIMEOUT_MS) == b"ping"
    worker.send(b"pong!")
    assert recv_within(client, TIMEOUT_MS) == b"pong!"
    # Each way: a 5-byte generated routing id, the empty delimiter and the body.
    assert statistics(controller) == [3, 9, 3, 10, 3, 10, 3, 9]
    terminate(controller, running, reply=True)


def test_terminate_ends_the_proxy_with_0_and_a_rep_gets_an_empty_reply(net):
    running, source, sink, controller = start_steerable(net, zmq.REP)
    source.send(b"before")
    assert recv_within(sink, TIMEOUT_MS) == b"before"
    terminate(controller, running, reply=True)


def test_an_unknown_command_changes_nothing(net):
    running, source, sink, controller = start_steerable(net, zmq.REP)
    for command in (b"HELLO", b"pause", b""):
        controller.send(command)
        assert recv_within(controller, TIMEOUT_MS) == b""  # a REP must answer
    source.send(b"still forwarding")
    assert recv_within(sink, TIMEOUT_MS) == b"still forwarding"
    assert statistics(controller)[0] == 1
    terminate(controller, running, reply=True)


@pytest.mark.beyond_libzmq  # libzmq 4.3.5 swaps PAUSE and RESUME (fixed upstream afterwards)
def test_pause_holds_messages_in_the_queues_until_resume(net):
    running, source, sink, controller = start_steerable(net, zmq.REP)
    controller.send(b"PAUSE")
    assert recv_within(controller, TIMEOUT_MS) == b""
    source.send(b"held")
    assert statistics(controller) == [0] * 8  # the proxy looked at its control, not the queue
    assert not sink.poll(100)
    controller.send(b"RESUME")
    assert recv_within(controller, TIMEOUT_MS) == b""
    assert recv_within(sink, TIMEOUT_MS) == b"held"
    terminate(controller, running, reply=True)


@pytest.mark.beyond_libzmq  # libzmq 4.3.5 answers every command, whatever the socket type
def test_a_pair_control_socket_gets_an_answer_to_statistics_only(net):
    running, source, sink, controller = start_steerable(net, zmq.PAIR)
    for command in (b"PAUSE", b"RESUME", b"UNKNOWN"):
        controller.send(command)
    source.send(b"x")
    assert recv_within(sink, TIMEOUT_MS) == b"x"
    assert statistics(controller) == [1, 1, 0, 0, 0, 0, 1, 1]  # the first and only reply
    terminate(controller, running, reply=False)
