"""Bolts for the tests of topologies on Spark (an importable module: Spark's Python workers
unpickle topologies built from them)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from brokerless.stream import Bolt


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
