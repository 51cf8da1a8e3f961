"""A short runnable tour of brokerless's messaging patterns over inproc.

Run it with ``make tour`` (or ``python examples/tour.py``).  Every section is ordinary pyzmq code
with ``import brokerless as zmq``; each prints what it shows.
"""

from __future__ import annotations

import threading
import time

import brokerless as zmq


def request_reply(ctx: zmq.Context) -> None:
    """REQ/REP: strict request-reply; a worker thread echoes in upper case."""
    rep = ctx.socket(zmq.REP)
    rep.bind("inproc://tour-reqrep")

    def worker() -> None:
        for _ in range(3):
            rep.send(rep.recv().upper())
        rep.close()

    t = threading.Thread(target=worker)
    t.start()
    with ctx.socket(zmq.REQ) as req:
        req.connect("inproc://tour-reqrep")
        for word in (b"hello", b"brokerless", b"world"):
            req.send(word)
            print(f"  REQ sent {word!r:14} got {req.recv()!r}")
    t.join()


def pipeline(ctx: zmq.Context) -> None:
    """PUSH/PULL: a ventilator spreads tasks round-robin over three workers."""
    with ctx.socket(zmq.PUSH) as push:
        push.bind("inproc://tour-pipeline")
        workers = [ctx.socket(zmq.PULL) for _ in range(3)]
        for w in workers:
            w.connect("inproc://tour-pipeline")
        for task in range(9):
            push.send_string(f"task {task}")
        for i, w in enumerate(workers):
            got = [w.recv_string() for _ in range(3)]
            print(f"  worker {i} got {got}")
            w.close()


def publish_subscribe(ctx: zmq.Context) -> None:
    """PUB/SUB: prefix filtering; the subscription is made before the publisher exists."""
    sub = ctx.socket(zmq.SUB)
    sub.subscribe(b"weather.")
    sub.connect("inproc://tour-pubsub")  # connect before bind works on inproc
    with ctx.socket(zmq.PUB) as pub:
        pub.bind("inproc://tour-pubsub")
        for topic, text in [
            (b"weather.paris", b"rain"),
            (b"sports.rugby", b"12-9"),
            (b"weather.oslo", b"snow"),
        ]:
            pub.send_multipart([topic, text])
        while sub.poll(100):
            print(f"  SUB got {sub.recv_multipart()}")
    sub.close()


def router_dealer(ctx: zmq.Context) -> None:
    """ROUTER/DEALER: the router sees each peer's routing id and answers that peer only."""
    with ctx.socket(zmq.ROUTER) as router:
        router.bind("inproc://tour-router")
        dealers = []
        for name in (b"alice", b"bob"):
            d = ctx.socket(zmq.DEALER)
            d.routing_id = name
            d.connect("inproc://tour-router")
            d.send(b"hi from " + name)
            dealers.append(d)
        for _ in dealers:
            peer, body = router.recv_multipart()
            router.send_multipart([peer, b"welcome, " + peer])
            print(f"  ROUTER got {body!r} from {peer!r}")
        for d in dealers:
            print(f"  DEALER {d.routing_id!r} got {d.recv()!r}")
            d.close()


def poller(ctx: zmq.Context) -> None:
    """Poller: wait on two sockets at once; the first ready one is served."""
    a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    a.bind("inproc://tour-poll")
    b.connect("inproc://tour-poll")
    p = zmq.Poller()
    p.register(a, zmq.POLLIN)
    p.register(b, zmq.POLLIN)
    threading.Timer(0.05, lambda: b.send(b"ping")).start()
    started = time.monotonic()
    events = dict(p.poll(1000))
    print(
        f"  after {1000 * (time.monotonic() - started):.0f} ms: "
        f"a ready={a in events}, got {a.recv()!r}"
    )
    a.close()
    b.close()


def main() -> None:
    with zmq.Context() as ctx:
        for section in (request_reply, pipeline, publish_subscribe, router_dealer, poller):
            print(f"{section.__name__}: {section.__doc__.splitlines()[0]}")
            section(ctx)
    print("tour finished")


if __name__ == "__main__":
    main()
