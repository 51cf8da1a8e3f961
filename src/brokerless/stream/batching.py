"""streamparse's batching bolts: tuples grouped by key, processed a batch at a time.

Theory of operation
-------------------
``process`` puts each tuple in the batch of its ``group_key``; every
``ticks_between_batches``-th tick tuple runs ``process_batch(key, tuples)`` for each batch
(:class:`BatchingBolt`; the ticks come at the bolt's tick frequency, its declaration's or the
Config's), or each tick at the bolt's own ``secs_between_batches`` does
(:class:`TicklessBatchingBolt`; there is no timer thread here: the executor ticks the bolt).
Emits made in ``process_batch`` are anchored to the batch's tuples (``auto_anchor``), the
tuples are acked when it returns (``auto_ack``) and failed when it raises (``auto_fail``); the
other batches are processed all the same, and the first error is raised after them, so the
executor reports it (and a checkpointed topology rolls back).

The executor's side (``bolt_executor.py``, as for every ``BufferingBolt``): it does not ack a
tuple when ``process`` returns (the batch holds it), and counts the bolt as not done while
batches hold tuples (a run to completion waits for the next batch); in a checkpointed topology
it processes the batches before a barrier passes the bolt (``stateful.py``), so every tuple
that came before a checkpoint's barrier is processed within that checkpoint.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, ClassVar

from .component import BufferingBolt
from .config import tick_problem
from .tuple import Tuple

if TYPE_CHECKING:
    from .config import Config

__all__ = ["BatchingBolt", "TicklessBatchingBolt"]


class BatchingBolt(BufferingBolt):
    """Groups tuples into batches between tick tuples, then processes each batch at once
    (streamparse's ``BatchingBolt``): implement ``process_batch`` and, to get one batch per
    key, ``group_key``.  The bolt needs tick tuples: set
    ``Topology.bolt(..., tick_tuple_freq_secs=)`` or ``Config.tick_tuple_freq_secs``, or use
    :class:`TicklessBatchingBolt`.  Do not override ``process`` or ``process_tick``."""

    # auto_ack, auto_anchor and auto_fail apply to a batch's tuples and ``process_batch``.

    #: Process the batches at every this many tick tuples.
    ticks_between_batches: ClassVar[int] = 1

    _batches: dict[Hashable, list[Tuple]] | None = None
    _ticks = 0

    def group_key(self, tup: Tuple) -> Hashable:
        """The batch ``tup`` goes in (default: one batch for every tuple)."""
        return None

    def process_batch(self, key: Hashable, tups: list[Tuple]) -> None:
        """Process the tuples that came for ``key`` since the last batch, in order."""
        raise NotImplementedError(f"{type(self).__name__} must implement process_batch()")

    @property
    def holding(self) -> bool:
        return bool(self._batches)

    def resolve_tick_secs(self, declared: float | None, config: Config) -> float | None:
        n = self.ticks_between_batches
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"ticks_between_batches must be an integer >= 1, not {n!r}")
        tick = super().resolve_tick_secs(declared, config)
        if tick is None:
            raise ValueError(
                "it is a BatchingBolt, which processes its batches on tick tuples, and it gets "
                "none: pass .bolt(..., tick_tuple_freq_secs=SECONDS) or "
                "Config(tick_tuple_freq_secs=SECONDS), or make it a TicklessBatchingBolt "
                "(secs_between_batches)"
            )
        return tick

    def process(self, tup: Tuple) -> None:
        batches = self._batches
        if batches is None:
            batches = self._batches = {}
        key = self.group_key(tup)
        batch = batches.get(key)
        if batch is None:
            batches[key] = [tup]
        else:
            batch.append(tup)

    def process_tick(self, tup: Tuple) -> None:
        self._ticks += 1
        if self._ticks >= self.ticks_between_batches:
            self._ticks = 0
            self.process_batches()

    def process_batches(self) -> None:
        """Process every batch now (also called before a checkpoint's barrier passes)."""
        batches, self._batches = self._batches, None
        if not batches:
            return
        first_error: Exception | None = None
        for key, tups in batches.items():
            self._anchors = tups
            try:
                self.process_batch(key, tups)
            except Exception as exc:
                if self.auto_fail:
                    for tup in tups:
                        self.fail(tup)
                if first_error is None:
                    first_error = exc
                else:
                    self.report_error(exc)
            else:
                if self.auto_ack:
                    for tup in tups:
                        self.ack(tup)
            finally:
                self._anchors = None
        if first_error is not None:
            raise first_error


class TicklessBatchingBolt(BatchingBolt):
    """A :class:`BatchingBolt` whose batches are processed every ``secs_between_batches``
    (streamparse's ``TicklessBatchingBolt``), whatever the topology's tick tuples: that is its
    own tick frequency (a ``Topology.bolt(..., tick_tuple_freq_secs=)`` still wins)."""

    #: Seconds between two rounds of batches.
    secs_between_batches: ClassVar[float] = 2.0

    def resolve_tick_secs(self, declared: float | None, config: Config) -> float | None:
        secs = self.secs_between_batches
        problem = tick_problem(secs) or ("must not be None" if secs is None else None)
        if problem is not None:
            raise ValueError(f"secs_between_batches {problem}")
        return secs if declared is None else declared
