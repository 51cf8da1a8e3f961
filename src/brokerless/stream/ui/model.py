"""What the topology UI's JSON endpoints say: plain data built from a run.

``/api/topology`` (:func:`describe_topology`) is the plan, which never changes during a run:
components (kind, executors with their tasks, declared streams), the edges between them with
their groupings, and the config.  ``/api/stats`` (:func:`describe_stats`) is the live part:
:class:`~brokerless.stream.metrics.Statistics` as a dict (per component, per executor, per
worker), the errors with their tracebacks, and the run's attempts (a Spark run restarts the
whole topology when it loses a worker; ``restarts`` says why each earlier attempt ended).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from ..metrics import ErrorReport, Statistics
from ..topology import TopologyPlan

if TYPE_CHECKING:
    from ..run import TopologyRun

#: Errors listed by ``/api/stats`` (the newest; ``errors_total`` counts them all).
MAX_ERRORS = 100

_MODES = {"LocalRun": "local", "MultiprocessRun": "multiprocess", "SparkRun": "spark"}
#: What a component's latency measures, by kind (Storm's names).
LATENCY = {"spout": "complete latency", "bolt": "execute latency", "acker": "latency"}
_CONFIG = (
    "num_workers",
    "num_ackers",
    "max_spout_pending",
    "message_timeout_secs",
    "executor_queue_size",
    "executor_batch_size",
)


def describe_topology(run: TopologyRun) -> dict[str, Any]:
    plan: TopologyPlan = run.plan
    components = []
    for component in plan.components.values():
        components.append(
            {
                "name": component.name,
                "kind": component.kind,
                "system": component.name.startswith("__"),
                "tasks": list(component.tasks),
                "executors": [
                    {"executor": e, "tasks": list(plan.executors[e].tasks)}
                    for e in component.executors
                ],
                "streams": {
                    name: {"fields": list(stream.fields), "direct": stream.direct}
                    for name, stream in component.streams.items()
                },
                "latency": LATENCY[component.kind],
                "finite": component.finite,
            }
        )
    edges = [
        {
            "source": source,
            "stream": stream,
            "target": subscription.component,
            "grouping": repr(subscription.grouping),
            "in_cycle": not subscription.blocking,
        }
        for (source, stream), subscriptions in plan.subscribers.items()
        for subscription in subscriptions
    ]
    return {
        "name": plan.name,
        "mode": _MODES.get(type(run).__name__, type(run).__name__),
        "workers": plan.config.num_workers,
        "config": {key: getattr(plan.config, key) for key in _CONFIG},
        "components": components,
        "edges": edges,
    }


def describe_stats(
    run: TopologyRun, statistics: Statistics, errors: list[ErrorReport], started: float
) -> dict[str, Any]:
    """The live figures (``statistics`` and ``errors`` taken from ``run`` by the caller)."""
    restarts = list(getattr(run, "restarts", ()))
    return {
        "time": time.time(),
        "uptime_s": round(time.monotonic() - started, 3),
        "stopped": run.stopped,
        **statistics.as_dict(),
        "errors_total": len(errors),
        "errors": [asdict(e) for e in errors[-MAX_ERRORS:]],
        "attempts": {
            "attempt": getattr(run, "attempt", 1),
            "max_attempts": getattr(run, "max_attempts", 1),
            "restarts": restarts,
            "workers": list(getattr(run, "worker_info", ())),
        },
    }
