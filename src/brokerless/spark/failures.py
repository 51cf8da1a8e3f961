"""Why a topology's Spark job ended: the exception ``collect()`` raised, sorted into what the
runner does next (:class:`JobEnd`), and told in full (:func:`describe`).

Spark says most of it with types: PySpark raises a ``Py4JJavaError`` whose
``java_exception`` is the JVM's own; Spark's barrier scheduler refuses a stage with
``BarrierJobSlotsNumberCheckFailed`` (too few slots now: it carries both numbers) or another
``BarrierJobAllocationFailed`` (a set-up Spark never runs a barrier stage on), and a cancelled
job is a ``SparkException`` whose error condition is ``SPARK_JOB_CANCELLED``.  One case has
only text: a barrier stage that failed is a plain ``SparkException("Job aborted due to stage
failure: ...")`` whose message ends with the failed task's reason, and that reason -- a
``PythonException`` the task's code raised, or a Python worker or executor that died -- is
what decides between giving up and starting again.  :func:`_task_raised` is the one place
that reads it.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["JobEnd", "JobFailure", "describe", "job_failure"]

_SCHEDULER = "org.apache.spark.scheduler."
_SLOTS_REFUSED = _SCHEDULER + "BarrierJobSlotsNumberCheckFailed"
_BARRIER_REFUSED = (  # Spark runs no barrier stage like this, however often it is asked
    _SCHEDULER + "BarrierJobRunWithDynamicAllocationException",
    _SCHEDULER + "BarrierJobUnsupportedRDDChainException",
)
_CANCELLED = "SPARK_JOB_CANCELLED"
_JAVA_STACK_LINE = re.compile(r"^\s+(at |\.\.\. \d+ more)")


class JobEnd(enum.Enum):
    """How an attempt's Spark job ended, as the runner's supervisor acts on it."""

    #: Spark's barrier check refused the stage before any task ran: too few slots right now.
    #: Costs no attempt; the runner waits for slots and submits it again.
    SLOTS_REFUSED = "slots refused"
    #: A worker's process or executor died: a new attempt may not meet that again.
    WORKER_LOST = "worker lost"
    #: Python code in a task raised: every attempt would raise the same way.
    TASK_RAISED = "task raised"
    #: Spark runs no barrier stage in this set-up (dynamic allocation, say).
    REFUSED = "refused"
    #: The job was cancelled (by something other than the run itself).
    CANCELLED = "cancelled"
    #: The job returned while its topology should have been running: the tasks ended by
    #: themselves (a worker that lost the driver, say).
    RETURNED = "returned"
    #: Anything else: the JVM gone, a bug.  Not retried.
    OTHER = "other"


@dataclass(frozen=True)
class JobFailure:
    """How a job ended and why, in full (``cause``); ``slots``: (needed, available) when
    Spark refused the stage for slots."""

    end: JobEnd
    cause: str
    slots: tuple[int, int] | None = None

    @property
    def retried(self) -> bool:
        """Whether a new attempt may succeed where this one failed."""
        return self.end in (JobEnd.WORKER_LOST, JobEnd.RETURNED)


def job_failure(error: BaseException | None) -> JobFailure:
    """Sort the exception a barrier job's ``collect()`` raised (None: it returned)."""
    if error is None:
        return JobFailure(
            JobEnd.RETURNED,
            "the Spark job ended while the topology ran (a worker lost the driver?)",
        )
    cause = describe(error)
    java = getattr(error, "java_exception", None)
    if java is None:
        return JobFailure(JobEnd.OTHER, cause)
    name = java.getClass().getName()
    if name == _SLOTS_REFUSED:
        slots = (int(java.requiredConcurrentTasks()), int(java.maxConcurrentTasks()))
        return JobFailure(JobEnd.SLOTS_REFUSED, cause, slots)
    if name in _BARRIER_REFUSED:
        return JobFailure(JobEnd.REFUSED, cause)
    if _condition(java) == _CANCELLED:
        return JobFailure(JobEnd.CANCELLED, cause)
    if name == "org.apache.spark.SparkException":
        raised = _task_raised(str(java.getMessage() or ""))
        return JobFailure(JobEnd.TASK_RAISED if raised else JobEnd.WORKER_LOST, cause)
    return JobFailure(JobEnd.OTHER, cause)


def _condition(java: Any) -> str | None:
    """A Spark exception's error condition (``SparkThrowable.getCondition``), if it has one;
    ``java`` is a py4j proxy of a Java exception."""
    try:
        condition: str | None = java.getCondition()  # a Java String: py4j gives a str or None
    except Exception:  # not a SparkThrowable
        return None
    return condition


def _task_raised(message: str) -> bool:
    """Whether a failed barrier stage failed because its task's Python code raised.

    Spark gives this only as text, the message of ``SparkException("Job aborted due to stage
    failure: ...")``: for a barrier stage its first line says which task ended the stage and
    the next line starts the task's reason; the reason of a task whose Python code raised
    starts with ``org.apache.spark.api.python.PythonException`` (the traceback follows), a
    Python worker that died reads ``org.apache.spark.SparkException: Python worker exited
    unexpectedly (crashed)`` and a lost executor ``ExecutorLostFailure (...)``.  (Spark's
    layout for other stages puts the reason at the end of the first line, after ``most recent
    failure: Lost task ... (...): ``; it is read there when no second line follows.)  Only
    the start of the reason is read, so a traceback that mentions the word does not count."""
    first, _, rest = message.partition("\n")
    reason = rest.lstrip() or first.rpartition("): ")[2]
    return reason.startswith("org.apache.spark.api.python.PythonException")


def describe(error: BaseException) -> str:
    """The whole of what a failed Spark job says: each exception of the JVM's chain as
    ``class: message`` (messages in full, Python tracebacks included), without the JVM's
    stack frames; ``repr`` for an error that did not come from the JVM."""
    java = getattr(error, "java_exception", None)
    if java is None:
        return repr(error)
    parts = []
    seen = 0
    while java is not None and seen < 16:  # a cause chain is short; a cycle is not followed
        lines = str(java.toString()).splitlines()
        parts.append("\n".join(line for line in lines if not _JAVA_STACK_LINE.match(line)))
        java = java.getCause()
        seen += 1
    return "\ncaused by: ".join(parts).rstrip()
