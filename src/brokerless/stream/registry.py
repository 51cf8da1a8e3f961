"""Where runs say that they run -- ``brokerless stream run`` and ``stream ui``, and runs started
from Python (``registration.py``) -- so that ``stream ps``, ``activate``, ``deactivate`` and
``kill`` in another shell can find them by name.

Theory of operation
-------------------
A run owns one file in the registry directory while it runs: ``NAME.json`` (the name quoted
for a file name) holding its name, pid, mode, workers, start time (Unix time) and the URL of
its control server -- the topology UI's HTTP server on 127.0.0.1 (see ``stream/ui``), which
every registered run serves for this, with or without a UI asked for.  The directory is
``$BROKERLESS_TOPOLOGIES_DIR`` if set, else ``$XDG_RUNTIME_DIR/brokerless/topologies``, else
``brokerless-UID/topologies`` in the temporary directory; it is made private to the user (0700)
and must be theirs.

Names are unique, as Storm refuses to submit a topology under a name already running: the file
is created whole or not at all (a hard link of a file written aside; for ``stream run``, before
any worker starts), so of two runs under one name the second fails saying who has it.  The run
writes its control URL into the file once it is up (replacing it whole: a reader sees the old
content or the new); until then ``stream ps`` shows it as starting.  The file is removed when
the run ends, on Ctrl-C and SIGTERM too (the command takes them as exceptions; a program's run
at its exit, or when it is collected unstopped), by the process that made it only (not by a
forked child) and only if it is still its own (not a later run's of the name).  A run killed
outright (SIGKILL, a lost machine) leaves its file: an entry whose process is gone -- no such
pid, or a pid reused by a process started at another time (``/proc``'s start time, where there
is one) -- is *stale*: readers ignore and remove it, and a new run takes its name.  Removing it
is done holding a lock on the directory (``flock``, which the kernel releases when its process
dies), looking at the file again first: of two runs that found one stale entry at once, the
second would otherwise remove the entry the first had just made in its place, and both would run
under the name.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from urllib.parse import quote

#: The environment variable that points the registry elsewhere (tests do).
DIRECTORY_VAR = "BROKERLESS_TOPOLOGIES_DIR"


@dataclass(frozen=True)
class Entry:
    """A running topology, as its registry file says."""

    name: str
    pid: int
    mode: str
    workers: int
    started: float  # Unix time
    url: str | None = None  # the control server, once it is up
    pid_started: str | None = None  # the process's start time in /proc (pid reuse)

    @property
    def alive(self) -> bool:
        """Whether the process that wrote the entry is still there."""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # someone else's process now
            return False
        return self.pid_started is None or self.pid_started == _process_started(self.pid)


class RegistryError(RuntimeError):
    """The registry cannot be used (the message says why and what to do)."""


class NameTaken(RegistryError):
    """A run under this name is running already."""


def directory() -> Path:
    """The registry directory (made if need be; see the module doc)."""
    where = os.environ.get(DIRECTORY_VAR)
    if where:
        path = Path(where)
    elif os.environ.get("XDG_RUNTIME_DIR"):
        path = Path(os.environ["XDG_RUNTIME_DIR"], "brokerless", "topologies")
    else:
        path = Path(tempfile.gettempdir(), f"brokerless-{os.getuid()}", "topologies")
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        theirs = path.stat().st_uid != os.getuid()
    except OSError as exc:
        raise RegistryError(
            f"cannot use {path} as the registry of running topologies ({exc.strerror}): "
            f"point {DIRECTORY_VAR} at a directory of yours"
        ) from None
    if theirs:
        raise RegistryError(
            f"the registry of running topologies {path} belongs to another user: point "
            f"{DIRECTORY_VAR} at a directory of yours"
        )
    return path


def _file(name: str) -> Path:
    return directory() / f"{quote(name, safe='')}.json"


def _process_started(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot), where /proc says it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]  # field 22; the fields after ")" start at 3


def _live(path: Path) -> Entry | None:
    """The entry in ``path`` if its process is alive, else None (stale); FileNotFoundError
    when there is none."""
    try:
        entry = Entry(**json.loads(path.read_text()))
    except (ValueError, TypeError):  # not one of ours, or half-written by a crash
        return None
    return entry if entry.alive else None


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """The registry locked against other processes removing stale entries (see the module
    doc); released when this process dies, however."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _read(path: Path) -> Entry | None:
    """The entry in ``path``; None if it is gone, or stale (then it is removed)."""
    try:
        entry = _live(path)
        if entry is None:
            with _locked(path.parent):
                entry = _live(path)  # (another run may have taken the name since: look again)
                if entry is None:
                    path.unlink()
    except FileNotFoundError:
        return None
    return entry


def running() -> list[Entry]:
    """The runs registered now, oldest first (stale entries removed on the way)."""
    found = [_read(path) for path in directory().glob("*.json")]
    return sorted((e for e in found if e is not None), key=lambda e: e.started)


def find(name: str) -> Entry | None:
    return _read(_file(name))


class Registration:
    """This process's entry, while it runs (:func:`register`)."""

    def __init__(self, entry: Entry, path: Path) -> None:
        self.entry = entry
        self.path = path

    def publish(self, url: str) -> None:
        """Say where the control server is (the run is up): at ``url``, or on 127.0.0.1 when
        it listens on all addresses."""
        self.entry = replace(self.entry, url=url.replace("://0.0.0.0:", "://127.0.0.1:", 1))
        _write_aside(self.path, self.entry).replace(self.path)

    def __enter__(self) -> Registration:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove the entry (the run has ended; idempotent): if it is still this run's -- not
        a later run's of this process under the name -- and this is its process (a forked
        child's exit leaves its parent's run listed)."""
        if os.getpid() != self.entry.pid:
            return
        with suppress(FileNotFoundError, ValueError, TypeError):
            if Entry(**json.loads(self.path.read_text())) == self.entry:
                self.path.unlink()


def _write_aside(path: Path, entry: Entry) -> Path:
    """``entry`` written to a file of its own next to ``path`` (not a ``*.json``), to be put
    in place whole."""
    aside = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    aside.write_text(json.dumps(asdict(entry)))
    return aside


def register(name: str, mode: str, workers: int) -> Registration:
    """Hold the name ``name`` in the registry (until ``close()``, or the end of a ``with``
    block); raises :class:`NameTaken` if a live run holds it."""
    pid = os.getpid()
    entry = Entry(name, pid, mode, workers, time.time(), None, _process_started(pid))
    path = _file(name)
    written = _write_aside(path, entry)
    try:
        while True:
            try:
                os.link(written, path)  # (created whole, or not at all when it exists)
                return Registration(entry, path)
            except FileExistsError:
                holder = _read(path)  # (a stale one is removed: try again)
                if holder is not None:
                    raise NameTaken(_taken(holder)) from None
    finally:
        written.unlink()


def _taken(holder: Entry) -> str:
    since = time.strftime("%H:%M:%S", time.localtime(holder.started))
    return (
        f"a topology named {holder.name!r} is already running (pid {holder.pid}, since "
        f"{since}): stop it with `brokerless stream kill {holder.name}`, or run this one "
        "under another --name"
    )
