"""Request-reply client (chapter 2, "The Shared Queue Problem").

Connects a REQ socket to the broker's frontend and sends its requests one at a time, printing
each reply.
"""

import argparse

import zmq  # pyzmq code: on brokerless through `python -m brokerless.compat.as_zmq`


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connect", default="tcp://localhost:5559", help="the broker's frontend")
    parser.add_argument("--requests", type=int, default=10)
    args = parser.parse_args()

    context = zmq.Context()
    socket = context.socket(zmq.REQ)
    socket.connect(args.connect)
    for request in range(1, args.requests + 1):
        socket.send(b"Hello")
        message = socket.recv()
        print(f"Received reply {request} [{message.decode()}]")
    socket.close()
    context.term()


if __name__ == "__main__":
    main()
