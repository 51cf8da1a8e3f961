"""Deterministic placement of executors, and so of tasks, on workers.

The assignment is a pure function of the plan and the number of workers: every worker (a
process of ``run_multiprocess``, or a barrier task of ``brokerless.spark.run_on_spark``)
computes the same map from the same inputs, with no coordinator.  Executors are dealt
round-robin in plan order (component by component, in declaration order, ackers last), which
spreads each component over the workers.
"""

from __future__ import annotations

from dataclasses import dataclass

from .plan import TopologyPlan


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
    """Place ``plan``'s executors on ``num_workers`` workers."""
    if num_workers < 1:
        raise ValueError(f"num_workers must be >= 1, not {num_workers}")
    executor_worker = tuple(e.id % num_workers for e in plan.executors)
    task_worker = {t: executor_worker[e.id] for e in plan.executors for t in e.tasks}
    return Assignment(num_workers, executor_worker, task_worker)
