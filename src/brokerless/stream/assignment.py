"""Deterministic placement of executors, and so of tasks, on workers.

The assignment is a pure function of the plan and the number of workers: every worker (a
process of ``run_multiprocess``, or a barrier task of ``brokerless.spark.run_on_spark``)
computes the same map from the same inputs, with no coordinator.

Theory of operation
-------------------
A tuple that crosses workers costs both workers far more than one handed over inside a worker
(encoding, the link's threads, checks on arrival: BENCHMARKS.md, *Stream layer*), so placement
keeps neighbours together where balance allows.  The components' executors are dealt in plan
order (component by component, in declaration order), each to a worker with the fewest
executors of its component, among those one with the fewest executors in all, and among those
the one holding the most executors of the components it subscribes to (then the lowest index).
The first two keep every component spread evenly and the workers' executor counts within one
of each other, as Storm's round-robin deal does (when every component's parallelism is a
multiple of the number of workers, it is that deal); the third keeps neighbours together where
that leaves a choice, greedily, in declaration order -- not the fewest crossings possible, but
no more than the round-robin deal's: spout -> transform -> consume on two workers puts the
spout on one and both bolts on the other (a tuple crosses once, not twice), as Storm's
resource-aware scheduler places connected components next to each other.

The system's ackers are dealt last, apart: each to a worker with the fewest ackers, the one
with the most spout executors first, since a spout settles its trees through an acker of its
own worker when it has one (``SpoutExecutor.new_root``): ACK_INIT and ACKED then never cross.
Dealt apart, the ackers may leave a worker with one executor more than balance alone would
(one acker, beside a spout whose worker already holds one more).
"""

from __future__ import annotations

from dataclasses import dataclass

from .component import ComponentKind
from .plan import ACKER, TopologyPlan


@dataclass(frozen=True)
class Assignment:
    num_workers: int
    executor_worker: tuple[int, ...]  # worker index of each executor id
    task_worker: dict[int, int]

    def executors(self, worker: int) -> tuple[int, ...]:
        return tuple(e for e, w in enumerate(self.executor_worker) if w == worker)

    def tasks(self, worker: int) -> frozenset[int]:
        return frozenset(t for t, w in self.task_worker.items() if w == worker)


def assign(plan: TopologyPlan, num_workers: int) -> Assignment:
    """Place ``plan``'s executors on ``num_workers`` workers (see the module doc)."""
    if num_workers < 1:
        raise ValueError(f"num_workers must be >= 1, not {num_workers}")
    workers = range(num_workers)
    placed: dict[int, int] = {}
    load = [0] * num_workers  # components' executors on each worker
    #: component -> how many of its executors each worker holds
    holding: dict[str, list[int]] = {name: [0] * num_workers for name in plan.components}
    for executor in plan.executors:
        if executor.component == ACKER:
            continue
        near = [0] * num_workers
        for source, _ in plan.components[executor.component].inputs:
            for worker, count in enumerate(holding[source]):
                near[worker] += count
        own = holding[executor.component]
        worker = min(workers, key=lambda w: (own[w], load[w], -near[w], w))
        placed[executor.id] = worker
        load[worker] += 1
        own[worker] += 1
    spouts = [0] * num_workers
    for name, component in plan.components.items():
        if component.kind is ComponentKind.SPOUT:
            for worker, count in enumerate(holding[name]):
                spouts[worker] += count
    dealt = [0] * num_workers  # ackers on each worker
    for executor in plan.executors:
        if executor.component != ACKER:
            continue
        worker = min(workers, key=lambda w: (dealt[w], -spouts[w], w))
        placed[executor.id] = worker
        dealt[worker] += 1
    executor_worker = tuple(placed[e.id] for e in plan.executors)
    task_worker = {t: executor_worker[e.id] for e in plan.executors for t in e.tasks}
    return Assignment(num_workers, executor_worker, task_worker)
