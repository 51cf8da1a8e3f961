"""Multithreaded relay (chapter 2, "Signaling Between Threads").

Three threads hand a signal down a relay over PAIR sockets on inproc: each binds, starts the
next, and waits for its signal -- an empty message -- before passing one on.
"""

import threading

import zmq  # pyzmq code: on brokerless through `python -m brokerless.compat.as_zmq`


def step1(context) -> None:
    """Signal step 2 that step 1 is ready."""
    sender = context.socket(zmq.PAIR)
    sender.connect("inproc://step2")
    sender.send(b"")
    sender.close()


def step2(context) -> None:
    """Wait for step 1, then signal step 3."""
    receiver = context.socket(zmq.PAIR)
    receiver.bind("inproc://step2")
    thread = threading.Thread(target=step1, args=(context,))
    thread.start()
    receiver.recv()
    receiver.close()
    thread.join()
    sender = context.socket(zmq.PAIR)
    sender.connect("inproc://step3")
    sender.send(b"")
    sender.close()


def main() -> None:
    context = zmq.Context.instance()
    receiver = context.socket(zmq.PAIR)
    receiver.bind("inproc://step3")
    thread = threading.Thread(target=step2, args=(context,))
    thread.start()
    receiver.recv()
    receiver.close()
    thread.join()
    print("Test successful!")
    context.term()


if __name__ == "__main__":
    main()
