"""Stand-ins for what pyzmq's test helpers import, to see the failures behind them (diagnosis).

pyzmq's ``tests/conftest.py`` imports ``zmq.asyncio`` and ``tests/zmq_test_utils.py`` touches
``zmq.utils.jsonapi``, ``zmq.backend.Socket`` and ``zmq.sugar.context.Context``. While brokerless
lacks one of them every test of every file is lost at collection, which hides every other cause.
Loaded with ``-p pyzmq_suite_standins`` in the brokerless run (``pyzmq_suite.py --stand-ins``),
this plugin files a stand-in for each one that brokerless does not provide:

- ``zmq.asyncio``, ``zmq.utils``, ``zmq.utils.jsonapi``: empty modules whose every attribute
  raises AttributeError saying the module is missing, so a test that uses one fails naming it;
- ``zmq.backend.Socket`` and ``zmq.sugar.context.Context``: brokerless's Socket and Context
  (brokerless is not pyzmq's CFFI backend; the helpers reset ``Context._instance`` there).

Stand-ins apply only to the diagnostic run, never to the headline figure, and vanish one by
one as brokerless grows the real modules.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

import brokerless


class _Missing(ModuleType):
    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"{self.__name__}.{name}: {self.__name__} is missing in brokerless "
            f"(an empty stand-in of the pyzmq yardstick)"
        )


def _file(name: str, module: ModuleType) -> None:
    """File ``module`` as ``zmq.<name>`` and ``brokerless.<name>`` unless brokerless has it."""
    real = f"brokerless.{name}"
    try:
        importlib.import_module(real)
        return
    except ModuleNotFoundError:
        pass
    sys.modules[real] = sys.modules[f"zmq.{name}"] = module
    parent, _, leaf = real.rpartition(".")
    setattr(sys.modules[parent], leaf, module)


def _install() -> None:
    for name in ("asyncio", "utils", "utils.jsonapi"):
        _file(name, _Missing(f"zmq.{name}"))
    backend = ModuleType("zmq.backend")
    backend.Socket = brokerless.Socket  # type: ignore[attr-defined]
    _file("backend", backend)
    _file("sugar", _Missing("zmq.sugar"))
    context = ModuleType("zmq.sugar.context")
    context.Context = brokerless.Context  # type: ignore[attr-defined]
    _file("sugar.context", context)


_install()
