"""pyzmq 27.3.0's ``examples/security/`` programs, unchanged, on pyzmq and on brokerless.

Each case runs ``tools/pyzmq_examples.py --only <example>``: the tool takes the examples from
pyzmq's sdist (downloaded with pip into ``.cache/pyzmq/`` the first time, as ``make
pyzmq-suite`` does), runs the example once on pyzmq and once through ``python -m
brokerless.compat.as_zmq``, each after ``generate_certificates.py`` where the example reads
certificates, and moves into a private network namespace where the system allows it (the
examples bind port 9000).  Every example holds both of its ends in one process, so there is no
mixed run (a brokerless end against a libzmq end) to make: both sides must pass.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parent.parent / "tools"
sys.path.insert(0, str(TOOLS))
from pyzmq_examples import SECURITY_RECIPES  # noqa: E402

EXAMPLES = [recipe.argv[0] for recipe in SECURITY_RECIPES]


def test_every_security_example_is_driven():
    assert sorted(name.split("/")[1] for name in EXAMPLES) == [
        "asyncio-ironhouse.py",
        "grasslands.py",
        "ioloop-ironhouse.py",
        "ironhouse.py",
        "stonehouse.py",
        "strawhouse.py",
        "woodhouse.py",
    ]


@pytest.mark.timeout(300)  # a first run downloads the sdist; each side is bounded by the tool
@pytest.mark.parametrize("example", EXAMPLES)
def test_security_example_runs_on_pyzmq_and_on_brokerless(example, tmp_path):
    tool = subprocess.run(
        [sys.executable, str(TOOLS / "pyzmq_examples.py"), "--only", example, "--out", tmp_path],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert tool.returncode == 0, tool.stdout + tool.stderr
    sides = json.loads((tmp_path / "pyzmq_examples.json").read_text())["results"][example]
    assert sides["pyzmq"]["passed"], f"on pyzmq: {sides['pyzmq']['reason']}"
    assert sides["brokerless"]["passed"], f"on brokerless: {sides['brokerless']['reason']}"
