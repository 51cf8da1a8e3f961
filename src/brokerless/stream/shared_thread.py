"""One thread for every executor of a worker (``Config.executor_threads == "shared"``, the
default).

Theory of operation
-------------------
Under CPython's GIL the executor threads of a worker never run Python at the same time, so a
thread per executor buys no parallelism; what it costs is the hand-over, every batch passing
from one thread to the next through the GIL (about a third of a local topology's CPU time, and
most of its latency: BENCHMARKS.md).  This thread runs the executors in turn instead, consumers
first and spouts last: each :meth:`~.executor.Executor.step` handles what its queue holds
without waiting (a spout's also calls ``next_tuple``) and says when it wants to run again.
When no executor had anything to do the thread sleeps on one Event, the *bell*, which every
queue of the worker and its credits set when something arrives, until the soonest time an
executor asked for.  The bell is cleared before a round, so whatever arrives during the round
wakes the next wait at once.

Nothing may wait inside a step -- the thread that would end the wait is this one.  So the
executors' outboxes never wait (``Outbox(waits=False)``): local tuples go into a full queue past
its bound, and tuples for another worker that find no credits stay in the outbox (``held``),
flushed again each round.  The waiting is done here instead: an executor whose outbox is
``blocked`` (it holds tuples, or a queue it puts into with back pressure is full) is not
stepped until that changes -- as its own thread would have waited in that put.  The waits
therefore go only downstream, as in ``worker.py``'s design: a full queue is drained in the same
round by its executor (or that one waits downstream in turn), credits come back through the
receiver thread, which rings the bell, and edges inside a cycle of bolts never block.  A queue
exceeds its bound by at most one step's output of each executor that puts into it.

What it gives up is Storm's isolation of executors: a component that blocks (sleeps, waits on
I/O) holds up every executor of its worker.  ``executor_threads="per_executor"`` gives each
executor its own thread back.

An executor ends here as in a thread of its own (:meth:`~.executor.Executor.end`, then
``close``): when it raises, stops, or its queue is closed; the thread ends with the last one.
What escapes an executor's ``close`` ends it as a crash, never the thread.  Items whose output
an outbox holds count as handled only once it is out (``Executor.flush_held``): until then
the completion detector sees work in progress.
"""

from __future__ import annotations

import threading
from typing import Any

from .component import ComponentKind
from .executor import Executor


class SharedThread:
    """The one thread that runs ``executors`` (of one worker), woken by ``bell``."""

    def __init__(self, name: str, executors: list[Executor[Any]], bell: threading.Event) -> None:
        # consumers first, spouts last: a round drains before it adds
        self.executors = sorted(executors, key=lambda e: e.kind is ComponentKind.SPOUT)
        self.bell = bell
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        live = [e for e in self.executors if self._open(e)]
        bell = self.bell
        while live:
            bell.clear()
            busy = False
            soonest: float | None = None
            for executor in live:
                if executor.stopping:  # (checked first: a blocked executor is not stepped)
                    self._end(executor, live, None)
                    break
                try:
                    if executor.outbox.held and executor.flush_held():
                        continue
                    if executor.outbox.blocked:
                        continue
                    pause = executor.step()
                except BaseException as exc:
                    self._end(executor, live, exc)
                    break  # (live changed)
                if pause == 0:
                    busy = True
                elif pause is not None and (soonest is None or pause < soonest):
                    soonest = pause
            else:
                if not busy:
                    bell.wait(soonest)

    @staticmethod
    def _open(executor: Executor[Any]) -> bool:
        try:
            executor.open()
        except BaseException as exc:
            executor.end(exc)
            executor.finish()
            return False
        return True

    @staticmethod
    def _end(executor: Executor[Any], live: list[Executor[Any]], exc: BaseException | None) -> None:
        live.remove(executor)
        if exc is not None:
            executor.end(exc)
        executor.finish()
