"""Every README snippet runs (issue 16): a reader can paste any of them and it works.

The rules, by the marker on the nearest non-blank line before a block's opening fence:

- A ```python block is a complete program: it runs in a subprocess of its own and must exit 0
  within ``TIMEOUT``.  ``<!-- not-run: why -->`` exempts a deliberate fragment (there is none
  today; at most ``MAX_FRAGMENTS`` are allowed).  Snippets that need a peer make their own
  (a socket in the same program), and the Spark ones start their own local Spark.
- ``<!-- file: NAME -->`` before a python block also saves it as NAME for the shell blocks
  (the word count is ``readme_topology.py``, which the command-line block runs).
- A ```sh / ```bash block runs (``bash -e``) only when marked ``<!-- run -->``; every other one
  must say why not with ``<!-- not-run: why -->``, and an unmarked one fails: shell lines may
  install packages, start servers that wait for ever or run this very suite, so none runs, or
  is skipped, by accident.  Run today: the command-line block (a PULL and a PUSH through the
  ``brokerless`` command, then the word count in two worker processes: cheap and local).  Not
  run: ``make demo`` / ``make test`` (the suite itself; the demo runs in
  test_spark_topology.py), the Jupyter commands (a kernel waits for its client, and the
  kernelspec would be installed in the user's directory; test_jupyter.py runs both), the
  ``spark-submit`` lines (they need a Spark cluster) and the suite against pyzmq (the suite).

Every snippet runs in one temporary directory (the shell block finds ``readme_topology.py``
there): a python block with this interpreter, its virtual environment not activated (as
``.venv/bin/python snippet.py`` from a plain shell: the Spark ones must start Spark's Python
workers on it by themselves), a shell block with it activated (``brokerless`` on PATH).  All of
them start at once, so the file costs about as long as its slowest snippet; the ones that
start Spark are marked slow (``make test-slow``), and only the selected snippets start.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from .snippets import ROOT, Running, environment, finish, snippets, started

README = ROOT / "README.md"
TIMEOUT = 300  # seconds; the Spark snippets take 20-70 s on a busy 2-CPU machine
MAX_FRAGMENTS = 2
SHELLS = ("sh", "bash")

ALL = snippets(README)
RUNNABLE = [
    s
    for s in ALL
    if (s.language == "python" and s.marker != "not-run")
    or (s.language in SHELLS and s.marker == "run")
]



def starts_spark(code: str) -> bool:
    """The snippets that start a Spark session of their own (15-20 s each) are marked slow:
    what they run is tested in test_spark_topology.py and test_spark_io.py."""
    return "run_on_spark" in code or "SparkSession" in code


@pytest.fixture(scope="module")
def running(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Running]]:
    cwd = tmp_path_factory.mktemp("readme")
    for snippet in ALL:
        if snippet.marker == "file":
            (cwd / snippet.argument).write_text(snippet.code, encoding="utf-8")
    chosen = {  # only the snippets this run selected (``-m``, ``-k``) are started
        item.callspec.params["name"]
        for item in request.session.items
        if item.module is request.module and item.originalname == "test_snippet_runs"
    }
    with started([s for s in RUNNABLE if s.name in chosen], cwd) as running:
        yield running


@pytest.mark.timeout(TIMEOUT + 30)
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(s.name, marks=pytest.mark.slow) if starts_spark(s.code) else s.name
        for s in RUNNABLE
    ],
)
def test_snippet_runs(name: str, running: dict[str, Running]) -> None:
    finish(running[name], TIMEOUT)


@pytest.mark.timeout(60)
def test_readme_topology_does_nothing_when_imported(tmp_path: Path) -> None:
    """``brokerless stream run readme_topology:topo`` imports the file in the driver and in
    each worker: what it runs as a script (its ``complete_topology``) must not run then."""
    (snippet,) = [s for s in ALL if s.marker == "file" and s.argument == "readme_topology.py"]
    (tmp_path / "readme_topology.py").write_text(snippet.code, encoding="utf-8")
    imported = subprocess.run(
        [sys.executable, "-c", "import readme_topology; print(readme_topology.topo.name)"],
        cwd=tmp_path,
        env=environment(activated=False),
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout == "word-count\n"


@pytest.mark.timeout(90)
def test_ui_snippet_keeps_the_page_up_until_enter(tmp_path: Path) -> None:
    """The topology-UI snippet (run with stdin at /dev/null above, where it ends at once)
    serves its page after the run is done, until Enter is pressed."""
    (snippet,) = [s for s in RUNNABLE if "ui=True" in s.code]
    (tmp_path / "ui_snippet.py").write_text(snippet.code, encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, "ui_snippet.py"],
        cwd=tmp_path,
        env=environment(activated=False) | {"PYTHONUNBUFFERED": "1"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        opened = process.stdout.readline()
        assert opened.startswith("open http://"), opened + process.stdout.read()
        prompt = ""
        while not prompt.endswith("Enter to stop the page "):
            char = process.stdout.read(1)
            assert char, f"the snippet ended without waiting: {opened}{prompt}"
            prompt += char
        with urllib.request.urlopen(opened.split()[1], timeout=10) as page:
            assert b"<title>brokerless topology</title>" in page.read()
        process.stdin.write("\n")
        process.stdin.flush()
        assert process.wait(timeout=30) == 0, process.stdout.read()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_every_block_is_run_or_says_why_not() -> None:
    problems = []
    for s in ALL:
        if s.language not in ("python", *SHELLS):
            problems.append(f"{s.name}: a code block needs a language: python, sh or bash")
        elif s.marker == "not-run" and not s.argument:
            problems.append(f"{s.name}: <!-- not-run: why --> needs its reason")
        elif s.marker == "file" and (s.language != "python" or not s.argument):
            problems.append(f"{s.name}: <!-- file: NAME --> names a python block's file")
        elif s.language in SHELLS and s.marker not in ("run", "not-run"):
            problems.append(
                f"{s.name}: a shell block is run only when marked <!-- run -->; "
                "otherwise mark it <!-- not-run: why -->"
            )
        elif s.language == "python" and s.marker == "run":
            problems.append(f"{s.name}: python blocks run anyway: drop <!-- run -->")
    assert not problems, "\n".join(problems)
    fragments = [s.name for s in ALL if s.language == "python" and s.marker == "not-run"]
    assert len(fragments) <= MAX_FRAGMENTS, f"too many python fragments: {fragments}"
    assert any(s.language == "python" for s in RUNNABLE)


def test_links_stay_in_the_repository() -> None:
    """Every link is a public URL, an anchor, or a file of this repository that exists."""
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    bad = [
        target
        for target in targets
        if not re.match(r"^(https?:|mailto:|#)", target)
        and not _inside(ROOT / target.partition("#")[0])
    ]
    assert not bad, f"README links to what is not in the repository: {bad}"
    assert "../" not in text, "README points outside the repository (../)"


def _inside(path: Path) -> bool:
    resolved = path.resolve()
    return resolved.is_relative_to(ROOT) and resolved.exists()
