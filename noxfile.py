"""``make test-all``: the test suite on every CPython the package supports, one after another,
each in a virtual environment of its own under ``.nox/``, made and filled by uv.

The interpreters are the machine's own (``python3.10`` ... on PATH; the Makefile makes pyenv's
shims answer for all of them): a missing one fails the run rather than being skipped.
Arguments after ``--`` go to pytest: ``nox -- tests/test_cli.py -x``.
"""

from __future__ import annotations

import nox

PYTHONS = ["3.10", "3.11", "3.12", "3.13"]

nox.options.default_venv_backend = "uv"
nox.options.error_on_missing_interpreters = True
nox.options.sessions = ["tests"]


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The suite, as ``make test`` runs it (ruff, which does not depend on the version, once)."""
    # uv's cache first (as the Makefile's set-up): where the index's answers carry no caching
    # headers uv would otherwise download and build PySpark again for every venv.  What the
    # cache lacks, the second install brings; what it had, the second finds installed.
    session.install("--offline", "-e", ".[test]", success_codes=[0, 1], silent=True)
    session.install("-e", ".[test]")
    session.run("python", "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile", *session.posargs)
