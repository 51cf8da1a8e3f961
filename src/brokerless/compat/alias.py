"""The ``zmq`` → ``brokerless`` import alias.

Theory of operation: a meta path finder placed before every other one claims the names
``zmq`` and ``zmq.*``. For ``zmq.X.Y`` it looks for ``brokerless.X.Y``; when that does not exist
it raises ModuleNotFoundError naming ``zmq.X.Y`` itself, so no later finder (the real pyzmq, if
installed) can hand out a module of its own under that name. Otherwise its loader's
``create_module`` imports ``brokerless.X.Y`` and returns that very module object, so the import
system files one module under two names. The import system then stamps the alias's spec on
the module; ``exec_module`` puts the module's own ``__spec__`` back, so ``brokerless`` keeps
describing itself (``importlib.reload``, pickling by module name and ``-m`` all rely on it).
``python -m zmq.X`` never imports ``zmq.X``: runpy asks the alias's loader for the code and
runs it as ``__main__``, so ``get_code`` hands over ``brokerless.X``'s.

The alias cannot share a process with the real pyzmq: two modules would answer to the same
name. ``install()`` refuses when ``zmq`` is already imported from anywhere else.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import CodeType, ModuleType

#: The name code imports, and the package that answers to it.
ALIAS = "zmq"
TARGET = "brokerless"


def _target_name(fullname: str) -> str | None:
    """``zmq.X.Y`` → ``brokerless.X.Y``; None for names outside the alias."""
    if fullname == ALIAS or fullname.startswith(ALIAS + "."):
        return TARGET + fullname[len(ALIAS) :]
    return None


class _AliasLoader(importlib.abc.Loader):
    """Loads ``zmq.X`` as the already existing (or now imported) ``brokerless.X``."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._own_spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(self.target)
        self._own_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system set module.__spec__ to the alias's spec; the module is brokerless's.
        module.__spec__ = self._own_spec

    def get_code(self, fullname: str) -> CodeType | None:
        """``brokerless.X``'s code, which runpy asks for to run ``python -m zmq.X``."""
        spec = importlib.util.find_spec(self.target)
        loader = spec.loader if spec is not None else None
        if not isinstance(loader, importlib.abc.InspectLoader):
            raise ImportError(f"no code to run for {fullname!r} ({self.target!r})", name=fullname)
        return loader.get_code(self.target)


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        real = _target_name(fullname)
        if real is None:
            return None
        module = sys.modules.get(real)
        spec = module.__spec__ if module is not None else importlib.util.find_spec(real)
        if spec is None:
            raise ModuleNotFoundError(
                f"No module named {fullname!r} (the zmq alias looked for {real!r}, which "
                f"does not exist)",
                name=fullname,
            )
        return importlib.machinery.ModuleSpec(
            fullname,
            _AliasLoader(real),
            is_package=spec.submodule_search_locations is not None,
        )


_FINDER = _AliasFinder()


def installed() -> bool:
    """Whether the alias is installed in this process."""
    return _FINDER in sys.meta_path


def _foreign_zmq_modules() -> list[str]:
    return [
        name
        for name, module in list(sys.modules.items())
        if _target_name(name) is not None and not getattr(module, "__name__", "").startswith(TARGET)
    ]


def install() -> None:
    """Make ``import zmq`` (and ``zmq.X.Y``) give brokerless's modules in this process.

    Raises RuntimeError when the real pyzmq is already imported: two libraries cannot both be
    ``zmq`` in one process, so the alias must be installed before anything imports ``zmq``.
    Installing twice is harmless.
    """
    foreign = _foreign_zmq_modules()
    if foreign:
        where = getattr(sys.modules[foreign[0]], "__file__", None) or "an unknown place"
        raise RuntimeError(
            f"cannot alias zmq to brokerless: the real pyzmq is already imported in this process "
            f"({foreign[0]} from {where}); install the alias before anything imports zmq, "
            f"e.g. run the program with `python -m brokerless.compat.as_zmq`"
        )
    if not installed():
        sys.meta_path.insert(0, _FINDER)


def uninstall() -> None:
    """Remove the alias; the ``zmq`` names it filed in ``sys.modules`` go with it."""
    while _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    foreign = set(_foreign_zmq_modules())
    for name in [name for name in sys.modules if _target_name(name) is not None]:
        if name not in foreign:
            del sys.modules[name]
