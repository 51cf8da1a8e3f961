"""pyzmq's source distribution, fetched once into a git-ignored cache, as the yardstick's input.

``prepare()`` downloads ``pyzmq==27.3.0``'s sdist with pip (reused when present) and extracts
what the yardstick runs — ``tests/``, ``examples/``, ``mypy_tests/``, ``pytest.ini`` and
``mypy.ini``, never the ``zmq/`` package itself — into two run roots, one per implementation:

- ``run-pyzmq/``: the files as shipped, run against the installed pyzmq;
- ``run-brokerless/``: the same files; only ``mypy.ini`` gains ``ignore_errors`` for ``zmq.*``.
  There ``zmq`` is brokerless's source (a ``mypy-alias/zmq`` link on ``MYPYPATH``), which mypy
  checks like the program's own code, whereas pyzmq, an installed package, gets no errors
  reported inside it; with the line, both sides report only errors in pyzmq's files.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

PYZMQ_VERSION = "27.3.0"
REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / ".cache" / "pyzmq"
SDIST_ROOT = f"pyzmq-{PYZMQ_VERSION}"
EXTRACTED = ("tests/", "examples/", "mypy_tests/", "pytest.ini", "mypy.ini")
SIDES = ("pyzmq", "brokerless")


def sdist_path(cache: Path = CACHE) -> Path:
    return cache / f"{SDIST_ROOT}.tar.gz"


def download(cache: Path = CACHE) -> Path:
    """The sdist, downloaded with pip when the cache does not hold it yet."""
    path = sdist_path(cache)
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary",
                # not ":all:": pip 26 then builds pyzmq's build requirements from source too
                # to read its metadata, and had not finished after 15 minutes
                "pyzmq",
                "-q",
                f"pyzmq=={PYZMQ_VERSION}",
                "-d",
                str(cache),
            ],
            check=True,
        )
    return path


def run_root(side: str, cache: Path = CACHE) -> Path:
    return cache / f"run-{side}"


def mypy_alias_dir(cache: Path = CACHE) -> Path:
    """A MYPYPATH entry in which ``zmq`` is brokerless's package directory."""
    return cache / "mypy-alias"


def _extract(sdist: Path, root: Path) -> None:
    with tarfile.open(sdist) as tar:
        members = []
        for member in tar.getmembers():
            relative = member.name.removeprefix(SDIST_ROOT + "/")
            if relative.startswith(EXTRACTED) or relative in EXTRACTED:
                member.name = relative
                members.append(member)
        tar.extractall(root, members=members, filter="data")


def _alias_mypy_config(root: Path) -> None:
    config = root / "mypy.ini"
    text = config.read_text()
    section = "[mypy-zmq.*]\n"
    if section not in text:
        raise RuntimeError(f"{config} has no {section.strip()} section to extend")
    config.write_text(text.replace(section, section + "ignore_errors = True\n", 1))


def prepare(cache: Path = CACHE) -> dict[str, Path]:
    """Both run roots, extracted from the (downloaded if needed) sdist; returns side → root."""
    sdist = download(cache)
    roots = {side: run_root(side, cache) for side in SIDES}
    for side, root in roots.items():
        if not (root / "tests" / "conftest.py").exists():
            _extract(sdist, root)
            if side == "brokerless":
                _alias_mypy_config(root)
    alias = mypy_alias_dir(cache) / "zmq"
    if not alias.is_symlink():
        alias.parent.mkdir(parents=True, exist_ok=True)
        alias.symlink_to(REPO / "src" / "brokerless", target_is_directory=True)
    return roots
