"""Request-reply worker (chapter 2, "The Shared Queue Problem").

Connects a REP socket to the broker's backend and answers every request with "World".
"""

import argparse

import zmq  # pyzmq code: on brokerless through `python -m brokerless.compat.as_zmq`


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connect", default="tcp://localhost:5560", help="the broker's backend")
    parser.add_argument("--requests", type=int, help="stop after this many (default: Ctrl-C)")
    args = parser.parse_args()

    context = zmq.Context()
    socket = context.socket(zmq.REP)
    socket.connect(args.connect)
    served = 0
    while args.requests is None or served < args.requests:
        message = socket.recv()
        print(f"Received request: [{message.decode()}]")
        socket.send(b"World")
        served += 1
    socket.close()
    context.term()


if __name__ == "__main__":
    main()
