"""Error reports of a topology on Spark keep each task's latest and count them all, as in the
other modes (``test_stream_errors.py``): the barrier tasks ship them over the control channel."""

from __future__ import annotations

import pytest

from brokerless.spark import run_on_spark
from brokerless.stream.errorlog import KEEP

from .test_spark_topology import spark  # noqa: F401  (the module's Spark session)
from .test_stream_errors import N, assert_latest_kept, raising


@pytest.mark.slow  # the driver's side is the multi-process run's (test_stream_errors.py)
@pytest.mark.timeout(240)
def test_a_spark_run_keeps_the_latest_errors_of_each_task_and_counts_them_all(spark):  # noqa: F811
    with run_on_spark(raising(tasks=2, workers=2), spark=spark, workers=2) as run:
        run.wait_until_done(150)
        errors = run.errors()
    assert_latest_kept(errors, run.plan.component_tasks["raise"])
    assert len(errors) == 2 * KEEP and errors.total == 2 * N
