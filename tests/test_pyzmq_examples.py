"""pyzmq 27.3.0's ``examples/``, unchanged, on brokerless through the ``zmq`` alias.

Every example ``tools/pyzmq_examples.py`` drives is run here (its recipes: the peers, drivers
and set-ups each needs), once, by one run of the tool at the start of the module: ``--sides
brokerless`` (comparing with pyzmq is the tool's job, ``make pyzmq-examples``), several at a
time, each in a network namespace of its own where ``unshare -n`` is allowed (else one at a
time on the machine's ports).  With ``BROKERLESS_TEST_AGAINST=pyzmq`` the same examples run on
pyzmq.  The sdist is downloaded with pip into ``.cache/pyzmq/`` the first time.

Not collected, with the reason in the run's header (``not_collected``): examples that fail on
pyzmq itself, and, on brokerless before Python 3.12, those that need a Frame to export the
buffer protocol.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent.parent / "tools"
sys.path.insert(0, str(TOOLS))
import pyzmq_sdist  # noqa: E402
from pyzmq_examples import (  # noqa: E402
    FAILS_ON_PYZMQ,
    NEEDS_BUFFER_PROTOCOL,
    NOT_DRIVEN,
    RECIPES,
    SECURITY_RECIPES,
    listing,
)

SIDE = "pyzmq" if os.environ.get("BROKERLESS_TEST_AGAINST") == "pyzmq" else "brokerless"
JOBS = 4


def not_collected(side: str = SIDE) -> dict[str, str]:
    """Driven examples this module does not run on ``side``, and why."""
    skipped = {name: f"fails on pyzmq itself: {why}" for name, why in FAILS_ON_PYZMQ.items()}
    if side == "brokerless" and sys.version_info < (3, 12):
        skipped |= NEEDS_BUFFER_PROTOCOL
    return skipped


EXAMPLES = [r.argv[0] for r in RECIPES if r.argv[0] not in not_collected()]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, dict]:
    """Each example's outcome on ``SIDE``: one run of the tool for all of them."""
    out = tmp_path_factory.mktemp("pyzmq-examples")
    argv = ["--only", *EXAMPLES, "--sides", SIDE, "--jobs", str(JOBS), "--out", str(out)]
    tool = subprocess.run(
        [sys.executable, str(TOOLS / "pyzmq_examples.py"), *argv],
        capture_output=True,
        text=True,
        timeout=560,
        check=False,
    )
    assert tool.returncode == 0, tool.stdout + tool.stderr
    return json.loads((out / "pyzmq_examples.json").read_text())["results"]


def test_every_example_is_driven_or_says_why_not():
    examples = listing(pyzmq_sdist.prepare()["pyzmq"] / "examples")
    driven = {r.argv[0] for r in RECIPES} | {
        other[0] for r in RECIPES for other in (*r.peers, *r.setup)
    }
    assert sorted(set(examples) - driven) == sorted(NOT_DRIVEN)


def test_every_security_example_is_driven():
    assert sorted(r.argv[0].split("/")[1] for r in SECURITY_RECIPES) == [
        "asyncio-ironhouse.py",
        "grasslands.py",
        "ioloop-ironhouse.py",
        "ironhouse.py",
        "stonehouse.py",
        "strawhouse.py",
        "woodhouse.py",
    ]


@pytest.mark.timeout(600)  # the first test waits for the whole run (and the sdist download)
@pytest.mark.parametrize("example", EXAMPLES)
def test_example_runs(example, results):
    outcome = results[example][SIDE]
    assert outcome["passed"], f"on {SIDE}: {outcome['reason']}"
