"""Request-reply broker (chapter 2, "The Shared Queue Problem").

Binds a ROUTER for clients and a DEALER for workers and shuttles whole multipart messages
between them with a Poller: requests are spread over the workers, replies find their client by
the envelope the ROUTER put in front of the request.
"""

import argparse

import zmq  # pyzmq code: on brokerless through `python -m brokerless.compat.as_zmq`


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frontend", default="tcp://*:5559", help="where clients connect")
    parser.add_argument("--backend", default="tcp://*:5560", help="where workers connect")
    parser.add_argument("--replies", type=int, help="stop after this many (default: Ctrl-C)")
    args = parser.parse_args()

    context = zmq.Context()
    frontend = context.socket(zmq.ROUTER)
    backend = context.socket(zmq.DEALER)
    frontend.bind(args.frontend)
    backend.bind(args.backend)

    poller = zmq.Poller()
    poller.register(frontend, zmq.POLLIN)
    poller.register(backend, zmq.POLLIN)
    replies = 0
    while args.replies is None or replies < args.replies:
        socks = dict(poller.poll())
        if socks.get(frontend) == zmq.POLLIN:
            backend.send_multipart(frontend.recv_multipart())
        if socks.get(backend) == zmq.POLLIN:
            frontend.send_multipart(backend.recv_multipart())
            replies += 1
    print(f"Forwarded {replies} replies")
    frontend.close()
    backend.close()
    context.term()


if __name__ == "__main__":
    main()
