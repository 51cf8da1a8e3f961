"""Synchronized subscriber (chapter 2, "Node Coordination").

Subscribes to everything, waits for the publisher's first message (so the subscription is in
force), confirms over REQ-REP, then counts the updates until "END".
"""

import argparse

import zmq  # pyzmq code: on brokerless through `python -m brokerless.compat.as_zmq`


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connect", default="tcp://localhost:5561")
    parser.add_argument("--sync", default="tcp://localhost:5562")
    args = parser.parse_args()

    context = zmq.Context()
    subscriber = context.socket(zmq.SUB)
    subscriber.connect(args.connect)
    subscriber.subscribe(b"")
    subscriber.recv()  # a HELLO: the publisher now sends us what it publishes

    syncclient = context.socket(zmq.REQ)
    syncclient.connect(args.sync)
    syncclient.send(b"")  # synchronization request
    syncclient.recv()  # wait for the go-ahead

    updates = 0
    while (message := subscriber.recv()) != b"END":
        if message != b"HELLO":  # sent before every subscriber had confirmed
            updates += 1
    print(f"Received {updates} updates")
    subscriber.close()
    syncclient.close()
    context.term()


if __name__ == "__main__":
    main()
