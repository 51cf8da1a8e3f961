"""The plan of a topology: what ``Topology.build()`` makes of it and every worker runs -- each
component's kind, tasks and executors, the streams and their subscribers.  Task ids are 1, 2,
... in declaration order, the system's acker tasks last (``topology.py`` assigns them); the plan
is a pure function of the topology and its config, so every worker process computes the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .component import Component, ComponentKind, Stream
from .config import Config
from .grouping import Grouping
from .tuple import Fields

#: The name of the system's acker component.
ACKER = "__acker"


@dataclass(frozen=True)
class ComponentPlan:
    name: str
    kind: ComponentKind
    factory: Callable[[], Component] | None
    tasks: tuple[int, ...]
    executors: tuple[int, ...]
    streams: Mapping[str, Stream]
    schemas: Mapping[str, Fields]
    inputs: Mapping[tuple[str, str], Grouping]
    finite: bool  # a spout that says when it is exhausted
    stateful: bool = False  # a StatefulBolt
    tick_secs: float | None = None  # a bolt's tick tuple frequency
    max_spout_pending: int | None = None  # a spout's (None: no limit)


@dataclass(frozen=True)
class ExecutorPlan:
    id: int
    component: str
    tasks: tuple[int, ...]


@dataclass(frozen=True)
class Subscription:
    component: str
    grouping: Grouping
    blocking: bool  # False on an edge inside a cycle: puts there never block (no deadlock)


class TopologyPlan:
    """A validated topology with task and executor ids: what workers run."""

    def __init__(
        self,
        name: str,
        config: Config,
        components: dict[str, ComponentPlan],
        executors: tuple[ExecutorPlan, ...],
        subscribers: dict[tuple[str, str], list[Subscription]],
    ) -> None:
        self.name = name
        self.config = config
        self.components = components
        self.executors = executors
        self.subscribers = subscribers
        self.task_component = {t: c.name for c in components.values() for t in c.tasks}
        self.acker_tasks = components[ACKER].tasks if ACKER in components else ()
        self.component_tasks = {name: c.tasks for name, c in components.items()}
        self.component_streams = {
            name: c.streams for name, c in components.items() if c.kind is not ComponentKind.ACKER
        }
        #: (source, target) component pairs inside a cycle: puts there never block.
        self.cycle_edges = frozenset(
            (source, sub.component)
            for (source, _), subs in subscribers.items()
            for sub in subs
            if not sub.blocking
        )
        #: A topology with stateful bolts: checkpointed (see ``checkpoint.py``).
        self.checkpointed = any(c.stateful for c in components.values())

    def schema(self, component: str, stream: str) -> Fields:
        return self.components[component].schemas[stream]

    def __repr__(self) -> str:
        parts = ", ".join(f"{c.name}:{list(c.tasks)}" for c in self.components.values())
        return f"<TopologyPlan {self.name!r} {parts}>"
