"""Bolts and barrier task bodies for the tests of topologies on Spark (an importable module:
Spark's Python workers unpickle what is built from them)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from pyspark import BarrierTaskContext

from brokerless.stream import Bolt

#: What ``raise_deep_in_task`` raises: longer than any one line Spark's messages were cut to.
LONG_ERROR = "the task's own error, " + "in many words " * 60 + "and its end"


class KillOwnProcess(Bolt):
    """SIGKILLs the process it runs in at its first tuple: a worker that dies every time."""

    def process(self, tup: Any) -> None:
        os.kill(os.getpid(), signal.SIGKILL)


class CountThenReport(Bolt):
    """Counts its tuples; when the topology stops (``cleanup``) writes ``task count`` to a file
    named after its task in ``directory``: what a bolt that flushes on stop would do."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def prepare(self, conf: Any, context: Any) -> None:
        self.task = context.task_id
        self.count = 0

    def process(self, tup: Any) -> None:
        self.count += 1

    def cleanup(self) -> None:
        Path(self.directory, f"task-{self.task}").write_text(f"{self.task} {self.count}\n")


def _nested(depth: int) -> None:
    if depth:
        _nested(depth - 1)
    raise ValueError(LONG_ERROR)


def raise_deep_in_task(_rows: Iterable[int]) -> Iterator[int]:
    """A barrier task whose Python code raises, ten frames down, an error of many words."""
    _nested(10)
    return iter(())


def kill_second_task(_rows: Iterable[int]) -> Iterator[int]:
    """A barrier task whose second Python worker dies (SIGKILL) while the first waits for it."""
    if BarrierTaskContext.get().partitionId() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    BarrierTaskContext.get().barrier()
    return iter(())


def wait_for_cancel(_rows: Iterable[int]) -> Iterator[int]:
    """A barrier task that only ends when its job is cancelled (its worker is killed)."""
    threading.Event().wait(120)
    return iter(())


def no_op(_rows: Iterable[int]) -> Iterator[int]:
    return iter(())
