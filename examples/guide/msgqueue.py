"""Simple message queuing broker (chapter 2, "ZeroMQ's Built-in Proxy Function").

rrbroker's loop is what ``zmq.proxy`` does: a ROUTER for clients, a DEALER for workers, and
one call.  Use it with rrclient.py and rrworker.py.
"""

import argparse

import zmq  # pyzmq code: on brokerless through `python -m brokerless.compat.as_zmq`
from zhelpers import nth_message, proxy_until


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frontend", default="tcp://*:5559", help="where clients connect")
    parser.add_argument("--backend", default="tcp://*:5560", help="where workers connect")
    parser.add_argument(
        "--requests", type=int, help="stop after this many round trips (default: Ctrl-C)"
    )
    args = parser.parse_args()

    context = zmq.Context()
    frontend = context.socket(zmq.ROUTER)
    frontend.bind(args.frontend)
    backend = context.socket(zmq.DEALER)
    backend.bind(args.backend)

    # Start the proxy; each round trip is two messages through it, the request and the reply.
    proxy_until(
        frontend, backend, None if args.requests is None else nth_message(2 * args.requests)
    )

    print("Queue stopped")
    frontend.close()
    backend.close()
    context.term()


if __name__ == "__main__":
    main()
