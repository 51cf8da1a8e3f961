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
  tuples;
* a bolt's ``tup.values`` is a namedtuple of its stream's fields (``tup.values.word``), as
  streamparse makes it: the class's own ``process`` is wrapped when the class is made
  (``__init_subclass__``) to turn the plain tuple into one (a type per source stream, made
  once), which costs a call and a namedtuple a tuple -- these classes' bolts only.

What the classes do not translate is brokerless's own and inherited: acking (``auto_ack``,
``auto_anchor``, ``auto_fail``), ticks (``process_tick``), batches, ``logger``/``log``.  The
batching bolts keep their anchoring to the batch: the emits here call brokerless's ``emit``
through ``super()``, which for them is ``BufferingBolt``'s.  pystorm's ``ReliableSpout``
(failed tuples emitted again, up to ``max_fails`` times, then taken for acked) is here too.
"""

from __future__ import annotations

import functools
import os
import re
from collections import Counter, namedtuple
from collections.abc import Callable, Iterable, Mapping, Sequence
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


#: The namedtuple type of each (component, stream, fields) a bolt here has received.
_NAMED: dict[tuple[str, str, tuple[str, ...]], Callable[[Iterable[Any]], tuple[Any, ...]]] = {}


def _name_values(tup: Tuple) -> None:
    """``tup.values`` as a namedtuple of its stream's fields (see the module doc)."""
    key = (tup.component, tup.stream, tup.fields)
    make = _NAMED.get(key)
    if make is None:
        name = re.sub(r"\W|^(?=\d)", "_", f"{tup.component}_{tup.stream}_tuple")
        named: Any = namedtuple(name, tup.fields, rename=True)  # type: ignore[misc]  # (run time)
        make = _NAMED[key] = named._make
    tup.values = make(tup.values)


def _with_named_values(process: Callable[[Any, Tuple], None]) -> Callable[[Any, Tuple], None]:
    @functools.wraps(process)
    def named(self: Any, tup: Tuple) -> None:
        _name_values(tup)
        process(self, tup)

    named.names_values = True  # type: ignore[attr-defined]
    return named


class Bolt(_Handshake, component.Bolt):
    """streamparse's ``Bolt``: implement ``initialize`` and ``process``."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("process")
        if own is not None and not getattr(own, "names_values", False):
            cls.process = _with_named_values(own)  # type: ignore[method-assign,assignment]

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

    def process(self, tup: Tuple) -> None:  # (wrapped, as a subclass's: the module doc)
        batching.BatchingBolt.process(self, tup)


class TicklessBatchingBolt(BatchingBolt, batching.TicklessBatchingBolt):  # type: ignore[misc]
    """streamparse's ``TicklessBatchingBolt``: a batch every ``secs_between_batches``."""
