"""Weather update server (chapter 1's, as chapter 2 builds on it).

Publishes random weather updates, "zipcode temperature humidity", then the end marker "END".
It publishes on an XPUB -- a PUB that also hands over the subscriptions it gets -- so that it can
wait for its subscribers first (``--subscribers``: that many distinct zipcodes subscribed;
every subscriber also subscribes to END, before its zipcode): none misses an update or the end.
"""

import argparse
from collections import Counter
from random import randrange

import zmq  # pyzmq code: on brokerless through `python -m brokerless.compat.as_zmq`


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bind", default="tcp://*:5556")
    parser.add_argument("--updates", type=int, default=100_000)
    parser.add_argument("--zipcodes", type=int, default=100_000, help="zipcodes 1 to this")
    parser.add_argument("--subscribers", type=int, default=1, help="zipcodes to wait for")
    args = parser.parse_args()

    context = zmq.Context()
    socket = context.socket(zmq.XPUB)
    socket.bind(args.bind)

    wanted = set()
    while len(wanted) < args.subscribers:
        event = socket.recv()
        if event[0] == 1 and event[1:] != b"END":  # b"\x01" + topic: a subscription
            wanted.add(event[1:].decode().strip())

    sent = Counter()
    for _ in range(args.updates):
        zipcode = f"{randrange(1, args.zipcodes + 1):05d}"
        temperature = randrange(-80, 135)
        relhumidity = randrange(10, 60)
        socket.send_string(f"{zipcode} {temperature} {relhumidity}")
        sent[zipcode] += 1
    socket.send(b"END")
    for zipcode in sorted(wanted):
        print(f"Sent {sent[zipcode]} updates for zipcode '{zipcode}'")
    socket.close()
    context.term()


if __name__ == "__main__":
    main()
