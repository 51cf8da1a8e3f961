"""Spark sessions for topologies: a builder set up for them, how many task slots a session has
for a barrier stage, and what to tell someone whose master has too few."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession

import brokerless as zmq

__all__ = [
    "barrier_refusal",
    "in_process",
    "is_local",
    "python_workers_on_this_interpreter",
    "session_builder",
    "slot_shortage",
    "task_slots",
]

_PACKAGE_ROOT = str(Path(zmq.__file__).resolve().parent.parent)
_LOCAL = re.compile(r"local(?:\[(\*|\d+)(?:\s*,\s*\d+)?\])?")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*\d+\s*\]")


def in_process(master: str) -> bool:
    """Whether ``master`` runs Spark's tasks in the driver's own JVM (``local[N]``): its
    task slots are fixed when the session starts."""
    return bool(_LOCAL.fullmatch(master))


def is_local(master: str) -> bool:
    """Whether ``master`` runs every executor on this machine."""
    return in_process(master) or bool(_LOCAL_CLUSTER.fullmatch(master))


def session_builder(master: str, app_name: str = "brokerless") -> SparkSession.Builder:
    """A session builder set up for topologies: Spark's barrier slot check fails at once
    instead of retrying for minutes (the runner waits for slots itself, up to its
    ``start_timeout``, and says what it waits for; see ``topology.py``), no console progress
    bar; for a local master also the driver on 127.0.0.1 and Python workers that import this
    brokerless and run this interpreter (``PYSPARK_PYTHON``, which PySpark reads from the
    environment, is set to it unless it is set already).  Add your own ``.config(...)`` and
    call ``getOrCreate()``."""
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures", "1")
        .config("spark.scheduler.barrier.maxConcurrentTasksCheck.interval", "1s")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if is_local(master):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        paths = [_PACKAGE_ROOT, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        builder = (
            builder.config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.pyspark.python", sys.executable)
            .config(
                "spark.executorEnv.PYTHONPATH", os.pathsep.join(os.path.abspath(p) for p in paths)
            )
        )
    return builder


def python_workers_on_this_interpreter(sc: SparkContext) -> None:
    """On a local master, start Spark's Python workers with this interpreter unless
    ``PYSPARK_PYTHON`` names one.  PySpark's default is ``python3`` from PATH, which from a
    virtual environment that is not activated (``.venv/bin/python job.py``) cannot import
    brokerless; ``session_builder`` does this for the sessions it builds, this for a session
    built elsewhere.  Python functions take the interpreter when they are made, so call it
    before registering or defining them."""
    if is_local(master_url(sc)) and "PYSPARK_PYTHON" not in os.environ:
        sc.pythonExec = sys.executable


def master_url(sc: SparkContext) -> str:
    """``sc.master``, which pyspark types as optional: a SparkContext does not start without
    one."""
    master = sc.master
    if master is None:
        raise RuntimeError("the SparkContext has no master URL")
    return master


def task_slots(sc: SparkContext) -> int:
    """How many tasks Spark can run at once now: the most workers a barrier stage can have."""
    try:  # what Spark's own barrier check counts (executors' cores / spark.task.cpus)
        jsc = sc._jsc.sc()
        profile = jsc.resourceProfileManager().defaultResourceProfile()
        return int(jsc.maxNumConcurrentTasks(profile))
    except Exception:  # the JVM method is internal: count from the master URL instead
        pass
    cpus = _task_cpus(sc)
    master = master_url(sc)
    local = _LOCAL.fullmatch(master)
    if local:
        cores = (os.cpu_count() or 1) if local[1] == "*" else int(local[1] or 1)
        return cores // cpus
    cluster = _LOCAL_CLUSTER.fullmatch(master)
    if cluster:
        return int(cluster[1]) * (int(cluster[2]) // cpus)
    return sc.defaultParallelism // cpus


def _task_cpus(sc: SparkContext) -> int:
    return int(sc.getConf().get("spark.task.cpus", "1") or 1)


def slot_shortage(sc: SparkContext, name: str, workers: int, slots: int) -> str:
    """Why a topology of ``workers`` workers cannot run on ``sc``'s ``slots`` slots, and what
    to change: a hint that fits the kind of master."""
    master = master_url(sc)
    cpus = _task_cpus(sc)
    per_task = f" ({cpus} cores per task: spark.task.cpus={cpus})" if cpus > 1 else ""
    if in_process(master):
        more = f"give Spark more cores: master='local[{workers * cpus}]'"
    elif _LOCAL_CLUSTER.fullmatch(master):
        more = "give Spark more executors or cores: local-cluster[executors,cores,memory]"
    elif master.startswith("spark://"):
        more = (
            "give the application more cores: more Workers (or Workers with more --cores), "
            "and spark.cores.max if it is set"
        )
    elif master.startswith(("yarn", "k8s://")):
        more = "give the application more executors or cores (spark.executor.instances, "
        more += "spark.executor.cores)"
    else:
        more = "give the application more executors or executor cores"
    fewer = f"ask for fewer workers (workers={slots}) or " if slots else ""
    return (
        f"topology {name!r} needs {workers} Spark task slots at once (one barrier task per "
        f"worker) but Spark master {master!r} has {slots}{per_task}: {fewer}{more}"
    )


def barrier_refusal(sc: SparkContext, name: str) -> str | None:
    """Why ``sc`` runs no barrier stage at all, so no topology (None: it runs them).

    Dynamic allocation: Spark refuses every barrier stage while it is on
    (``BarrierJobRunWithDynamicAllocationException``), by the rule of its
    ``Utils.isDynamicAllocationEnabled`` -- turned on, and not an in-process master unless
    ``spark.dynamicAllocation.testing`` says so.  It must be told before the run waits for
    slots: such an application starts with no executors and asks for them only for work it
    was given, so it would wait ``start_timeout`` for slots that never come."""
    conf = sc.getConf()

    def on(key: str) -> bool:
        return (conf.get(key) or "false").strip().lower() == "true"

    if not on("spark.dynamicAllocation.enabled"):
        return None
    if in_process(master_url(sc)) and not on("spark.dynamicAllocation.testing"):
        return None
    return (
        f"topology {name!r} cannot run in a Spark session with dynamic allocation "
        "(spark.dynamicAllocation.enabled=true): Spark runs no barrier stage then "
        "(BarrierJobRunWithDynamicAllocationException), and a topology's workers are one. "
        "Turn it off for this application and give it its executors: "
        "spark.executor.instances, or spark.cores.max on a standalone master"
    )


def session_for(
    spark: SparkSession | None, master: str | None, workers: int
) -> tuple[SparkSession, bool]:
    """The session to run on, and whether the run started it (and so stops it)."""
    if spark is not None:
        python_workers_on_this_interpreter(spark.sparkContext)
        return spark, False
    if master is None:
        active = SparkSession.getActiveSession()
        if active is not None:
            python_workers_on_this_interpreter(active.sparkContext)
            return active, False
        master = f"local[{workers}]"
    existed = SparkContext._active_spark_context is not None
    session = session_builder(master).getOrCreate()
    if not existed:
        session.sparkContext.setLogLevel("ERROR")
    return session, not existed
