"""A worker process of a multi-process run: ``python -m brokerless.stream worker``.

The driver (``multiprocess.py``) starts the process and writes its *job* to the process's
stdin (:func:`write_job`: a length-prefixed pickle of a dict -- the topology or a
``module:attr`` reference, the config, the worker's index and attempt, the run's keys, the
control endpoint, the CPUs it keeps to).  :func:`worker_main` reads it, keeps to those CPUs
(``affinity.py``), imports the driver's main script first as ``__mp_main__``
(``main_module.py``) so that components defined there resolve, builds the plan and the
assignment every worker computes alike, binds its virtual port, reports ``ready`` on the
control channel and serves the driver (``control/worker.py``) until it says stop.

No orphans: the process keeps its stdin open and exits at once when it reaches end-of-file,
which happens when the driver process ends for any reason, even SIGKILL.  It ignores SIGINT:
on Ctrl-C the driver stops it.
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import struct
import sys
import threading
import traceback
from typing import IO, Any

import brokerless as zmq

from .affinity import keep_to
from .assignment import assign
from .config import Config
from .control import Kind, WorkerChannel, serve, started_info
from .interpreter import worker_interpreter
from .main_module import prepare_main
from .messaging import SocketMessaging
from .topology import load_topology
from .worker import Worker

_LENGTH = struct.Struct("!Q")


def write_job(stdin: IO[bytes], job: dict[str, Any]) -> None:
    """Give a worker process its job (the driver's side of :func:`worker_main`'s stdin)."""
    data = pickle.dumps(job)
    stdin.write(_LENGTH.pack(len(data)) + data)
    stdin.flush()


def _read_exactly(fd: int, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            raise EOFError("the driver closed the job pipe")
        data += chunk
    return data


def worker_main(stdin_fd: int = 0) -> int:
    """The body of ``python -m brokerless.stream worker``: run one worker as its job (read
    from stdin) says, until the driver says stop or goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver handles Ctrl-C
    (length,) = _LENGTH.unpack(_read_exactly(stdin_fd, _LENGTH.size))
    job = pickle.loads(_read_exactly(stdin_fd, length))
    keep_to(job["cpus"])  # before any thread starts: they all inherit it
    sys.path[:0] = [p for p in job["sys_path"] if p not in sys.path]
    stopping = threading.Event()

    def orphaned() -> None:  # stdin ends when the driver's process ends
        while os.read(stdin_fd, 4096):
            pass
        if not stopping.is_set():  # the driver died: its clean-up will not run
            shutil.rmtree(job["directory"], ignore_errors=True)
            os._exit(3)

    threading.Thread(target=orphaned, name="driver-watch", daemon=True).start()
    context = zmq.Context()
    keys = job["keys"]
    channel = WorkerChannel(
        context, job["control"], job["key"], job["attempt"], job["index"], keys=keys
    )
    try:
        prepare_main(job["main"])
        shipped = job["topology"]
        topology = load_topology(shipped) if isinstance(shipped, str) else pickle.loads(shipped)
        config: Config = pickle.loads(job["config"])
        plan = topology.build(config)
        n = config.num_workers
        messaging = (
            SocketMessaging(context, job["transport"], job["directory"], keys=keys)
            if n > 1
            else None
        )
        worker = Worker(
            plan,
            assign(plan, n),
            job["index"],
            messaging,
            capture=job["capture"],
            restore=job["restore"],
            attempt=job["attempt"],
        )
        endpoint = worker.bind()
        channel.announce((Kind.READY, endpoint))
        with worker_interpreter(config.worker_gc_threshold, config.worker_switch_interval):
            serve(worker, channel, started_info(worker, endpoint))
        return 0
    except Exception:
        channel.send((Kind.FAILED, traceback.format_exc()))
        return 1
    finally:
        stopping.set()
        channel.close()
        context.term()
