"""Which CPUs each worker process of a multi-process run keeps to (``Config.worker_cpus``).

A worker process runs its Python in one thread at a time (the GIL), but in several threads --
the executors' shared thread, the link's sender and receiver, the I/O thread -- which hand the
GIL to each other hundreds of times a second.  Left to the scheduler, those threads wander
over every CPU, each hand-over a wake-up on another CPU, away from the data the last thread
touched; kept to one CPU they share its caches.  Measured (BENCHMARKS.md, *Stream layer*): two
workers over ipc on two CPUs, 1.38x the tuples per second, 0.85x the CPU per tuple.  Keeping
workers to CPUs is the machine owner's call, as libzmq's ``ZMQ_THREAD_AFFINITY_CPU_ADD`` is:
two runs both spread over the same CPUs would share them however idle the others are.  So the
default leaves the scheduler alone.

The driver resolves the setting into one set of CPUs per worker (:func:`worker_cpu_sets`) and
hands each worker its set; the worker keeps to it (:func:`keep_to`) before it starts a thread,
so every thread it starts inherits the set.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence

#: ``Config.worker_cpus = SPREAD``: worker i on the i-th CPU this process may use, modulo
#: their number.
SPREAD = "spread"

#: What ``Config.worker_cpus`` takes: None (the scheduler decides), SPREAD, or one collection
#: of CPU numbers per worker (worker i keeps to the (i modulo their number)-th).
WorkerCpus = str | Sequence[Collection[int]] | None


def setting_problem(setting: object) -> str | None:
    """What is wrong with a ``worker_cpus`` setting, or None."""
    if setting is None or setting == SPREAD:
        return None
    shape = (
        f"worker_cpus must be None, {SPREAD!r} or a list of CPU sets (one per worker, "
        f"e.g. [{{0, 1}}, {{2, 3}}]), not {setting!r}"
    )
    if isinstance(setting, str | bytes) or not isinstance(setting, Sequence) or not setting:
        return shape
    for cpus in setting:
        if (
            isinstance(cpus, str | bytes)
            or not isinstance(cpus, Collection)
            or not cpus
            or not all(isinstance(cpu, int) and not isinstance(cpu, bool) for cpu in cpus)
            or min(cpus) < 0
        ):
            return shape
    return None


def worker_cpu_sets(setting: WorkerCpus, num_workers: int) -> list[frozenset[int] | None]:
    """The CPUs each of ``num_workers`` workers keeps to (None: wherever the scheduler puts
    it); raises ValueError for a setting :func:`setting_problem` refuses, for CPUs this
    process may not use, or where the platform cannot keep a process to CPUs."""
    problem = setting_problem(setting)
    if problem is not None:
        raise ValueError(problem)
    if setting is None:
        return [None] * num_workers
    if not hasattr(os, "sched_setaffinity"):
        raise ValueError(
            "worker_cpus needs os.sched_setaffinity, which this platform lacks (Linux has "
            "it): leave worker_cpus at None"
        )
    allowed = sorted(os.sched_getaffinity(0))
    if isinstance(setting, str):  # SPREAD, the one string setting_problem lets through
        sets = [frozenset({cpu}) for cpu in allowed]
    else:
        sets = [frozenset(cpus) for cpus in setting]
        for cpus in sets:
            if not cpus <= set(allowed):
                raise ValueError(
                    f"worker_cpus names CPU(s) {sorted(cpus - set(allowed))}, which this "
                    f"process may not use (it may use {allowed})"
                )
    return [sets[index % len(sets)] for index in range(num_workers)]


def keep_to(cpus: Collection[int] | None) -> None:
    """Keep the calling thread, and every thread it starts from now on, to ``cpus`` (a worker
    process's main thread calls it before it starts any); None: leave it where it is."""
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
