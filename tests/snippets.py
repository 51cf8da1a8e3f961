"""The code blocks of a Markdown file, and running them as programs (tests/test_readme.py,
tests/test_docs.py).

A block's *marker* is an HTML comment on the nearest non-blank line before its opening fence:
``<!-- run -->``, ``<!-- not-run: why -->`` or ``<!-- file: NAME -->`` (see test_readme.py for
what each means).  Blocks are started all at once (``start``) and waited for one by one, so a
file's snippets run in parallel.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_FENCE = re.compile(r"^```(\w*)\s*$")
_MARKER = re.compile(r"^<!-- (run|not-run|file)(?:: (.*?))? -->$")


@dataclass(frozen=True)
class Snippet:
    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    marker: str | None  # "run", "not-run", "file", or None
    argument: str | None  # the reason, or the file name

    @property
    def name(self) -> str:
        return f"{self.path.name}:{self.line}:{self.language}"


def snippets(path: Path) -> list[Snippet]:
    """Every fenced code block of ``path``, with its marker."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Snippet] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```"), None)
        if end is None:
            raise ValueError(f"{path.name}:{i + 1}: code block never closed")
        before = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = _MARKER.match(before.strip())
        found.append(
            Snippet(
                path=path,
                line=i + 1,
                language=opening.group(1),
                code="\n".join(lines[i + 1 : end]) + "\n",
                marker=marker.group(1) if marker else None,
                argument=marker.group(2) if marker else None,
            )
        )
        i = end + 1
    return found


def environment(activated: bool = True) -> dict[str, str]:
    """This environment with this Python's virtual environment activated, as after ``source
    .venv/bin/activate``: its ``bin`` first on PATH (so ``python`` and ``brokerless`` are this
    venv's); or not activated, as for ``.venv/bin/python script.py`` from a plain shell: its
    ``bin`` nowhere on PATH, so whatever the program starts (Spark's Python workers) must find
    this interpreter by itself.  Neither has PYTHONPATH or PySpark's interpreter variables (the
    suite's own Spark sessions set PYSPARK_PYTHON in this process)."""
    env = dict(os.environ)
    for name in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV"):
        env.pop(name, None)
    bin_dir = str(Path(sys.executable).parent)
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p != bin_dir]
    if activated:
        path.insert(0, bin_dir)
        env["VIRTUAL_ENV"] = str(Path(sys.executable).parent.parent)
    env["PATH"] = os.pathsep.join(path)
    return env


@dataclass
class Running:
    snippet: Snippet
    process: subprocess.Popen[bytes]
    log: Path  # both output streams (a file: a pipe nobody reads yet could fill and block it)


def start(snippet: Snippet, cwd: Path) -> Running:
    """Start ``snippet`` as a program in ``cwd``: Python with this interpreter, its virtual
    environment not activated; shell with ``bash -e``, activated (see :func:`environment`)."""
    stem = f"snippet_{snippet.path.stem}_{snippet.line}"
    suffix = ".py" if snippet.language == "python" else ".sh"
    script = cwd / f"{stem}{suffix}"
    script.write_text(snippet.code, encoding="utf-8")
    command = [sys.executable, script.name] if suffix == ".py" else ["bash", "-e", script.name]
    log = cwd / f"{stem}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=environment(activated=suffix == ".sh"),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a timeout kills the snippet's children too
        )
    return Running(snippet, process, log)


@contextmanager
def started(found: list[Snippet], cwd: Path) -> Iterator[dict[str, Running]]:
    """Every snippet of ``found``, started at once in ``cwd``, by name; those still running at
    the end (a test that failed early) are killed with their children."""
    running = {s.name: start(s, cwd) for s in found}
    try:
        yield running
    finally:
        for each in running.values():
            if each.process.poll() is None:
                os.killpg(each.process.pid, signal.SIGKILL)
                each.process.wait()


def finish(running: Running, timeout: float) -> None:
    """Wait for the snippet; fail with its output unless it exits 0 within ``timeout``."""
    process, name = running.process, running.snippet.name
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise AssertionError(
            f"{name} did not end within {timeout} s; its output:\n{_output(running)}"
        ) from None
    assert process.returncode == 0, (
        f"{name} exited with status {process.returncode}; its output:\n{_output(running)}\n"
        "Make the block a complete program, or mark a deliberate fragment with "
        "<!-- not-run: why --> on the line before it."
    )


def _output(running: Running) -> str:
    return running.log.read_text(encoding="utf-8", errors="replace")[-20_000:]
