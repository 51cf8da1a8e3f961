"""What the runtime's parts need of the worker they run in."""

from __future__ import annotations

from typing import Any, Protocol

from .plan import TopologyPlan
from .transfer import Exchange


class Host(Protocol):
    """What an executor needs of its worker (``worker.Worker`` is one)."""

    plan: TopologyPlan
    index: int
    num_workers: int
    #: the tasks placed on this worker
    tasks: frozenset[int]
    exchange: Exchange
    #: how many tuples one other worker may have in flight to one of this worker's bolt
    #: executors (``worker.py``)
    credit_window: int
    #: every tuple emitted, as (component, stream, values), when the run captures them
    capture: list[tuple[str, str, tuple[Any, ...]]] | None

    def record_error(self, component: str, task: int, error: BaseException) -> None: ...

    def task_failed(self, component: str, error: BaseException) -> None: ...
