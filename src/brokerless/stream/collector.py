"""The pace of CPython's cyclic garbage collector in a worker's process
(``Config.worker_gc_threshold``).

A worker makes and drops several container objects for every tuple it moves (the lists and
dicts it decodes from its peers' batches, Tuple objects, queue entries), and what it holds at
any moment includes large containers (batches, queues).  At CPython's default threshold the
collector runs a generation-0 collection every 700 net allocations, every few hundred tuples,
and walks those containers each time: in a busy worker of a two-process topology, about 7 %
of the process's CPU (BENCHMARKS.md, *Stream layer*).  A higher threshold makes collections
rarer; a worker's cycles are few, so the garbage it holds in between stays small.

Only a worker's own process is changed (a worker process, or a Spark task while it runs,
restored after); local mode runs in the caller's process and leaves its collector alone.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_threshold(threshold: int | None) -> Iterator[None]:
    """Run the body with generation 0's collection threshold at ``threshold`` (the older
    generations' are kept), then restore the thresholds before; None changes nothing."""
    if threshold is None:
        yield
        return
    before = gc.get_threshold()
    gc.set_threshold(threshold, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
