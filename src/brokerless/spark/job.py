"""A topology attempt's Spark job: one barrier stage collected in a background thread, under a
job group of its own so that it can be cancelled (``SparkRun`` submits one per attempt, and
cancels the groups of a run dropped without ``stop()``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pyspark import SparkContext


class BarrierJob:
    """One submission's barrier job, collected in a background thread under its own group."""

    def __init__(self, sc: SparkContext, group: str, description: str, rdd: Any) -> None:
        self.group = group
        self.error: BaseException | None = None
        self.finished = threading.Event()
        self.thread = threading.Thread(
            target=self._run, args=(sc, description, rdd), name=f"{group}:job", daemon=True
        )
        self.thread.start()

    def tasks(self, sc: SparkContext) -> str:
        """What Spark's status tracker says of this job's tasks (for an error message)."""
        tracker = sc.statusTracker()
        described = []
        for job_id in tracker.getJobIdsForGroup(self.group):
            job = tracker.getJobInfo(job_id)
            if job is None:  # forgotten already
                continue
            for stage_id in job.stageIds:
                stage = tracker.getStageInfo(stage_id)
                if stage is not None:
                    described.append(
                        f"stage {stage_id} (attempt {stage.currentAttemptId}, job {job_id}, "
                        f"{job.status}): {stage.numTasks} "
                        f"task(s), {stage.numActiveTasks} running, {stage.numCompletedTasks} "
                        f"completed, {stage.numFailedTasks} failed"
                    )
        return "; ".join(described) or "Spark reports no stage for it"

    def _run(self, sc: SparkContext, description: str, rdd: Any) -> None:
        try:
            sc.setJobGroup(self.group, description, interruptOnCancel=True)
            rdd.collect()
        except BaseException as exc:
            self.error = exc
        finally:
            self.finished.set()


def abandon(
    sc: SparkContext,
    groups: list[str],
    close: Callable[[], None],
    ticking: threading.Event,
) -> None:
    """What stop() would have ended, for a run dropped without it."""
    ticking.set()
    for group in groups:
        try:
            sc.cancelJobGroup(group)
        except Exception:  # the session has ended: so have its jobs
            pass
    close()
