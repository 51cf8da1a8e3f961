"""Pub-sub envelope publisher (chapter 2, "Pub-Sub Message Envelopes").

Publishes two-part messages whose first frame, the envelope, holds the key: "A" messages no
subscriber wants and "B" ones they do.  It waits for its first subscription (an XPUB hands it
over) so that the subscriber misses none.
"""

import argparse

import zmq  # pyzmq code: on brokerless through `python -m brokerless.compat.as_zmq`


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bind", default="tcp://*:5563")
    parser.add_argument("--messages", type=int, default=5, help="of each kind")
    args = parser.parse_args()

    context = zmq.Context()
    publisher = context.socket(zmq.XPUB)
    publisher.bind(args.bind)
    publisher.recv()  # the first subscription

    for _ in range(args.messages):
        publisher.send_multipart([b"A", b"We don't want to see this"])
        publisher.send_multipart([b"B", b"We would like to see this"])
    publisher.close()
    context.term()


if __name__ == "__main__":
    main()
