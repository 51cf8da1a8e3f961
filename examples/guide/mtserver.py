"""Multithreaded Hello World server (chapter 2, "Multithreading with ZeroMQ").

A ROUTER for clients over tcp, a DEALER for worker threads over inproc, and ``zmq.proxy``
between them; each worker is a REP socket in its own thread, sharing the process's context.
Terminating the context ends the workers: their blocked recv raises ContextTerminated.
Clients: ``rrclient.py --connect tcp://localhost:5555``.
"""

import argparse
import threading

import zmq  # pyzmq code: on brokerless through `python -m brokerless.compat.as_zmq`
from zhelpers import nth_message, proxy_until


def worker_routine(worker_url: str, context) -> None:
    """A worker: a REP socket answering "World" until the context is terminated."""
    socket = context.socket(zmq.REP)
    socket.connect(worker_url)
    try:
        while True:
            string = socket.recv()
            print(f"Received request: [{string.decode()}]")
            socket.send(b"World")
    except zmq.ContextTerminated:
        pass  # the server is shutting down
    finally:
        socket.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bind", default="tcp://*:5555", help="where clients connect")
    parser.add_argument("--workers", type=int, default=5)
    parser.add_argument(
        "--requests", type=int, help="stop after this many round trips (default: Ctrl-C)"
    )
    args = parser.parse_args()
    url_worker = "inproc://workers"

    context = zmq.Context.instance()
    clients = context.socket(zmq.ROUTER)
    clients.bind(args.bind)
    workers = context.socket(zmq.DEALER)
    workers.bind(url_worker)

    threads = [
        threading.Thread(target=worker_routine, args=(url_worker, context))
        for _ in range(args.workers)
    ]
    for thread in threads:
        thread.start()

    proxy_until(clients, workers, None if args.requests is None else nth_message(2 * args.requests))

    clients.close()
    workers.close()
    context.term()
    for thread in threads:
        thread.join()
    print("Server stopped")


if __name__ == "__main__":
    main()
