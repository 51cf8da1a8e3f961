"""Every run findable by name: a topology started from Python (``run_local``,
``run_multiprocess``, ``run_on_spark``) holds an entry in the registry of running topologies
(``registry.py``) while it runs, as one of ``brokerless stream run`` does, so that
``brokerless stream ps``, ``activate``, ``deactivate`` and ``kill`` in another shell find it
and its UI has a Kill button -- as Storm lists every topology submitted.

Theory of operation
-------------------
The entry points call :func:`register` once the run has started (``run.with_ui``), with what
they were given as ``register``: a name -- the run holds exactly that one, or the run is
stopped and :class:`~.registry.NameTaken` raised, as Storm refuses a topology name already
running -- or True, the default: the topology's name, or when a live run holds it the first of
``NAME-2``, ``NAME-3``, ... that is free (``run.registration.entry.name`` says which), so that a
program is never refused over a name (two test sessions running one topology at once, say),
and a registry that cannot be used is a warning, not an error; False: not registered.

A registered run needs a control server on 127.0.0.1: its UI when it serves one, else a UI
server on a free port of 127.0.0.1 that serves only as such (``run.control_server``: one thread,
asleep until asked; it holds the run weakly, so that a run dropped without ``stop()`` is still
collected -- a Spark run cancels its job then -- and leaves the registry).  Either takes a kill:
the spouts are deactivated at once and, after the kill's wait (a later kill's, when one comes
meanwhile), a timer stops the run, as Storm's kill does; ``wait_until_done`` then raises.
:func:`unregister` -- each mode's ``stop``, and the end of the process -- removes the entry and
closes a control-only server.
"""

from __future__ import annotations

import atexit
import threading
import time
import warnings
import weakref
from typing import TYPE_CHECKING, Protocol

from .registry import NameTaken, Registration, RegistryError
from .registry import register as claim

if TYPE_CHECKING:  # (the UI, and http.server, load only when used)
    from .ui import TopologyUI
    from .ui.model import ObservedRun

    class RegisteredRun(ObservedRun, Protocol):
        """What a run has for its registration (every ``brokerless.stream.run.TopologyRun``)."""

        #: Its entry in the registry while it runs (None: not registered, or stopped).
        registration: Registration | None
        #: Its control server when it serves no UI of its own (None: none, or its UI).
        control_server: TopologyUI | None

        @property
        def ui(self) -> TopologyUI | None: ...

        def stop(self) -> None: ...


#: How many names a run registered by default tries: NAME, NAME-2, ... NAME-_TRIES.
_TRIES = 100


def register(run: RegisteredRun, name: str | bool) -> None:
    """Register ``run`` under ``name`` (the module doc); raises NameTaken or RegistryError
    for a name given."""
    if name is False:
        return
    try:
        registration = _claim(run, name)
    except RegistryError as exc:
        if name is not True:
            raise
        warnings.warn(
            f"topology {run.plan.name!r} is not findable by `brokerless stream ps`: {exc}",
            RuntimeWarning,
            stacklevel=4,
        )
        return
    observed = weakref.proxy(run)  # (a run dropped without stop() can still be collected)
    try:
        server = run.ui
        if server is None:
            from .ui import TopologyUI

            server = run.control_server = TopologyUI(observed)
        server.killable = True
        server.on_kill = lambda: _stop_when_due(observed, server)
        registration.publish(server.url)
    except BaseException:
        registration.close()
        raise
    run.registration = registration
    atexit.register(registration.close)
    weakref.finalize(run, _release, registration, run.control_server)  # (collected unstopped)


def _claim(run: RegisteredRun, name: str | bool) -> Registration:
    workers = run.plan.config.num_workers
    if name is not True:
        if not isinstance(name, str) or not name:
            raise TypeError(
                f"register={name!r}: pass a name to run under (a non-empty string), True for "
                "the topology's, or False not to be listed by `brokerless stream ps`"
            )
        return claim(name, run.mode, workers)
    base = run.plan.name
    for n in range(1, _TRIES + 1):
        try:
            return claim(base if n == 1 else f"{base}-{n}", run.mode, workers)
        except NameTaken:
            continue
    raise RegistryError(f"{_TRIES} runs named {base!r} (or {base}-N) are running already")


def _stop_when_due(run: RegisteredRun, server: TopologyUI) -> None:
    """A kill was taken: stop ``run`` once its wait is over (``server.kill_at``; a later kill
    moves it, so look again then)."""
    assert server.kill_at is not None
    left = server.kill_at - time.monotonic()
    if left > 0:
        timer = threading.Timer(left, _stop_when_due, (run, server))
        timer.daemon = True
        timer.start()
    else:
        run.stop()


def unregister(run: RegisteredRun) -> None:
    """``run`` has stopped: remove its entry, close its control-only server."""
    registration, run.registration = run.registration, None
    server, run.control_server = run.control_server, None
    _release(registration, server)


def _release(registration: Registration | None, server: TopologyUI | None) -> None:
    """Remove the entry of ``registration`` and close the control-only ``server`` (each
    idempotent: a run stopped, then collected)."""
    if registration is not None:
        registration.close()
        atexit.unregister(registration.close)
    if server is not None:
        server.close()
