"""Spark's Python workers in local mode run the driver's own interpreter, even when its
virtual environment is not activated (issue 16: a session built with SparkSession.builder, not
brokerless's session_builder, started them with ``python3`` from PATH, which could not import
brokerless).

The driver here is this interpreter run as ``.venv/bin/python job.py`` from a plain shell: its
``bin`` is not on PATH and neither PYSPARK_PYTHON nor PYTHONPATH is set.  The Structured
Streaming source's case is the README's snippet, run so by tests/test_readme.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .snippets import environment

JOB = """
from pyspark.sql import SparkSession
from brokerless.spark import run_on_spark
from brokerless.stream.examples import word_count_topology

spark = SparkSession.builder.master("local[1]").getOrCreate()
with run_on_spark(word_count_topology(), spark=spark, workers=1) as run:
    run.wait_until_done(120)
    print("sentences acked", run.statistics()["sentences"].acked)
spark.stop()
"""


@pytest.mark.timeout(240)
def test_a_topology_on_a_plain_local_session_from_a_venv_not_activated(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(JOB)
    done = subprocess.run(
        [sys.executable, "job.py"],
        cwd=tmp_path,
        env=environment(activated=False),
        capture_output=True,
        text=True,
        timeout=230,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "sentences acked 8\n" in done.stdout, done.stdout
