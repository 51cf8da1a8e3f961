"""pytest plugin for the pyzmq yardstick: one JSON line per event, written as it happens.

Loaded with ``-p pyzmq_suite_recorder``; ``PYZMQ_SUITE_RECORD`` names the file. Because each
line is flushed at once, a file that the harness kills for hanging still tells which tests
finished, and which one was running.
"""

from __future__ import annotations

import json
import os

import pytest

_record = open(os.environ["PYZMQ_SUITE_RECORD"], "a", buffering=1)  # noqa: SIM115


def _write(**event: object) -> None:
    _record.write(json.dumps(event) + "\n")


def reason(longrepr: object) -> str:
    """One line saying why a test failed: the exception line pytest shows after ``E``."""
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        return crash.message.splitlines()[0]
    if isinstance(longrepr, tuple):  # a skip: (path, line, message)
        return str(longrepr[2])
    lines = [line[1:].strip() for line in str(longrepr).splitlines() if line.startswith("E ")]
    return lines[-1] if lines else str(longrepr).strip().splitlines()[-1:][0]


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _write(event="collect_error", nodeid=report.nodeid, reason=reason(report.longrepr))


def pytest_collection_finish(session: pytest.Session) -> None:
    _write(event="collected", nodeids=[item.nodeid for item in session.items])


def pytest_runtest_logstart(nodeid: str) -> None:
    _write(event="start", nodeid=nodeid)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    event = {"event": "report", "nodeid": report.nodeid, "when": report.when}
    event["outcome"] = report.outcome
    if not report.passed:
        event["reason"] = reason(report.longrepr)
    _write(**event)
