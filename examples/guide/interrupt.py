"""Shutting down cleanly on Ctrl-C (chapter 2, "Handling Interrupt Signals").

Blocks in recv on a REP socket; Ctrl-C (SIGINT) interrupts it with KeyboardInterrupt, and the
program closes its socket and terminates its context before it exits.
"""

import argparse

import zmq  # pyzmq code: on brokerless through `python -m brokerless.compat.as_zmq`


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bind", default="tcp://*:5558")
    args = parser.parse_args()

    context = zmq.Context()
    socket = context.socket(zmq.REP)
    socket.bind(args.bind)
    try:
        print("Waiting for a request; Ctrl-C to stop", flush=True)
        socket.recv()
    except KeyboardInterrupt:
        print("W: interrupt received, stopping...")
    finally:
        socket.close()
        context.term()


if __name__ == "__main__":
    main()
