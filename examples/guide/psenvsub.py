"""Pub-sub envelope subscriber (chapter 2, "Pub-Sub Message Envelopes").

Subscribes to the "B" key only: the filter matches the envelope frame, and a message is
delivered whole (key and content) or not at all.
"""

import argparse

import zmq  # pyzmq code: on brokerless through `python -m brokerless.compat.as_zmq`


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connect", default="tcp://localhost:5563")
    parser.add_argument("--messages", type=int, default=5)
    args = parser.parse_args()

    context = zmq.Context()
    subscriber = context.socket(zmq.SUB)
    subscriber.connect(args.connect)
    subscriber.subscribe(b"B")

    for _ in range(args.messages):
        address, contents = subscriber.recv_multipart()
        print(f"[{address.decode()}] {contents.decode()}")
    subscriber.close()
    context.term()


if __name__ == "__main__":
    main()
