"""zmq.devices: Device/ThreadDevice/ProcessDevice, the Proxy, ProxySteerable and MonitoredQueue
devices, and monitored_queue -- pyzmq's modules and names, its behaviour.

Each device gets a fresh context of its own (``context_factory``), so a test ends it by
terminating that context (after closing its own sockets) and checks it really ended.  Under
``BROKERLESS_TEST_AGAINST=pyzmq`` these are pyzmq's devices on libzmq.
"""

from __future__ import annotations

import importlib
import struct
import threading

import pytest

import brokerless as zmq

from .helpers import recv_within

# By the implementation's own name: under BROKERLESS_TEST_AGAINST=pyzmq, "brokerless.devices"
# would load a second copy of zmq.devices.
devices = importlib.import_module(f"{zmq.__name__}.devices")

TIMEOUT_MS = 5000
JOIN_S = 10.0


def stop(device) -> None:
    """Terminate a running device's context: the device must end and close its sockets."""
    terminator = threading.Thread(target=device._context.term, daemon=True)
    terminator.start()
    device.join(JOIN_S)
    terminator.join(JOIN_S)
    assert not terminator.is_alive(), "the device's context did not terminate"
    assert device.done


def background(device):
    device.context_factory = zmq.Context  # not the shared instance: the test terminates it
    device.start()
    return device


def tcp(port: int) -> str:
    return f"tcp://127.0.0.1:{port}"


#: pyzmq's modules of zmq.devices and the public names each defines.
MODULES = {
    "basedevice": ["Device", "ProcessDevice", "ThreadDevice"],
    "proxydevice": ["ProcessProxy", "Proxy", "ThreadProxy"],
    "proxysteerabledevice": ["ProcessProxySteerable", "ProxySteerable", "ThreadProxySteerable"],
    "monitoredqueue": ["monitored_queue"],
    "monitoredqueuedevice": ["MonitoredQueue", "ProcessMonitoredQueue", "ThreadMonitoredQueue"],
}


def test_pyzmq_module_paths_and_names():
    for module_name, names in MODULES.items():
        module = importlib.import_module(f"{devices.__name__}.{module_name}")
        assert sorted(module.__all__) == names
        for name in names:
            assert getattr(devices, name) is getattr(module, name)
    assert sorted(devices.__all__) == sorted(n for names in MODULES.values() for n in names)


def test_a_device_keeps_its_types():
    for device_type in (zmq.STREAMER, zmq.FORWARDER, zmq.QUEUE):
        device = devices.Device(device_type, zmq.SUB, zmq.PUB)
        assert (device.device_type, device.in_type, device.out_type) == (device_type, 2, 1)
        assert device.daemon is True
        assert device.done is False
    proxy = devices.ThreadProxySteerable(zmq.PULL, zmq.PUSH, zmq.PUSH, zmq.PAIR)
    assert (proxy.device_type, proxy.mon_type, proxy.ctrl_type) == (zmq.QUEUE, zmq.PUSH, zmq.PAIR)
    with pytest.raises(TypeError):
        devices.Device(zmq.QUEUE, zmq.PUSH)
    # A thread shares the process's context, a process makes its own.
    assert devices.ThreadDevice.context_factory() is zmq.Context.instance()
    assert devices.ProcessDevice.context_factory is zmq.Context


@pytest.mark.beyond_pyzmq
@pytest.mark.parametrize("cls", ["ThreadDevice", "ProcessProxy"])
def test_joining_a_background_device_before_start_says_so(cls):
    """As ``Thread.join`` does; pyzmq fails with an AttributeError on its launcher, None."""
    device = getattr(devices, cls)(zmq.QUEUE, zmq.PULL, zmq.PUSH)
    with pytest.raises(RuntimeError, match="before it is started"):
        device.join(JOIN_S)


def test_random_ports_are_reserved_once_each_and_run_out():
    device = devices.ThreadDevice(zmq.QUEUE, zmq.PULL, zmq.PUSH)
    ports = {device.bind_in_to_random_port("tcp://127.0.0.1", min_port=21000, max_port=21005)}
    for _ in range(4):
        ports.add(device.bind_out_to_random_port("tcp://127.0.0.1", 21000, 21005))
    assert ports == set(range(21000, 21005))
    with pytest.raises(zmq.ZMQBindError):
        device.bind_in_to_random_port("tcp://127.0.0.1", min_port=21000, max_port=21005)


def test_thread_device_queues_requests_to_a_worker(make):
    device = devices.ThreadDevice(zmq.QUEUE, zmq.ROUTER, zmq.DEALER)
    front = tcp(device.bind_in_to_random_port("tcp://127.0.0.1"))
    back = tcp(device.bind_out_to_random_port("tcp://127.0.0.1"))
    device.setsockopt_in(zmq.ROUTER_MANDATORY, 1)
    background(device)
    worker = make(zmq.REP, RCVTIMEO=TIMEOUT_MS)
    client = make(zmq.REQ, RCVTIMEO=TIMEOUT_MS)
    worker.connect(back)
    client.connect(front)
    client.send_multipart([b"work", b"1"])
    assert worker.recv_multipart() == [b"work", b"1"]
    worker.send(b"done")
    assert client.recv() == b"done"
    worker.close()
    client.close()
    stop(device)


def test_a_device_on_one_socket_echoes(make):
    """``out_type`` below 0: the in socket serves both sides (pyzmq's single-socket device)."""
    req = make(zmq.REQ, RCVTIMEO=TIMEOUT_MS)
    port = req.bind_to_random_port("tcp://127.0.0.1")
    device = devices.ThreadDevice(zmq.QUEUE, zmq.REP, -1)
    device.connect_in(tcp(port))
    background(device)
    req.send(b"hello")
    assert req.recv() == b"hello"
    req.close()
    stop(device)


def test_thread_proxy_copies_every_message_to_its_monitor(make):
    device = devices.ThreadProxy(zmq.PULL, zmq.PUSH, zmq.PUSH)
    ports = [device.bind_in_to_random_port("tcp://127.0.0.1")]
    ports.append(device.bind_out_to_random_port("tcp://127.0.0.1"))
    ports.append(device.bind_mon_to_random_port("tcp://127.0.0.1"))
    background(device)
    push, pull, mon = make(zmq.PUSH), make(zmq.PULL), make(zmq.PULL)
    for sock, port in zip((push, pull, mon), ports, strict=True):
        sock.connect(tcp(port))
    push.send_multipart([b"two", b"parts"])
    assert recv_within(pull, TIMEOUT_MS, multipart=True) == [b"two", b"parts"]
    assert recv_within(mon, TIMEOUT_MS, multipart=True) == [b"two", b"parts"]
    for sock in (push, pull, mon):
        sock.close()
    stop(device)


def test_thread_proxy_steerable_reports_and_terminates(make):
    device = devices.ThreadProxySteerable(zmq.PULL, zmq.PUSH, zmq.PUSH, zmq.PAIR)
    ports = [device.bind_in_to_random_port("tcp://127.0.0.1")]
    ports.append(device.bind_out_to_random_port("tcp://127.0.0.1"))
    ports.append(device.bind_mon_to_random_port("tcp://127.0.0.1"))
    ports.append(device.bind_ctrl_to_random_port("tcp://127.0.0.1"))
    background(device)
    push, pull, mon, ctrl = make(zmq.PUSH), make(zmq.PULL), make(zmq.PULL), make(zmq.PAIR)
    for sock, port in zip((push, pull, mon, ctrl), ports, strict=True):
        sock.connect(tcp(port))
    push.send(b"hello")
    assert recv_within(pull, TIMEOUT_MS) == b"hello"
    assert recv_within(mon, TIMEOUT_MS) == b"hello"
    ctrl.send(b"STATISTICS")
    stats = [struct.unpack("=Q", part)[0] for part in recv_within(ctrl, TIMEOUT_MS, multipart=True)]
    assert stats == [1, 5, 0, 0, 0, 0, 1, 5]
    ctrl.send(b"TERMINATE")
    device.join(JOIN_S)
    assert device.done  # ended by the command: its context is still there
    device._context.term()


def build_monitored_queue(make, in_prefix=b"in", out_prefix=b"out"):
    """The pyzmq suite's set-up: PAIR alice <-> queue <-> PAIR bob; the monitor is a PUSH here
    (a PUB's first messages race its subscriber's subscription)."""
    device = devices.ThreadMonitoredQueue(zmq.PAIR, zmq.PAIR, zmq.PUSH, in_prefix, out_prefix)
    alice, bob, mon = make(zmq.PAIR), make(zmq.PAIR), make(zmq.PULL)
    for sock, connect_to in ((alice, device.connect_in), (bob, device.connect_out)):
        connect_to(tcp(sock.bind_to_random_port("tcp://127.0.0.1")))
    device.connect_mon(tcp(mon.bind_to_random_port("tcp://127.0.0.1")))
    background(device)
    return device, alice, bob, mon


@pytest.mark.parametrize("prefixes", [(b"in", b"out"), (b"", b"\x00other\xff")])
def test_monitored_queue_tells_the_monitor_each_way_behind_a_prefix(make, prefixes):
    device, alice, bob, mon = build_monitored_queue(make, *prefixes)
    alice.send_multipart([b"hello", b"bob"])
    assert recv_within(bob, TIMEOUT_MS, multipart=True) == [b"hello", b"bob"]
    bob.send_multipart([b"hello", b"alice"])
    assert recv_within(alice, TIMEOUT_MS, multipart=True) == [b"hello", b"alice"]
    assert recv_within(mon, TIMEOUT_MS, multipart=True) == [prefixes[0], b"hello", b"bob"]
    assert recv_within(mon, TIMEOUT_MS, multipart=True) == [prefixes[1], b"hello", b"alice"]
    for sock in (alice, bob, mon):
        sock.close()
    stop(device)


def test_monitored_queue_routes_between_two_routers(make):
    """ROUTER on both sides: the frames naming sender and addressee are swapped on the way."""
    ctx = zmq.Context()
    ins, outs, mon_out = ctx.socket(zmq.ROUTER), ctx.socket(zmq.ROUTER), ctx.socket(zmq.PUSH)
    ins.bind("inproc://mq-in")
    outs.bind("inproc://mq-out")
    mon_out.bind("inproc://mq-mon")
    outcome = {}

    def run():
        try:
            devices.monitored_queue(ins, outs, mon_out)
        except zmq.ZMQError as exc:
            outcome["error"] = exc
        finally:
            for sock in (ins, outs, mon_out):
                sock.close(linger=0)

    queue = threading.Thread(target=run, daemon=True)
    queue.start()
    peers = []
    for name, addr in ((b"alice", "inproc://mq-in"), (b"bob", "inproc://mq-out")):
        peer = ctx.socket(zmq.DEALER)
        peer.setsockopt(zmq.ROUTING_ID, name)
        peer.setsockopt(zmq.LINGER, 0)
        peer.connect(addr)
        peers.append(peer)
    mon = ctx.socket(zmq.PULL)
    mon.setsockopt(zmq.LINGER, 0)
    mon.connect("inproc://mq-mon")
    alice, bob = peers
    alice.send_multipart([b"bob", b"hi bob"])
    assert recv_within(bob, TIMEOUT_MS, multipart=True) == [b"alice", b"hi bob"]
    bob.send_multipart([b"alice", b"hi alice"])
    assert recv_within(alice, TIMEOUT_MS, multipart=True) == [b"bob", b"hi alice"]
    assert recv_within(mon, TIMEOUT_MS, multipart=True) == [b"in", b"bob", b"alice", b"hi bob"]
    assert recv_within(mon, TIMEOUT_MS, multipart=True) == [
        b"out",
        b"alice",
        b"bob",
        b"hi alice",
    ]
    for sock in (alice, bob, mon):
        sock.close()
    ctx.term()
    queue.join(JOIN_S)
    assert isinstance(outcome.get("error"), zmq.ContextTerminated)


def test_monitored_queue_refuses_a_text_prefix(make):
    sockets = [make(zmq.PAIR), make(zmq.PAIR), make(zmq.PUB)]
    with pytest.raises(TypeError):
        devices.monitored_queue(*sockets, in_prefix="in")


def test_process_proxy_forwards_from_its_own_process(make):
    device = devices.ProcessProxy(zmq.PULL, zmq.PUSH, zmq.PUSH)
    ports = [device.bind_in_to_random_port("tcp://127.0.0.1")]
    ports.append(device.bind_out_to_random_port("tcp://127.0.0.1"))
    ports.append(device.bind_mon_to_random_port("tcp://127.0.0.1"))
    device.start()
    try:
        push, pull, mon = make(zmq.PUSH), make(zmq.PULL), make(zmq.PULL)
        for sock, port in zip((push, pull, mon), ports, strict=True):
            sock.connect(tcp(port))
        push.send(b"across processes")
        assert recv_within(pull, 20_000) == b"across processes"  # the process starts first
        assert recv_within(mon, TIMEOUT_MS) == b"across processes"
    finally:
        device.launcher.terminate()
        device.join(JOIN_S)
    assert device.launcher.exitcode is not None


def test_libzmq_peers_through_a_thread_device(lmake):
    device = devices.ThreadDevice(zmq.QUEUE, zmq.ROUTER, zmq.DEALER)
    front = tcp(device.bind_in_to_random_port("tcp://127.0.0.1"))
    back = tcp(device.bind_out_to_random_port("tcp://127.0.0.1"))
    background(device)
    worker, client = lmake(zmq.REP), lmake(zmq.REQ)
    worker.connect(back)
    client.connect(front)
    client.send(b"from libzmq")
    assert worker.recv() == b"from libzmq"
    worker.send(b"to libzmq")
    assert client.recv() == b"to libzmq"
    worker.close()
    client.close()
    stop(device)
