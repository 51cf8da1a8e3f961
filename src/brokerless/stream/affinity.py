"""Which CPUs each worker process of a multi-process run keeps to (``Config.worker_cpus``).

A worker process runs its Python in one thread at a time (the GIL), but four of its threads
work -- the executors' shared thread, the link's sender and receiver, the I/O thread -- and
hand the GIL to each other hundreds of times a second.  Left to the scheduler, they wander over
every CPU.  Kept to one CPU, two workers over ipc on two CPUs ran 1.26x the spout tuples per
second at 0.95x the CPU per tuple (BENCHMARKS.md, *Stream layer*); the rate rose far more than
the CPU fell, so the time saved is mostly waiting (wake-ups on another CPU, migrations), which
was not measured further.  Keeping workers to CPUs is the machine owner's call, as the
affinity of libzmq's I/O threads is (``ZMQ_THREAD_AFFINITY_CPU_ADD``): two runs spread alike
would share the same CPUs however idle the others are.  So the default leaves the scheduler
alone.

The driver resolves the setting into one set of CPUs per worker (:func:`worker_cpu_sets`)
before it starts anything, and hands each worker its set; the worker keeps to it
(:func:`keep_to`) first thing, every thread it has and every thread it starts after.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Collection, Mapping, Sequence

#: ``Config.worker_cpus = SPREAD``: worker i on the i-th CPU this process may use, modulo
#: their number.
SPREAD = "spread"

#: What ``Config.worker_cpus`` takes: None (the scheduler decides), SPREAD, or one collection
#: of CPU numbers per worker (worker i keeps to the (i modulo their number)-th).
WorkerCpus = str | Sequence[Collection[int]] | None

_SHAPE = (
    f"worker_cpus is None, {SPREAD!r} or a list of CPU sets, one per worker "
    "(e.g. [{0, 1}, {2, 3}])"
)


def setting_problem(setting: object) -> str | None:
    """What is wrong with a ``worker_cpus`` setting, or None."""
    if setting is None or (isinstance(setting, str) and setting == SPREAD):
        return None
    if isinstance(setting, str | bytes | Mapping) or not isinstance(setting, Sequence):
        return f"{_SHAPE}, not {setting!r}"
    if len(setting) == 0:
        return f"{_SHAPE}, not an empty list"
    for index, cpus in enumerate(setting):
        problem = _cpu_set_problem(cpus)
        if problem is not None:
            return f"worker_cpus[{index}] {problem}: {_SHAPE}"
    return None


def _cpu_set_problem(cpus: object) -> str | None:
    if isinstance(cpus, str | bytes | Mapping) or not isinstance(cpus, Collection):
        return f"is {cpus!r}, not a set of CPU numbers"
    if len(cpus) == 0:
        return "is empty"
    for cpu in cpus:
        try:
            number = operator.index(cpu)  # an int, or one of numpy's
        except TypeError:
            number = -1
        if isinstance(cpu, bool) or number < 0:
            return f"holds {cpu!r}, not a CPU number (an integer >= 0)"
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
        sets = [frozenset(map(operator.index, cpus)) for cpus in setting]
        for cpus in sets:
            if not cpus <= set(allowed):
                raise ValueError(
                    f"worker_cpus names CPU(s) {sorted(cpus - set(allowed))}, which this "
                    f"process may not use (it may use {allowed})"
                )
    return [sets[index % len(sets)] for index in range(num_workers)]


def keep_to(cpus: Collection[int] | None) -> None:
    """Keep this process to ``cpus``: every thread it has (a worker process calls it before
    it starts any, but a thread started by ``sitecustomize`` would be missed otherwise) and,
    since a thread starts with its creator's CPUs, every thread it starts after.  None: leave
    it where it is."""
    if cpus is None:
        return
    try:
        threads = [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:  # no /proc: the calling thread (and those it starts) only
        threads = [0]
    for thread in threads:
        os.sched_setaffinity(thread, cpus)
