"""``mypy --strict`` over all of src/ (pyproject.toml's ``[tool.mypy]``) reports nothing, nor
over user code that calls the public API as pyzmq's examples do (tests/typing_user/).

mypy checks the whole tree, with its cache in the checkout's .mypy_cache, so only a cold run is
slow.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def mypy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


# A cold run (no .mypy_cache, as in CI) costs ~14 s of CPU: 20-30 s on a quiet machine here,
# 95 s when the 2 CPUs are shared with load 14; a warm one 1-3 s.
@pytest.mark.timeout(600)
def test_src_is_mypy_strict_clean():
    result = mypy("--config-file", "pyproject.toml")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.timeout(600)
def test_user_code_calling_the_helpers_type_checks():
    # The helpers (send_string, recv_json, ...) take the socket as a Protocol; a socket that
    # did not match it (its send had no **kwargs the Protocol's had) made mypy reject every
    # call of a helper in user code, while src/ itself checked clean.
    user_code = ROOT / "tests" / "typing_user" / "helpers.py"
    result = mypy("--strict", "--follow-imports=silent", "--ignore-missing-imports", str(user_code))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.timeout(600)
def test_the_storm_starter_examples_type_check():
    # What users copy must type-check under --strict: a windowed bolt given its windows per
    # instance (partial(SumBolt, window_length=Count(30)), Storm's withWindow) did not, its
    # settings being class variables its constructor did not take.
    result = mypy("--strict", "--follow-imports=silent", str(ROOT / "examples" / "storm_starter"))
    assert result.returncode == 0, result.stdout + result.stderr
