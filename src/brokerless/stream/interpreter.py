"""Two interpreter settings of a worker's process while the worker runs: the pace of CPython's
cyclic garbage collector (``Config.worker_gc_threshold``) and the GIL's switch interval
(``Config.worker_switch_interval``).

The collector: a worker makes and drops several container objects for every tuple it moves
(the lists and dicts it decodes from its peers' batches, Tuple objects, queue entries), and
what it holds at any moment includes large containers (batches, queues).  At CPython's default
threshold the collector runs a generation-0 collection every 700 net allocations, every few
hundred tuples, and walks those containers each time: in a busy worker of a two-process
topology, about 7 % of the process's CPU (BENCHMARKS.md, *Stream layer*).  A higher threshold
makes collections rarer; a worker's cycles are few, so the garbage it holds in between stays
small.

The switch interval: a worker's threads -- the shared executor thread, the link's sender and
receiver, the I/O thread -- hand work to each other, and a thread handed work runs only once it
has the GIL: when the thread holding it blocks, or has held it for the switch interval
(CPython's default, 5 ms) and is asked to let go.  A tuple crossing workers changes threads
about four times (two in each worker), and so do the acks of its tree on their way back, so a
busy executor thread stretched every tree's complete latency, and a topology whose spouts may
have only ``max_spout_pending`` tuples in flight went at that latency's pace: a two-worker
topology on two CPUs ran up to 1.34 times the tuples per second at 2 ms (its complete latency
from ~13 to ~10 ms), and 1 ms gained less (1.02 to 1.14 times: it switches more often); with
the earlier placement, when a worker was at its CPU's limit, 1 ms was level and 20 ms starved
the link (0.78; BENCHMARKS.md, *Stream layer*).

Only a worker's own process is changed (a worker process, or a Spark task while it runs,
restored after); local mode runs in the caller's process and leaves it alone.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def worker_interpreter(gc_threshold: int | None, switch_interval: float | None) -> Iterator[None]:
    """Run the body with generation 0's collection threshold at ``gc_threshold`` (the older
    generations' are kept) and the GIL's switch interval at ``switch_interval`` seconds, then
    restore what each was; None leaves that one alone."""
    thresholds = gc.get_threshold()
    interval = sys.getswitchinterval()
    try:
        if gc_threshold is not None:
            gc.set_threshold(gc_threshold, *thresholds[1:])
        if switch_interval is not None:
            sys.setswitchinterval(float(switch_interval))
        yield
    finally:
        if gc_threshold is not None:
            gc.set_threshold(*thresholds)
        if switch_interval is not None:
            sys.setswitchinterval(interval)
