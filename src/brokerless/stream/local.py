"""Local mode: a whole topology in this process, on in-memory queues."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from .assignment import assign
from .config import Config
from .messaging import LocalMessaging, LocalNetwork
from .metrics import ErrorReport, Statistics
from .run import TopologyRun, plan_for, with_ui
from .topology import Topology
from .worker import Activity, Worker

if TYPE_CHECKING:
    from .ui import UIAddress  # (the UI, and http.server, load only when used)


class LocalRun(TopologyRun):
    """A topology running in this process, with ``num_workers`` workers (more than one: they
    exchange serialized batches over in-memory messaging, as separate processes would)."""

    def __init__(self, topology: Topology, *, workers: int | None = None,
                 config: Config | None = None, capture: bool = False) -> None:
        self.plan = plan = plan_for(topology, workers, config)
        n = plan.config.num_workers
        assignment = assign(plan, n)
        network = LocalNetwork() if n > 1 else None
        self.workers = [
            Worker(plan, assignment, i, LocalMessaging(network) if network else None,
                   capture=capture)
            for i in range(n)
        ]
        self._stopped = threading.Event()
        self.hung_threads: list[str] = []
        endpoints = [w.bind() for w in self.workers]
        try:
            for worker in self.workers:
                worker.start(endpoints)
        except BaseException:
            self.stop()
            raise

    def __repr__(self) -> str:
        state = "stopped" if self._stopped.is_set() else "running"
        return f"<LocalRun {self.plan.name!r} {state}, {len(self.workers)} worker(s)>"

    def activity(self) -> list[Activity]:
        return [w.activity() for w in self.workers]

    def statistics(self) -> Statistics:
        return Statistics.merge(w.snapshot() for w in self.workers)

    def errors(self) -> list[ErrorReport]:
        return [e for w in self.workers for e in w.errors]

    def captured(self) -> list[tuple[str, str, tuple[Any, ...]]]:
        return [c for w in self.workers for c in (w.capture or ())]

    def _pause(self, seconds: float) -> None:
        self._stopped.wait(seconds)

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def stop(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        for worker in self.workers:
            self.hung_threads += worker.stop()


def run_local(
    topology: Topology,
    *,
    workers: int | None = None,
    config: Config | None = None,
    capture: bool = False,
    ui: UIAddress | None = None,
) -> LocalRun:
    """Start ``topology`` in this process; returns the running topology (a context manager).

    ``config`` replaces the topology's own; ``workers`` overrides its ``num_workers``;
    ``capture`` records every emitted tuple (for ``captured()``); ``ui`` serves the live
    topology UI (True: a free port on 127.0.0.1; a port; ``"host:port"``; see ``run.ui.url``)."""
    return with_ui(LocalRun(topology, workers=workers, config=config, capture=capture), ui)
