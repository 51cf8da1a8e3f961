"""streamparse's component classes (its ``Spout``, ``Bolt``, ``BatchingBolt``, ...), running
on brokerless: a streamparse project changes its imports and nothing else.

Theory of operation
-------------------
A streamparse component (pystorm's, underneath) does what a brokerless one does under other
names, so these classes only translate:

* set-up is ``initialize(storm_conf, context)``; before it, the attributes streamparse sets
  from Storm's handshake are there: ``topology_name``, ``task_id``, ``component_name``,
  ``debug``, ``storm_conf`` (a dict of Storm's names: the topology's settings and the
  user's own keys), ``context`` (the :class:`~brokerless.stream.component.TopologyContext`)
  and ``pid``.  ``open``/``prepare`` call it; a class that overrides them instead works too;
* ``Spout.emit(tup, tup_id=None, stream=None, direct_task=None, need_task_ids=False)`` and
  ``Bolt.emit(tup, stream=None, anchors=None, direct_task=None, need_task_ids=False)``: the
  message id is ``tup_id``, a bolt's stream comes before its anchors, None is the default
  stream, and the task ids come back only when asked for;
* ``raise_exception(exception, tup=None)`` reports an error, ``is_tick(tup)`` tells tick
  tuples.

What the classes do not translate is brokerless's own and inherited: acking (``auto_ack``,
``auto_anchor``, ``auto_fail``), ticks (``process_tick``), batches, ``logger``/``log``.  The
batching bolts keep their anchoring to the batch: the emits here call brokerless's ``emit``
through ``super()``, which for them is ``BufferingBolt``'s.  pystorm's ``ReliableSpout``
(failed tuples emitted again, up to ``max_fails`` times, then taken for acked) is here too.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from . import batching, component
from .component import DEFAULT_STREAM, TopologyContext
from .config import Config, storm_conf
from .tuple import Tuple

__all__ = ["BatchingBolt", "Bolt", "ReliableSpout", "Spout", "TicklessBatchingBolt"]


class _Handshake(component.Component):
    """What streamparse sets before ``initialize``, and its helpers (see the module doc)."""

    topology_name: str
    task_id: int
    component_name: str
    debug: bool
    storm_conf: Mapping[str, Any]
    context: TopologyContext
    pid: int

    def _handshake(self, conf: Config, context: TopologyContext) -> None:
        self.topology_name = context.topology
        self.task_id = context.task_id
        self.component_name = context.component_id
        self.storm_conf = settings = storm_conf(conf, context.topology)
        self.debug = bool(settings.get("topology.debug"))
        self.context = context
        self.pid = os.getpid()
        self.initialize(settings, context)

    def initialize(self, storm_conf: Mapping[str, Any], context: TopologyContext) -> None:
        """Called once per task before anything else (streamparse's set-up)."""

    def raise_exception(self, exception: BaseException, tup: Tuple | None = None) -> None:
        """Report ``exception`` in the topology's error log (streamparse's)."""
        self.report_error(exception)

    @staticmethod
    def is_tick(tup: Tuple) -> bool:
        """Whether ``tup`` is a tick tuple."""
        return tup.component == "__system" and tup.stream == "__tick"


class Spout(_Handshake, component.Spout):
    """streamparse's ``Spout``: implement ``initialize`` and ``next_tuple``; ``ack(tup_id)``
    and ``fail(tup_id)`` as brokerless's."""

    def open(self, conf: Config, context: TopologyContext) -> None:
        self._handshake(conf, context)

    def emit(  # type: ignore[override]  # (streamparse's signature: the module doc)
        self,
        tup: Sequence[Any],
        tup_id: Any = None,
        stream: str | None = None,
        direct_task: int | None = None,
        need_task_ids: bool = False,
    ) -> list[int] | None:
        """Emit ``tup``; with ``tup_id`` it is tracked (acked or failed back by that id)."""
        tasks = super().emit(tup, stream or DEFAULT_STREAM, tup_id, direct_task)
        return tasks if need_task_ids else None


class ReliableSpout(Spout):
    """pystorm's ``ReliableSpout``: every emit needs a ``tup_id``; a failed tuple is emitted
    again, up to ``max_fails`` times, then taken for acked (and logged)."""

    max_fails: ClassVar[int] = 3

    def open(self, conf: Config, context: TopologyContext) -> None:
        self.failed_tuples: Counter[Any] = Counter()
        self.unacked_tuples: dict[Any, tuple[Sequence[Any], str | None, int | None]] = {}
        super().open(conf, context)

    def emit(  # type: ignore[override]  # (streamparse's signature: the module doc)
        self,
        tup: Sequence[Any],
        tup_id: Any = None,
        stream: str | None = None,
        direct_task: int | None = None,
        need_task_ids: bool = False,
    ) -> list[int] | None:
        if tup_id is None:
            raise ValueError(
                "a ReliableSpout emits with a tup_id (emit(tup, tup_id=...)), or it could not "
                "emit the tuple again when it fails"
            )
        self.unacked_tuples[tup_id] = (tup, stream, direct_task)
        return super().emit(tup, tup_id, stream, direct_task, need_task_ids)

    def ack(self, tup_id: Any) -> None:
        self.failed_tuples.pop(tup_id, None)
        if self.unacked_tuples.pop(tup_id, None) is None:
            self.logger.error("ack of an unknown tuple id: %r", tup_id)

    def fail(self, tup_id: Any) -> None:
        emitted = self.unacked_tuples.get(tup_id)
        if emitted is None:
            self.logger.error("fail of an unknown tuple id: %r", tup_id)
        elif self.failed_tuples[tup_id] < self.max_fails:
            self.failed_tuples[tup_id] += 1
            tup, stream, direct_task = emitted
            self.emit(tup, tup_id, stream, direct_task)
        else:
            self.logger.info("tuple id %r failed %d times: taken for acked", tup_id, self.max_fails)
            self.ack(tup_id)


class Bolt(_Handshake, component.Bolt):
    """streamparse's ``Bolt``: implement ``initialize`` and ``process``."""

    def prepare(self, conf: Config, context: TopologyContext) -> None:
        self._handshake(conf, context)

    def emit(  # type: ignore[override]  # (streamparse's signature: the module doc)
        self,
        tup: Sequence[Any],
        stream: str | None = None,
        anchors: Tuple | Sequence[Tuple] | None = None,
        direct_task: int | None = None,
        need_task_ids: bool = False,
    ) -> list[int] | None:
        """Emit ``tup``, anchored to ``anchors`` (by default, as brokerless's ``emit``)."""
        tasks = super().emit(tup, anchors, stream or DEFAULT_STREAM, direct_task)
        return tasks if need_task_ids else None


class BatchingBolt(Bolt, batching.BatchingBolt):  # type: ignore[misc]  # (emit: the doc)
    """streamparse's ``BatchingBolt``: implement ``initialize``, ``group_key`` and
    ``process_batch``; what a batch emits is anchored to its tuples."""


class TicklessBatchingBolt(Bolt, batching.TicklessBatchingBolt):  # type: ignore[misc]
    """streamparse's ``TicklessBatchingBolt``: a batch every ``secs_between_batches``."""
