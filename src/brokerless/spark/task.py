"""One worker of a topology on Spark, as one task of the run's barrier stage (the executor's
side; the driver's is ``topology.py``).

The task builds the same plan and assignment as every other, binds its virtual port on every
interface (announcing the executor's address, from the barrier context), swaps endpoints with
the other tasks through ``BarrierTaskContext.allGather`` (in partition order), starts, says
``started`` and then answers the driver exactly as a worker process of ``multiprocess.py``
does (the same :func:`~brokerless.stream.control.serve`).  A task that cannot build or start
its worker tells the driver (``failed``, with the traceback) before it raises; one still not
serving after ``start_timeout`` seconds writes every thread's stack to its stderr (the
executor's log), so a start that hangs says where.

Spark runs the next task in the same Python process (``spark.python.worker.reuse``), so a task
leaves nothing behind: every thread is joined, every socket closed and the context terminated
before it returns, and its changes to ``sys.path`` and to SIGINT are undone.  It ignores SIGINT
while it runs (a terminal sends it to Spark's Python workers too; the driver stops the run).
"""

from __future__ import annotations

import faulthandler
import pickle
import signal
import sys
import threading
import traceback
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pyspark import BarrierTaskContext

import brokerless as zmq
from brokerless.stream.assignment import assign
from brokerless.stream.control import Kind, WorkerChannel, serve, started_info
from brokerless.stream.interpreter import worker_interpreter
from brokerless.stream.messaging import SocketMessaging
from brokerless.stream.worker import Worker

from .endpoints import bind_address

__all__ = ["run_task"]


def run_task(job: Mapping[str, Any], _partition: Iterable[int]) -> Iterator[int]:
    """The body of one barrier task: worker ``partitionId`` of the attempt ``job`` names, until
    the driver says stop (or is gone for ``driver_timeout`` seconds)."""
    barrier = BarrierTaskContext.get()
    index = barrier.partitionId()
    main_thread = threading.current_thread() is threading.main_thread()
    previous_sigint = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread else None
    added = [p for p in job["sys_path"] if p not in sys.path]
    sys.path[:0] = added
    others = [t.name for t in threading.enumerate() if t is not threading.current_thread()]
    context = zmq.Context()
    channel: WorkerChannel | None = None
    faulthandler.dump_traceback_later(job["start_timeout"])  # to stderr: the executor's log
    try:
        keys = job["keys"]
        channel = WorkerChannel(
            context, job["control"], job["key"], job["attempt"], index, job["driver_timeout"], keys
        )
        try:
            topology, config = pickle.loads(job["topology"])
            plan = topology.build(config)
            n = config.num_workers
            host = barrier.getTaskInfos()[index].address.rsplit(":", 1)[0]
            messaging = (
                SocketMessaging(context, "tcp", host=bind_address(host), advertise=host, keys=keys)
                if n > 1
                else None
            )
            worker = Worker(
                plan,
                assign(plan, n),
                index,
                messaging,
                capture=job["capture"],
                restore=job["restore"],
                attempt=job["attempt"],
            )
            endpoint = worker.bind()
        except Exception:
            channel.send((Kind.FAILED, traceback.format_exc()))
            raise
        try:
            endpoints = barrier.allGather(endpoint)
        except BaseException:  # another task failed the barrier: the stage has failed
            worker.stop()  # closes its bound socket, or term() below would wait for it
            raise
        # (restored for Spark's next task, which runs in this process)
        with worker_interpreter(config.worker_gc_threshold, config.worker_switch_interval):
            try:
                worker.start(endpoints)
            except Exception:
                worker.stop()
                channel.send((Kind.FAILED, traceback.format_exc()))
                raise
            faulthandler.cancel_dump_traceback_later()
            serve(
                worker,
                channel,
                started_info(worker, endpoint, attempt=job["attempt"], threads_before=others),
            )
    finally:
        faulthandler.cancel_dump_traceback_later()
        if channel is not None:
            channel.close()
        context.term()
        for path in added:
            if path in sys.path:
                sys.path.remove(path)
        if previous_sigint is not None:
            signal.signal(signal.SIGINT, previous_sigint)
    return iter(())
