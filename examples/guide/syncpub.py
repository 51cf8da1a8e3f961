"""Synchronized publisher (chapter 2, "Node Coordination").

Waits until the expected number of subscribers have confirmed, over REQ-REP, that they
receive its messages, then publishes its updates and "END".  To know that a subscription is in
force without sleeping, it uses the chapter's "more robust model": until everyone has
confirmed it publishes "HELLO" messages, and a subscriber confirms once it got one.
"""

import argparse

import zmq  # pyzmq code: on brokerless through `python -m brokerless.compat.as_zmq`


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--publish", default="tcp://*:5561")
    parser.add_argument("--sync", default="tcp://*:5562")
    parser.add_argument("--subscribers", type=int, default=10)
    parser.add_argument("--updates", type=int, default=1_000_000)
    args = parser.parse_args()

    context = zmq.Context()
    publisher = context.socket(zmq.PUB)
    publisher.sndhwm = 0  # no high-water mark: not one update may be dropped
    publisher.bind(args.publish)
    syncservice = context.socket(zmq.REP)
    syncservice.bind(args.sync)

    subscribers = 0
    while subscribers < args.subscribers:
        publisher.send(b"HELLO")
        if syncservice.poll(10):  # a confirmation, or say hello again in 10 ms
            syncservice.recv()
            syncservice.send(b"")
            subscribers += 1

    for _ in range(args.updates):
        publisher.send(b"Rhubarb")
    publisher.send(b"END")
    print(f"Published {args.updates} updates to {subscribers} subscribers")
    publisher.close()
    syncservice.close()
    context.term()


if __name__ == "__main__":
    main()
