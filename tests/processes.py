"""Looking at processes through /proc: the tests that start processes check none is left."""

from __future__ import annotations

import os
from pathlib import Path


def child_pids(pid: int | None = None) -> set[int]:
    """The children of process ``pid`` (default: this one)."""
    pids: set[int] = set()
    try:
        tasks = list(Path(f"/proc/{pid or os.getpid()}/task").glob("*/children"))
    except OSError:  # the process ended meanwhile
        return pids
    for children in tasks:
        try:
            pids.update(int(p) for p in children.read_text().split())
        except OSError:  # the thread or the process ended meanwhile
            continue
    return pids


def descendants(pid: int) -> set[int]:
    """The children of ``pid``, their children, and so on."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        children = child_pids(todo.pop()) - found
        found |= children
        todo += children
    return found


def gone(pid: int) -> bool:
    """The process has exited (a zombie waiting for a parent that never reaps counts)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def describe_tree(pid: int) -> str:
    """What ``pid`` and its descendants are doing, for a test that waited in vain: each one's
    command line, state, kernel wait channel and signal masks (pending, blocked, ignored,
    caught)."""
    lines = []
    for each in [pid, *sorted(descendants(pid))]:
        proc = Path(f"/proc/{each}")
        try:
            command = proc.joinpath("cmdline").read_bytes().replace(b"\0", b" ")
            status = _status(proc)
            wchan = proc.joinpath("wchan").read_text()
            # each thread's own blocked signals (a process-wide signal goes to one that lets
            # it through)
            blocked = [_status(task).get("SigBlk", "?") for task in proc.glob("task/*")]
        except OSError:
            lines.append(f"{each}: ended")
            continue
        fields = ("State", "SigPnd", "ShdPnd", "SigIgn", "SigCgt", "Threads")
        masks = " ".join(f"{name}={status.get(name, '?')}" for name in fields)
        lines.append(
            f"{each}: {command.decode(errors='replace').strip()}\n"
            f"    {masks} SigBlk(per thread)={','.join(blocked)} wchan={wchan or '-'}"
        )
    return "\n".join(lines)


def _status(proc: Path) -> dict[str, str]:
    """The fields of ``/proc/.../status`` (of a process or one of its threads)."""
    return {
        name: value.strip()
        for name, _, value in (
            line.partition(":\t") for line in proc.joinpath("status").read_text().splitlines()
        )
    }
