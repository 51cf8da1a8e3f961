"""Run code written for pyzmq on brokerless, unchanged: ``import zmq`` gives ``brokerless``.

``install()`` puts an import hook first on ``sys.meta_path`` that answers every ``zmq`` and
``zmq.X.Y`` import with the module ``brokerless`` / ``brokerless.X.Y`` itself (the same objects,
so ``zmq.Socket is brokerless.Socket``). ``python -m brokerless.compat.as_zmq`` installs it and
runs a script or module, and (unless told not to) its Python child processes too.
"""

from __future__ import annotations

from .alias import ALIAS, TARGET, install, installed, uninstall

__all__ = ["ALIAS", "TARGET", "install", "installed", "uninstall"]
