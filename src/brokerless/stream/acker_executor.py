"""The acker executor: the system component that applies ACK_INIT/ACK/FAIL messages to its
tasks' ledgers (``acker.py``) and tells spout tasks which trees are decided."""

from __future__ import annotations

import time

from .acker import AckerLedger
from .component import Component, ComponentKind
from .executor import Executor
from .protocol import ACKED


class AckerExecutor(Executor[Component]):
    kind = ComponentKind.ACKER

    def open(self) -> None:
        now = time.monotonic()
        self.ledgers = {
            t: AckerLedger(self.config.message_timeout_secs, now) for t in self.task_ids
        }

    def loop(self) -> None:
        take = self.queue.take
        batch = self.config.executor_batch_size
        ledgers = self.ledgers
        outbox = self.outbox
        metrics = self.metrics
        while True:
            next_rotation = min(ledger.next_rotation for ledger in ledgers.values())
            items = take(batch, max(0.0, next_rotation - time.monotonic()))
            for task, message, _ in items:
                try:
                    decided = ledgers[task].update(message)
                    if decided is not None:
                        kind, root, spout_task = decided
                        if kind == ACKED:
                            metrics.acked += 1
                        else:
                            metrics.failed += 1
                        outbox.control(spout_task, [kind, root])
                except Exception as exc:
                    self._dropped(task, exc)
            outbox.flush()
            metrics.processed += len(items)
            self.handled += len(items)
            now = time.monotonic()
            for ledger in ledgers.values():
                ledger.rotate(now)
