"""Run a program with ``zmq`` aliased to brokerless.

    python -m brokerless.compat.as_zmq [--no-inherit] (-m module | -c code | script) [args...]

Arguments after the target go to it, as with ``python``. The alias is installed in this process
and, unless ``--no-inherit`` is given, in every Python child process that inherits the
environment (``subprocess`` with ``sys.executable``, multiprocessing's spawn and forkserver,
Jupyter kernels): a directory holding a ``sitecustomize`` that installs it is put first on
``PYTHONPATH``; that ``sitecustomize`` then runs the one it shadows, if any.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path
from types import ModuleType

from .alias import install

#: The directory whose ``sitecustomize`` installs the alias in child processes.
INHERIT_DIR = Path(__file__).resolve().parent / "_inherit"

USAGE = (
    "usage: python -m brokerless.compat.as_zmq [--no-inherit] (-m module | -c code | script) "
    "[args...]"
)


def _inherit_in_children() -> None:
    entries = [str(INHERIT_DIR)]
    if os.environ.get("PYTHONPATH"):
        entries.append(os.environ["PYTHONPATH"])
    os.environ["PYTHONPATH"] = os.pathsep.join(entries)


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    inherit = True
    if args[:1] == ["--no-inherit"]:
        inherit = False
        del args[0]
    if args[:1] in (["-h"], ["--help"]):
        print(USAGE)
        return
    if not args or (args[0] in ("-m", "-c") and len(args) < 2):
        print(USAGE, file=sys.stderr)
        raise SystemExit(2)
    install()
    if inherit:
        _inherit_in_children()
    if args[0] == "-m":
        sys.argv = [args[1], *args[2:]]  # runpy replaces argv[0] with the module's path
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    elif args[0] == "-c":
        sys.argv = ["-c", *args[2:]]
        main_module = sys.modules["__main__"] = ModuleType("__main__")
        exec(compile(args[1], "<string>", "exec"), main_module.__dict__)
    else:
        script = Path(args[0])
        sys.argv = [args[0], *args[1:]]
        sys.path[0] = str(script.resolve().parent)  # as `python script` sets it
        runpy.run_path(args[0], run_name="__main__")


if __name__ == "__main__":
    main()
