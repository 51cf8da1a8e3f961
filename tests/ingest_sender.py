"""A sender process for the acknowledged-ingestion tests: ``python -m tests.ingest_sender
ENDPOINT JOURNAL TOTAL [RATE]`` sends messages whose payload is their number (as text), in
batches, with a ReliableSender on JOURNAL, until TOTAL (at most RATE messages a second),
printing ``sent N`` after each batch; then waits for every acknowledgement and prints
``done``.  Started again on the same journal, it goes
on where the journal says -- which is what a test that SIGKILLs it at any moment relies on."""

from __future__ import annotations

import sys
import threading
import time

from brokerless.spark.ingest import ReliableSender

BATCH = 25


def main(endpoint: str, journal: str, total: int, rate: float | None = None) -> int:
    pace = threading.Event()  # never set: waits out the time a batch may take at RATE
    began = time.monotonic()
    with ReliableSender(endpoint, journal=journal, timeout=0.5) as sender:
        first_now = sender.next_seq
        while sender.next_seq <= total:
            first = sender.next_seq
            if rate is not None:
                pace.wait(max(0.0, began + (first - first_now) / rate - time.monotonic()))
            last = min(total, first + BATCH - 1)
            sender.send_many([b"%d" % n for n in range(first, last + 1)])
            print(f"sent {last}", flush=True)
        if not sender.flush(timeout=300):
            print(f"not acknowledged: {sender.unacknowledged}", flush=True)
            return 1
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    rate = float(sys.argv[4]) if len(sys.argv) > 4 else None
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), rate))
