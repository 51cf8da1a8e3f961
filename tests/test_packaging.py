"""The project's own packaging builds without a warning (issue 16: setuptools warned about
``project.license`` three times during every install).

The wheel is built as pip builds it for ``pip install``: in an isolated build environment with
the build-system's requirements from the package index, so the test sees what a user's install
shows.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(300)
def test_the_wheel_builds_without_warnings(tmp_path: Path) -> None:
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--wheel-dir",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=290,
    )
    output = built.stdout + built.stderr
    assert built.returncode == 0, output
    assert list(tmp_path.glob("brokerless-*.whl")), output
    warnings = re.findall(r"^.*\b\w+Warning\b.*$", output, re.M)
    assert not warnings, "\n".join(warnings)
