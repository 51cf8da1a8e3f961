"""The topology UI of a run on Spark: its JSON says the mode and, after a worker is lost, the
attempt history (which attempt runs, why each earlier one ended, the workers' pids)."""

from __future__ import annotations

import json
import os
import signal
import urllib.request
from typing import Any

import pytest

from brokerless.spark import run_on_spark
from brokerless.spark.demo import sherlock_topology

from .stream_topologies import wait_for
from .test_spark_topology import SLOTS, spark  # noqa: F401  (the module's Spark session)


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


@pytest.mark.timeout(240)
def test_the_ui_of_a_spark_run_shows_its_attempt_history(spark):  # noqa: F811
    topology = sherlock_topology(lines=1500, rate=400)  # ~4 s per attempt: killed mid-run
    with run_on_spark(topology, spark=spark, workers=SLOTS, max_attempts=3, ui=True) as run:
        stats_url = run.ui.url + "api/stats"
        assert get(run.ui.url + "api/topology")["mode"] == "spark"
        # findable by name (`brokerless stream ps`, `kill`) at its UI, as a run of `stream run`
        assert (run.registration.entry.mode, run.registration.entry.url) == ("spark", run.ui.url)
        stats = wait_for(
            lambda: (s := get(stats_url))["components"]["lines"]["acked"] >= 100 and s,
            timeout=60,
            what="100 lines acked",
        )
        attempts = stats["attempts"]
        assert attempts["attempt"] == 1 and attempts["restarts"] == []
        assert attempts["max_attempts"] == 3
        pids = sorted(w["pid"] for w in attempts["workers"])
        assert pids == sorted(run.worker_pids) and len(pids) == SLOTS
        os.kill(pids[1], signal.SIGKILL)
        restarted = wait_for(
            lambda: (s := get(stats_url))["attempts"]["attempt"] == 2 and s,
            timeout=120,
            what="the second attempt",
        )
        assert len(restarted["attempts"]["restarts"]) == 1
        assert restarted["attempts"]["restarts"][0].startswith("attempt 1: ")
        run.wait_until_done(150)
        done = wait_for(
            lambda: (s := get(stats_url))["components"]["lines"]["acked"] == 1500 and s,
            timeout=30,
            what="the second attempt's figures",
        )
        assert pids[1] not in [w["pid"] for w in done["attempts"]["workers"]]
    assert run.registration is None  # (stopped: no longer listed)
    # the figures over Storm UI's windows and a bolt's capacity come from Spark tasks too
    split = done["components"]["split"]
    assert split["windows"]["10m"]["processed"] == split["processed"] >= 1500
    assert split["capacity"] is not None and done["components"]["lines"]["capacity"] is None
