"""Reliability: Storm's XOR acker, and the spout's side of it.

Theory of operation
-------------------
A spout tuple emitted with a ``msg_id`` becomes the *root* of a tree, with a random 64-bit root
id.  Every tuple sent in that tree carries, per root it belongs to, a random 64-bit *edge id*.
The acker task chosen by ``root % number of ackers`` keeps one 64-bit checksum per root:

* the spout sends ``ACK_INIT(root, e1 ^ e2 ^ ...)`` with the edge ids of the tuples it sent;
* a bolt that acks an input tuple sends ``ACK(root, e_in ^ c1 ^ c2 ^ ...)``: the input's own
  edge id (clearing it) and the edge ids of the tuples it emitted anchored to it (entering
  them);
* every edge id is therefore XORed in exactly twice -- once when its tuple is sent, once when
  it is acked -- and the checksum returns to 0 exactly when the whole tree is processed (a
  false zero has odds of 2**-64).  The acker then tells the spout task ``ACKED(root)``.

Messages about one root may reach the acker in any order (an ACK before the ACK_INIT): the
checksum is XOR, order-free, and the tree completes only once the INIT has named its spout
task.  A ``FAIL`` marks the root failed and the spout is told ``FAILED(root)`` at once (or when
the INIT arrives).

The ledger forgets roots idle longer than the message timeout (a rotating map of buckets), so
lost trees cannot grow it.  Timeouts themselves are decided by the spout (:class:`PendingTrees`),
which keeps every tuple it has in flight until exactly one of ACKED, FAILED or its timeout
comes: each spout tuple is acked or failed exactly once, and a late ACKED for a tuple that
already timed out is ignored.

Counted in place
----------------
Where one thread runs the whole topology (one worker, ``executor_threads="shared"``: see
``Executor.counts_trees``) no message needs to travel: a tree is a :class:`CountedTree`, and
each tuple in it carries that object instead of an edge id.  Sending copies counts them in
(``pending += copies``, once per emit, before anything is delivered), acking one counts it
out, and the tree is complete when the count is back to 0 -- the XOR scheme's invariant, every
tuple entered once and cleared once, kept by an integer.
A tuple always enters its tree before its parent leaves (an emit anchored to a tuple comes
before that tuple's ack; anchoring to an acked tuple raises), so 0 is reached only at the end;
a failed tuple is never counted out, so a failed tree never completes.  The collector that
brings a tree to 0 tells the spout ``ACKED(root)``, one that fails a tuple ``FAILED(root)``
(once per tree), as an acker task would -- but straight into the spout executor's ``settled``
list, which it reads at its next step, not through a queue; the acker executor stays idle.  The
count is a plain integer that only the topology's one thread touches -- one more reason why a
component may emit, ack and fail only in its executor's thread.  No table holds counted trees:
a lost one is freed with its tuples (and the collector that last emitted into it).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

from .protocol import ACK, ACK_INIT, ACKED, FAILED, RESET_TIMEOUT

_BUCKETS = 3


class AckerLedger:
    """The checksums of one acker task."""

    def __init__(self, timeout: float, now: float) -> None:
        self._buckets: list[dict[int, list[int]]] = [{} for _ in range(_BUCKETS)]
        self._rotate_every = timeout / (_BUCKETS - 1)
        self.next_rotation = now + self._rotate_every

    def __len__(self) -> int:
        return sum(map(len, self._buckets))

    def update(self, message: Sequence[Any]) -> tuple[int, int, int] | None:
        """Apply ACK_INIT / ACK / FAIL / RESET_TIMEOUT; returns ``(ACKED or FAILED, root, spout
        task)`` when the tree is decided (``RESET_TIMEOUT`` for one whose spout is to hear it)."""
        decided = self.update_many((message,))
        return decided[0] if decided else None

    def update_many(self, messages: Iterable[Sequence[Any]]) -> list[tuple[int, int, int]]:
        """Apply ACK_INIT / ACK / FAIL / RESET_TIMEOUT messages in order; returns ``(ACKED or
        FAILED, root, spout task)`` for each tree they decided, and ``(RESET_TIMEOUT, root,
        spout task)`` for each reset the spout is to hear.  A root's entry lives in the newest
        bucket from its last message on (so a reset keeps it another timeout)."""
        decided = []
        newest = self._buckets[0]
        older = self._buckets[1:]
        for message in messages:
            kind, root = message[0], message[1]
            entry = newest.get(root)
            if entry is None:
                for bucket in older:
                    entry = bucket.pop(root, None)
                    if entry is not None:
                        break
                else:
                    entry = [0, 0, 0]  # checksum, spout task (0: INIT not seen yet), failed
                newest[root] = entry
            if kind == ACK_INIT:
                entry[0] ^= message[2]
                entry[1] = message[3]
            elif kind == ACK:
                entry[0] ^= message[2]
            elif kind == RESET_TIMEOUT:  # (in the newest bucket now: its time starts again)
                if entry[1]:
                    decided.append((RESET_TIMEOUT, root, entry[1]))  # the spout's too
                continue
            else:
                entry[2] = 1
            if entry[1] and (entry[2] or entry[0] == 0):
                del newest[root]
                decided.append((FAILED if entry[2] else ACKED, root, entry[1]))
        return decided

    def rotate(self, now: float) -> int:
        """Forget the roots idle for a timeout; returns how many were dropped."""
        dropped = 0
        while now >= self.next_rotation:
            dropped += len(self._buckets.pop())
            self._buckets.insert(0, {})
            self.next_rotation += self._rotate_every
        return dropped


class CountedTree:
    """A spout tuple's tree counted in place (see the module doc): how many of its tuples were
    sent and not acked (a failed one stays counted), and where its ACKED or FAILED goes: the
    spout executor's ``settled`` list."""

    __slots__ = ("failed", "pending", "root", "settled")

    def __init__(self, root: int, settled: list[tuple[int, int]]) -> None:
        self.root = root
        self.settled = settled
        self.pending = 0  # copies sent and not yet acked
        self.failed = False  # FAILED was said: the spout is told nothing more


class PendingTrees:
    """A spout executor's tuples in flight: root -> (task, msg_id, emitted at)."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._roots: OrderedDict[int, tuple[int, Any, float]] = OrderedDict()  # oldest first
        self.per_task: dict[int, int] = {}
        self.max_per_task = 0

    def __len__(self) -> int:
        return len(self._roots)

    def add(self, root: int, task: int, msg_id: Any, now: float) -> None:
        self._roots[root] = (task, msg_id, now)
        count = self.per_task.get(task, 0) + 1
        self.per_task[task] = count
        if count > self.max_per_task:
            self.max_per_task = count

    def touch(self, root: int, now: float) -> None:
        """Start ``root``'s timeout again (a bolt's ``reset_timeout``), if it is in flight."""
        entry = self._roots.pop(root, None)
        if entry is not None:
            self._roots[root] = (entry[0], entry[1], now)  # the newest, last: order kept

    def pop(self, root: int) -> tuple[int, Any, float] | None:
        entry = self._roots.pop(root, None)
        if entry is not None:
            self.per_task[entry[0]] -= 1
        return entry

    def next_expiry(self) -> float | None:
        for _, _, started in self._roots.values():
            return started + self.timeout
        return None

    def expired(self, now: float) -> list[tuple[int, Any, float]]:
        """Remove and return the tuples whose timeout has passed."""
        out = []
        limit = now - self.timeout
        roots = self._roots
        while roots:
            root, entry = next(iter(roots.items()))
            if entry[2] > limit:
                break
            del roots[root]
            self.per_task[entry[0]] -= 1
            out.append(entry)
        return out
