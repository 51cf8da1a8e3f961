"""Shared fixtures.

The suite is written against pyzmq's API through ``import brokerless as zmq``.  Setting
``BROKERLESS_TEST_AGAINST=pyzmq`` runs the same tests against real libzmq (through pyzmq), which
is how a test is checked to describe libzmq's behaviour and not just ours; tests marked
``beyond_libzmq`` (or ``beyond_pyzmq``, for pyzmq's Python layer: asyncio, zmqstream) cover
places where brokerless deliberately does better and are deselected then.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib
import inspect
import itertools
import os
import shutil
import socket
import sys
import tempfile
import warnings
from collections.abc import Iterator

import pytest
import zmq as libzmq  # the reference peer, whichever implementation is under test

AGAINST_PYZMQ = os.environ.get("BROKERLESS_TEST_AGAINST") == "pyzmq"
# Every run registers by name (`brokerless stream run` refuses a name already running): the
# suite's runs (subprocesses inherit the variable) use a registry of their own, not the user's
os.environ["BROKERLESS_TOPOLOGIES_DIR"] = tempfile.mkdtemp(prefix="brokerless-topologies-")
atexit.register(shutil.rmtree, os.environ["BROKERLESS_TOPOLOGIES_DIR"], ignore_errors=True)
if AGAINST_PYZMQ:
    import zmq as _reference

    sys.modules["brokerless"] = _reference
    # Submodules the tests import by brokerless's name: pyzmq's counterparts.
    with warnings.catch_warnings():  # zmq.eventloop.ioloop and zmq.auth.ioloop are deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        for _name in (
            "asyncio",
            "auth",
            "auth.asyncio",
            "auth.certs",
            "auth.ioloop",
            "auth.thread",
            "eventloop",
            "eventloop.future",
            "eventloop.ioloop",
            "eventloop.zmqstream",
        ):
            sys.modules[f"brokerless.{_name}"] = importlib.import_module(f"zmq.{_name}")

import brokerless as zmq  # noqa: E402

from .browser import requirements_missing as browser_missing  # noqa: E402
from .jeromq import requirements_missing as jeromq_missing  # noqa: E402
from .ports import free_port  # noqa: E402

# What has no counterpart in pyzmq is not collected in that mode: brokerless's own ZMTP codec
# and pipes, and the layers built on brokerless (they import it by name), its command included.
_BROKERLESS_ONLY = [
    "test_zmtp_*.py",
    "test_pipe.py",
    "test_transport_*.py",
    "test_stream_*.py",
    "test_spark_*.py",
    "test_cli*.py",
    "test_fuzz_*.py",
    "test_internal_limits.py",
    "test_mailbox.py",
    "test_options_vs_libzmq.py",
]
collect_ignore_glob = _BROKERLESS_ONLY if AGAINST_PYZMQ else []

# Tests that need software outside Python: the JeroMQ interop tests (a JDK and Debian's
# libjeromq-java) and the UI's browser test (Debian's chromium and chromium-driver).  CI installs
# them and sets BROKERLESS_REQUIRE_JEROMQ=1 / BROKERLESS_REQUIRE_BROWSER=1, where their absence
# fails every one of those tests; elsewhere such a module is not collected, and the run's header
# says so.
_OPTIONAL = {
    "test_jeromq_interop.py": (jeromq_missing(), "BROKERLESS_REQUIRE_JEROMQ"),
    "test_stream_ui_browser.py": (browser_missing(), "BROKERLESS_REQUIRE_BROWSER"),
}
collect_ignore = [
    module
    for module, (missing, required) in _OPTIONAL.items()
    if missing and os.environ.get(required) != "1"
]


def pytest_report_header(config):
    lines = []
    for module, (missing, _required) in _OPTIONAL.items():
        if missing:
            verdict = (
                "its tests fail (required)" if module not in collect_ignore else "not collected"
            )
            lines.append(f"{module}: {verdict}: {missing}")
    from .test_pyzmq_examples import not_collected

    lines += [
        f"test_pyzmq_examples.py: {example} not collected: {why}"
        for example, why in not_collected().items()
    ]
    return lines or None


# Transports the conformance suite runs over.
TRANSPORTS = ["inproc", "ipc", "tcp"]

_counter = itertools.count()


def pytest_collection_modifyitems(config, items):
    if not AGAINST_PYZMQ:
        return
    skip = [
        item
        for item in items
        if item.get_closest_marker("beyond_libzmq") or item.get_closest_marker("beyond_pyzmq")
    ]
    if skip:
        config.hook.pytest_deselected(items=skip)
        items[:] = [item for item in items if item not in skip]


# -- coroutine tests ---------------------------------------------------------------------------
# ``async def test_...`` runs on a fresh loop of its own, once on asyncio's default loop and once
# on uvloop (where it installs), bounded as a whole by ASYNC_TIMEOUT -- every await in it is.

ASYNC_TIMEOUT = 20.0

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop has no Windows build
    LOOP_FACTORIES = {"asyncio": None}
else:
    LOOP_FACTORIES = {"asyncio": None, "uvloop": uvloop.new_event_loop}


def pytest_generate_tests(metafunc):
    if inspect.iscoroutinefunction(metafunc.function):
        metafunc.fixturenames.append("loop_factory")
        metafunc.parametrize(
            "loop_factory", list(LOOP_FACTORIES.values()), ids=list(LOOP_FACTORIES)
        )


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    test = pyfuncitem.obj
    if not inspect.iscoroutinefunction(test):
        return None
    kwargs = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    _run_bounded(test(**kwargs), pyfuncitem.callspec.params["loop_factory"])
    return True


if sys.version_info >= (3, 11):

    def _run_bounded(coroutine, loop_factory):
        """Run ``coroutine`` to its end on a new loop, failing after ``ASYNC_TIMEOUT``."""

        async def bounded():
            async with asyncio.timeout(ASYNC_TIMEOUT):
                await coroutine

        with asyncio.Runner(loop_factory=loop_factory) as runner:
            runner.run(bounded())

else:  # Python 3.10 has neither asyncio.Runner nor asyncio.timeout

    def _run_bounded(coroutine, loop_factory):
        """Run ``coroutine`` to its end on a new loop, failing after ``ASYNC_TIMEOUT``; then
        cancel what it left running and close the loop, as asyncio.Runner does."""
        loop = asyncio.new_event_loop() if loop_factory is None else loop_factory()
        if loop_factory is None:
            asyncio.set_event_loop(loop)

        async def bounded():
            await asyncio.wait_for(coroutine, ASYNC_TIMEOUT)

        try:
            loop.run_until_complete(bounded())
        finally:
            left = asyncio.all_tasks(loop)
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
            if loop_factory is None:
                asyncio.set_event_loop(None)
            loop.close()


@pytest.fixture
def ctx():
    context = zmq.Context()
    yield context
    context.destroy(linger=0)


@pytest.fixture
def make(ctx):
    """Socket factory: ``make(zmq.PUSH, SNDHWM=5)``; closed with linger 0 after the test.

    Blocking calls are bounded (RCVTIMEO/SNDTIMEO 2 s) so a broken implementation fails a test
    instead of hanging it; pass ``bounded=False`` (or the option itself) to choose otherwise.
    """
    made = []

    def factory(kind, *, bounded=True, **options):
        sock = ctx.socket(kind)
        sock.setsockopt(zmq.LINGER, 0)
        if bounded:
            sock.setsockopt(zmq.RCVTIMEO, 2000)
            sock.setsockopt(zmq.SNDTIMEO, 2000)
        for name, value in options.items():
            sock.setsockopt(getattr(zmq, name), value)
        made.append(sock)
        return sock

    yield factory
    for sock in made:
        if not sock.closed:
            sock.close(linger=0)


@pytest.fixture
def lctx():
    """A libzmq context (through pyzmq) for the peers a test pits against ``make``'s sockets."""
    context = libzmq.Context()
    yield context
    context.destroy(linger=0)


@pytest.fixture
def lmake(lctx):
    """libzmq socket factory, as ``make``: linger 0, blocking calls bounded (5 s), options by
    name; closed with its context after the test."""

    def factory(kind, **options):
        sock = lctx.socket(kind)
        sock.setsockopt(libzmq.LINGER, 0)
        sock.setsockopt(libzmq.RCVTIMEO, 5000)
        sock.setsockopt(libzmq.SNDTIMEO, 5000)
        for name, value in options.items():
            sock.setsockopt(getattr(libzmq, name), value)
        return sock

    return factory


@pytest.fixture(params=TRANSPORTS)
def transport(request):
    return request.param


@pytest.fixture
def endpoint(transport, tmp_path):
    """A factory of fresh endpoints for ``bind``; use ``bound_endpoint(sock)`` to connect."""

    def make() -> str:
        n = next(_counter)
        if transport == "inproc":
            return f"inproc://test-{os.getpid()}-{n}"
        if transport == "ipc":
            return f"ipc://{tmp_path}/s{n}"
        return f"tcp://127.0.0.1:{free_port()}"

    return make


@pytest.fixture
def nonblocking_socketpair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A connected pair of OS sockets, the first non-blocking: the one a test watches (an I/O
    thread's poller), the second the peer that makes it ready."""
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    yield ours, theirs
    ours.close()
    theirs.close()
