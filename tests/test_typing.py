"""``mypy --strict`` over src/ (pyproject.toml's ``[tool.mypy]``): clean modules stay clean.

``STRICT_CLEAN`` names the modules and packages that must have no error.  The list only grows;
when it is ``["brokerless.*"]`` all of src/ is strict-clean.  mypy checks the whole tree every
time (the clean modules import the others), with its cache in the checkout's .mypy_cache, so
only a cold run is slow.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

STRICT_CLEAN = [
    # "pkg.*" covers pkg and everything under it; a plain name, that module alone.
    "brokerless",
    "brokerless.__main__",
    "brokerless.asyncio",
    "brokerless.auth.*",
    "brokerless.backend.*",
    "brokerless.cli.*",
    "brokerless.compat.*",
    "brokerless.constants",
    "brokerless.curve",
    "brokerless.curve_keygen",
    "brokerless.deadline",
    "brokerless.decorators",
    "brokerless.devices.*",
    "brokerless.errno",
    "brokerless.error",
    "brokerless.eventloop.*",
    "brokerless.green.*",
    "brokerless.io",
    "brokerless.log.*",
    "brokerless.mailbox",
    "brokerless.option_attrs",
    "brokerless.option_attrs_generated",
    "brokerless.patterns.*",
    "brokerless.security",
    "brokerless.shadow",
    "brokerless.spark.*",
    "brokerless.ssh.*",
    "brokerless.stream.*",
    "brokerless.sugar.*",
    "brokerless.transport",
    "brokerless.transport.endpoint",
    "brokerless.transport.zap",
    "brokerless.utils.*",
    "brokerless.version",
    "brokerless.zmtp",
    "brokerless.zmtp.commands",
    "brokerless.zmtp.mechanisms",
    "brokerless.zmtp.mechanisms.base",
    "brokerless.zmtp.mechanisms.curve",
    "brokerless.zmtp.mechanisms.null",
    "brokerless.zmtp.mechanisms.plain",
    "brokerless.zmtp.mechanisms.zap",
]

_ERROR = re.compile(r"^(?P<path>src/[^:]+\.py):\d+: error: ")


def module_of(path: str) -> str:
    """``src/brokerless/auth/base.py`` → ``brokerless.auth.base`` (a package's ``__init__``: it)."""
    parts = Path(path).with_suffix("").parts[1:]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def is_clean(module: str, names: list[str] = STRICT_CLEAN) -> bool:
    for name in names:
        package = name.removesuffix(".*")
        if module == package or (name.endswith(".*") and module.startswith(package + ".")):
            return True
    return False


def test_module_of():
    assert module_of("src/brokerless/auth/base.py") == "brokerless.auth.base"
    assert module_of("src/brokerless/auth/__init__.py") == "brokerless.auth"
    names = ["brokerless.auth.*", "brokerless.cli"]
    assert is_clean("brokerless.auth.base", names) and is_clean("brokerless.auth", names)
    assert not is_clean("brokerless.authority", names)
    assert is_clean("brokerless.cli", names) and not is_clean("brokerless.cli.sockets", names)


# A cold run (no .mypy_cache, as in CI) costs ~14 s of CPU: 20-30 s on a quiet machine here,
# 95 s when the 2 CPUs are shared with load 14; a warm one 1-3 s.
@pytest.mark.timeout(600)
def test_strict_clean_modules_have_no_mypy_error():
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "pyproject.toml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    # 0: no error, 1: errors (judged below); anything else is mypy failing to run at all.
    assert result.returncode in (0, 1), result.stdout + result.stderr
    errors = [
        line
        for line in result.stdout.splitlines()
        if (match := _ERROR.match(line)) and is_clean(module_of(match["path"]))
    ]
    assert not errors, "\n".join(errors)
