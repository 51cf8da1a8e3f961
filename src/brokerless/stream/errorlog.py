"""The error reports a worker and a run keep: each task's latest, and how many there were.

Theory of operation
-------------------
Storm UI shows each component's *latest* errors (Storm keeps the last 10 of a component), while
its error count goes on counting.  So does an :class:`ErrorLog`: it keeps the latest
:data:`KEEP` reports of each (component, task, worker) -- a task's, or a worker's own
(``__worker``) -- and drops the oldest of them to make room, counting every report in
``total``.  However long a bolt raises on every tuple, what is kept stays the same size and
shows its latest errors.

A worker records into one (``Worker.errors``); each report gets the log's next sequence number,
so ``total`` is the number of the next.  The worker ships what it recorded since the number it
shipped last (:meth:`ErrorLog.since`): what was dropped meanwhile is not sent, and the gap in
the numbers says how many reports that was, so the run that takes them in counts them all
(:meth:`ErrorLog.add` with ``dropped``).  The newest report of a task is never dropped, so the
count is exact each time a worker ships.  A run folds the logs of the workers it lost into its
own (:meth:`ErrorLog.absorb`): a worker started again keeps the same names, and its reports
take the place of its predecessor's oldest.

A report keeps at most :data:`MAX_ERROR` characters of the error's repr and
:data:`MAX_TRACEBACK` of its traceback, cutting the middle (:func:`error_report`): an error
that carries a whole payload in its message still fits in a control message, and what the run
keeps stays small.

Logging every error is what floods a terminal when a bolt raises on every tuple; a worker logs
at most :data:`LOG_PER_INTERVAL` reports of a component per :data:`LOG_INTERVAL` seconds (Storm's
``topology.max.error.report.per.interval`` and ``topology.error.throttle.interval.secs``) and
says how many it left out (:class:`LogThrottle`); the log and the statistics keep them all.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import traceback
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

#: Reports kept per (component, task, worker): Storm keeps a component's last 10.
KEEP = 10
#: The most characters of an error's repr, and of its traceback, that a report keeps (a report
#: must fit in a control message, and the run keeps ``KEEP`` of each task's).
MAX_ERROR = 2 << 10
MAX_TRACEBACK = 32 << 10
#: A worker logs at most this many errors of a component every ``LOG_INTERVAL`` seconds.
LOG_PER_INTERVAL = 5
LOG_INTERVAL = 10.0
#: This process's host, named in its error reports.
_HOST = socket.gethostname()


@dataclass
class ErrorReport:
    """An error a component raised or reported."""

    component: str
    task: int
    worker: int
    error: str
    traceback: str
    #: When it was recorded (``time.time()``), as Storm UI shows an error's time.
    time: float = field(default_factory=time.time)
    #: Where: the host and the process that recorded it (Storm UI's error host and port).
    host: str = field(default_factory=lambda: _HOST)
    pid: int = field(default_factory=os.getpid)

    def __str__(self) -> str:
        return f"{self.component} task {self.task} (worker {self.worker}): {self.error}"


def clip(text: str, limit: int) -> str:
    """``text``, or when longer than ``limit`` its start and end with what was cut between."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} ... ({len(text) - 2 * half:,} characters cut) ... {text[-half:]}"


def error_report(component: str, task: int, worker: int, error: BaseException) -> ErrorReport:
    """The report of ``error``: its repr and its traceback, each clipped (``MAX_ERROR``,
    ``MAX_TRACEBACK``; each part of the traceback to ``MAX_ERROR`` first, so that a huge
    message leaves room for the frames)."""
    parts = traceback.format_exception(error)  # (it says "<exception str() failed>" itself)
    text = "".join(clip(part, MAX_ERROR) for part in parts)
    try:
        described = repr(error)
    except Exception:  # a broken __repr__ must not lose the report, nor the tuple's failure
        described = f"{type(error).__name__}(<repr() failed>)"
    return ErrorReport(
        component, task, worker, clip(described, MAX_ERROR), clip(text, MAX_TRACEBACK)
    )


class ErrorList(list[ErrorReport]):
    """What ``errors()`` returns: the reports kept, oldest first, and ``total``, how many were
    reported in all (the ones dropped to keep the latest too)."""

    def __init__(self, reports: Iterable[ErrorReport], total: int) -> None:
        super().__init__(reports)
        self.total = total


class ErrorLog:
    """The latest ``KEEP`` reports of each (component, task, worker), numbered in the order
    recorded, and how many were recorded in all (``total``).  Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[tuple[str, int, int], deque[tuple[int, ErrorReport]]] = {}
        self._recorded = 0  # the next report's number
        self._dropped_before = 0  # reports counted that were never here (``add``'s ``dropped``)

    @property
    def total(self) -> int:
        """How many reports were recorded or counted here, kept or not."""
        return self._recorded + self._dropped_before

    def add(self, report: ErrorReport, dropped: int = 0) -> None:
        """Keep ``report`` (dropping its task's oldest when it has ``KEEP``), counting
        ``dropped`` reports before it that never came here."""
        key = (report.component, report.task, report.worker)
        with self._lock:
            self._dropped_before += dropped
            kept = self._kept.get(key)
            if kept is None:
                kept = self._kept[key] = deque(maxlen=KEEP)
            kept.append((self._recorded, report))
            self._recorded += 1

    def since(self, number: int) -> list[tuple[int, ErrorReport]]:
        """The reports kept whose number is ``number`` or later, with their numbers, in order."""
        with self._lock:
            return sorted(
                (pair for kept in self._kept.values() for pair in kept if pair[0] >= number),
                key=lambda pair: pair[0],
            )

    def absorb(self, other: ErrorLog) -> None:
        """Take in what ``other`` kept, and count what it dropped (a lost worker's log)."""
        kept = other.since(0)
        with self._lock:
            self._dropped_before += other.total - len(kept)
        for _, report in kept:
            self.add(report)

    def reports(self) -> ErrorList:
        """The reports kept, oldest first, and the total."""
        with self._lock:
            kept = [pair for pairs in self._kept.values() for pair in pairs]
            total = self.total
        kept.sort(key=lambda pair: (pair[1].time, pair[0]))
        return ErrorList((report for _, report in kept), total)

    @classmethod
    def merged(cls, logs: Iterable[ErrorLog]) -> ErrorList:
        """The reports of several logs together (the latest ``KEEP`` of each task), and the
        sum of their totals."""
        merged = cls()
        for log in logs:
            merged.absorb(log)
        return merged.reports()


class LogThrottle:
    """Whether to log a component's next error: at most ``LOG_PER_INTERVAL`` every
    ``LOG_INTERVAL`` seconds.  Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: component -> (when its interval started, errors logged in it, errors left out since)
        self._state: dict[str, tuple[float, int, int]] = {}

    def allow(self, component: str) -> int | None:
        """None: do not log this error of ``component``; else log it, saying how many of its
        errors were left out before it."""
        now = time.monotonic()
        with self._lock:
            started, logged, left_out = self._state.get(component, (now, 0, 0))
            if now - started >= LOG_INTERVAL:
                started, logged = now, 0
            if logged < LOG_PER_INTERVAL:
                self._state[component] = (started, logged + 1, 0)
                return left_out
            self._state[component] = (started, logged, left_out + 1)
            return None
