"""Installs the zmq → brokerless alias at start-up of a child of ``brokerless.compat.as_zmq``.

This directory is put first on ``PYTHONPATH`` by the launcher, so this module shadows any other
``sitecustomize``; it runs that one afterwards, as Python would have.
"""

import importlib.machinery
import importlib.util
import os
import sys

from brokerless.compat import install

install()


def _run_shadowed_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules[__name__] = module
    spec.loader.exec_module(module)


_run_shadowed_sitecustomize()
