"""The driver's main module in a worker process, as multiprocessing's "spawn" start method has it.

Theory of operation
-------------------
A topology built in the script the user runs (``python myscript.py``) has spouts and bolts
whose classes live in ``__main__``, and pickle refers to them as ``__main__.Split``.  A worker
process is ``python -m brokerless.stream worker``: its own ``__main__`` is brokerless's, so
without help those references cannot be resolved.  The driver therefore says how its main
module was started (:func:`describe_main`: the script's path, or the module name of
``python -m mymodule``), and the worker, before it unpickles anything of its job, runs that
script or module again under the name ``__mp_main__`` -- so its ``if __name__ ==
"__main__":`` block does not run -- and installs the result as both ``__main__`` and
``__mp_main__`` (:func:`prepare_main`).  A script that starts a run without that guard would start
one in every worker: :func:`check_not_preparing` (called when a run starts) raises a
``RuntimeError`` saying so instead, which the worker reports to the driver.

A main that cannot be run again -- an interactive session, ``python -c``, a script read
from stdin (``python -``, whose ``__file__`` is ``<stdin>``), a package's ``__main__``
(``python -m brokerless.stream``), IPython -- is described as None: nothing is
re-imported, and :func:`dumps_with_main` refuses a job that refers to anything defined in
``__main__``, with an error saying the components must be importable.
"""

from __future__ import annotations

import io
import os
import pickle
import runpy
import sys
import types
from typing import Any, Literal

__all__ = ["MainModule", "check_not_preparing", "describe_main", "dumps_with_main", "prepare_main"]

#: How the driver's main module can be imported again: ("path", script) or ("module", name).
MainModule = tuple[Literal["path", "module"], str]

_preparing = False  # True while prepare_main() runs the driver's main module in a worker


def describe_main() -> MainModule | None:
    """How this process's main module can be run again in a worker, or None if it cannot."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None:  # python -m name
        name = spec.name
        if name == "__main__" or name.endswith(".__main__"):  # re-running it would run it
            return None
        return ("module", name)
    path = getattr(main, "__file__", None)
    if not path or not os.path.isfile(path):  # interactive, python -c, or python - (<stdin>)
        return None
    stem = os.path.splitext(os.path.basename(path))[0]
    if stem in ("__main__", "ipython"):  # a directory or zip application; IPython itself
        return None
    return ("path", os.path.abspath(path))


def check_not_preparing() -> None:
    """Raise if this process is importing the driver's main module (see the module doc)."""
    if _preparing:
        raise RuntimeError(
            "a topology run was started while a worker process was importing the driver's "
            "main module: the script starts its run at import time.  Start it only under "
            "'if __name__ == \"__main__\":' (as with multiprocessing's spawn start method), "
            'e.g.\n\n    if __name__ == "__main__":\n        with run_multiprocess(topology)'
            " as run:\n            ..."
        )


def prepare_main(main: MainModule | None) -> None:
    """Run the driver's main module as ``__mp_main__`` and make it this process's
    ``__main__``, so that what the driver pickled from its ``__main__`` resolves here."""
    global _preparing
    if main is None:
        return
    kind, target = main
    _preparing = True
    try:
        if kind == "module":
            namespace = runpy.run_module(target, run_name="__mp_main__", alter_sys=True)
        else:
            namespace = runpy.run_path(target, run_name="__mp_main__")
    finally:
        _preparing = False
    module = types.ModuleType("__mp_main__")
    module.__dict__.update(namespace)
    sys.modules["__main__"] = sys.modules["__mp_main__"] = module


class _MainReferences(pickle.Pickler):
    """A pickler that notes the classes and functions it refers to in ``__main__``."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file)
        self.found: list[str] = []

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, (type, types.FunctionType)) and obj.__module__ == "__main__":
            self.found.append(obj.__qualname__)
        return NotImplemented


def dumps_with_main(obj: object, main: MainModule | None) -> bytes:
    """``pickle.dumps(obj)``, refusing (ValueError) what refers to ``__main__`` when the
    worker cannot import ``main``."""
    if main is not None:
        return pickle.dumps(obj)
    buffer = io.BytesIO()
    pickler = _MainReferences(buffer)
    pickler.dump(obj)
    if pickler.found:
        raise ValueError(
            f"{', '.join(sorted(set(pickler.found)))} defined in __main__, which a worker "
            "process cannot import (an interactive session, python -c, a script read from "
            "stdin, or a package's __main__): put the components in a module the workers can "
            "import"
        )
    return buffer.getvalue()
