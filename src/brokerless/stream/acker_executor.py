"""The acker executor: the system component that applies ACK_INIT/ACK/FAIL messages to its
tasks' ledgers (``acker.py``) and tells spout tasks which trees are decided.  Its
``processed`` counts messages (a batch from an executor of its worker holds many)."""

from __future__ import annotations

import time

from .acker import AckerLedger
from .component import Component, ComponentKind
from .executor import Executor
from .protocol import ACKED, BATCH, FAILED


class AckerExecutor(Executor[Component]):
    kind = ComponentKind.ACKER

    def open(self) -> None:
        now = time.monotonic()
        self.ledgers = {
            t: AckerLedger(self.config.message_timeout_secs, now) for t in self.task_ids
        }

    def step(self) -> float | None:
        ledgers = self.ledgers
        outbox = self.outbox
        metrics = self.metrics
        items = self.queue.take(self.batch, 0)
        for task, message, _ in items:
            try:
                # a batch from an executor of this worker, or one message from another
                messages = message[1] if message[0] == BATCH else (message,)
                metrics.processed += len(messages)
                for kind, root, spout_task in ledgers[task].update_many(messages):
                    if kind == ACKED:
                        metrics.acked += 1
                    elif kind == FAILED:
                        metrics.failed += 1
                    outbox.control(spout_task, (kind, root))
            except Exception as exc:
                self._dropped(task, exc)
        outbox.flush()
        self.count_handled(len(items))
        now = time.monotonic()
        for ledger in ledgers.values():
            ledger.rotate(now)
        if items:
            return 0
        return max(0.0, min(ledger.next_rotation for ledger in ledgers.values()) - now)
