"""The routing map: ``{stream: {component: grouping}}`` of one component, and the per-task
routes the emit path uses to turn a tuple into target task ids."""

from __future__ import annotations

from dataclasses import dataclass

from .grouping import Binding, Chooser, Grouping
from .plan import TopologyPlan
from .tuple import Fields


@dataclass(frozen=True)
class StreamRoute:
    """Where one task's tuples on one stream go."""

    stream: str
    fields: Fields
    direct: bool
    #: regular streams: one chooser per subscribing component, with whether puts may block
    choosers: tuple[tuple[Chooser, bool], ...]
    #: direct streams: the tasks that may be targeted, with whether puts to them may block
    direct_targets: dict[int, bool]
    #: every task a tuple on this stream may go to
    possible_targets: frozenset[int]


def routing_map(plan: TopologyPlan, component: str) -> dict[str, dict[str, Grouping]]:
    """``{stream: {subscribing component: grouping}}`` for ``component``'s output streams."""
    return {
        stream: {sub.component: sub.grouping
                 for sub in plan.subscribers.get((component, stream), ())}
        for stream in plan.components[component].streams
    }


def build_routes(
    plan: TopologyPlan, component: str, task: int, worker_tasks: frozenset[int]
) -> dict[str, StreamRoute]:
    """The routes of one source task (its choosers keep per-task state)."""
    routes = {}
    spec = plan.components[component]
    for stream, targets in routing_map(plan, component).items():
        declared = spec.streams[stream]
        choosers = []
        direct_targets: dict[int, bool] = {}
        possible: set[int] = set()
        for target, grouping in targets.items():
            blocking = (component, target) not in plan.cycle_edges
            tasks = plan.components[target].tasks
            possible.update(tasks)
            if declared.direct:
                direct_targets.update(dict.fromkeys(tasks, blocking))
                continue
            binding = Binding(
                component, task, stream, tuple(declared.fields), target, tasks, worker_tasks
            )
            choosers.append((grouping.bind(binding), blocking))
        routes[stream] = StreamRoute(
            stream,
            spec.schemas[stream],
            declared.direct,
            tuple(choosers),
            direct_targets,
            frozenset(possible),
        )
    return routes
