"""Weather proxy (chapter 2, "The Transport Bridging Problem").

Sits between the weather server on the internal network and subscribers on an external one:
an XSUB connected to the server, an XPUB bound for the subscribers, and ``zmq.proxy`` between
them, which also carries the subscriptions upstream.  It stops once the server's END has
passed.
"""

import argparse

import zmq  # pyzmq code: on brokerless through `python -m brokerless.compat.as_zmq`
from zhelpers import proxy_until


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frontend", default="tcp://localhost:5556", help="the weather server")
    parser.add_argument("--backend", default="tcp://*:8100", help="where subscribers connect")
    args = parser.parse_args()

    context = zmq.Context()
    frontend = context.socket(zmq.XSUB)  # where the weather server sits
    frontend.connect(args.frontend)
    backend = context.socket(zmq.XPUB)  # public endpoint for subscribers
    backend.bind(args.backend)

    proxy_until(frontend, backend, lambda message: message == [b"END"])

    print("Weather proxy stopped after END")
    frontend.close()
    backend.close()
    context.term()


if __name__ == "__main__":
    main()
