"""The topology UI's web server: a page, JSON endpoints and Storm UI's actions, served from
the driver.

Theory of operation
-------------------
A :class:`TopologyUI` is a stdlib ``ThreadingHTTPServer`` on a daemon thread of the driver
(one short-lived thread per connection), asleep until a connection comes or ``close()`` wakes
it (through a socket pair: no polling, and a run that stops closes it at once).  It serves:

* ``/`` -- the page (``static/index.html``, self-contained: its script draws the graph as SVG
  and polls the two endpoints below; nothing is fetched from elsewhere);
* ``/api/topology`` -- the plan (``model.describe_topology``), computed again only when a
  rebalance has changed it;
* ``/api/stats`` -- the live figures (``model.describe_stats``), with the state of a kill
  (below);
* ``/api/status`` -- what ``brokerless stream ps`` shows: the name, the workers and the status
  (``active``, ``inactive``, ``rebalancing``, ``killed``: stopping after a kill's wait, or
  ``stopped``), read from the run without asking its workers;

and it takes four actions, Storm UI's buttons: a POST of ``/api/deactivate`` (the spouts stop
emitting; the tuples in flight are still processed) or ``/api/activate``, answered with
``{"active": ...}``, and ``/api/kill?wait=SECONDS`` -- Storm's kill: the spouts are deactivated
at once and the run stops after the wait (default: the topology's ``message_timeout_secs``), so
that the tuples in flight can finish; answered with ``{"killed": true, "wait_s": ...}``; and
``/api/rebalance?workers=N&executors=COMPONENT=N&wait=SECONDS`` (``executors`` as often as
there are components to change) -- Storm's rebalance (``TopologyRun.rebalance``), checked at
once and carried out in the background; answered with ``{"rebalancing": what changes,
"wait_s": ...}``, 400 for what the rebalance refuses (the error says why), 409 while another
is under way or once the run is killed (as Storm refuses it then).
Whoever runs the topology does the stop: it says it will by setting ``killable`` (``brokerless
stream run`` and ``stream ui`` do, and wait on ``killed``; a run started from Python does when
it is registered, and stops itself through ``on_kill``: ``stream/registration.py``); a run
started with ``register=False`` has no Kill button (it is stopped where it runs).  A refusal
says why in its JSON body (``{"error": ...}``) and its reason phrase.  An action is answered
409 once the run has stopped (or, for a kill, when nobody would stop it; for activate and
deactivate, once it is killed or while it is rebalancing, as Storm refuses them then -- a
second kill replaces the first's wait, and a kill during a rebalance leaves the spouts
deactivated), 400 for a wait that is not a number of seconds.  A POST must carry the header
``X-Brokerless-UI`` (the page's script sends it; 403 without): a page of another site cannot
send such a header to this one without asking first (a CORS preflight, which is not answered),
so a web page elsewhere cannot deactivate or kill a topology through the browser of whoever
watches it.

Reading a run's figures may cost a round trip to every worker (multi-process and Spark runs ask
them over the control channel), so ``/api/stats`` computes them at most once per
``refresh`` seconds, whoever asks and however many pages are open: requests in between get the
same answer.  If the run cannot answer (it is stopping, a worker is lost) the last figures are
served, marked with the reason (``"stale"``).

Nothing else is answered (404 or 405); a request gets ``_REQUEST_TIMEOUT`` seconds to arrive,
so a client that stalls ties up only its own thread.  The page shows errors with their
tracebacks and can deactivate and kill the topology, so by default the server listens on
127.0.0.1.
"""

from __future__ import annotations

import json
import math
import selectors
import socket
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from errno import EADDRINUSE
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .model import ObservedRun, describe_stats, describe_topology

_REQUEST_TIMEOUT = 10.0  # seconds a connection may take to send its request
_PAGE = "index.html"
#: The header a POST must carry (see the module doc).
ACTION_HEADER = "X-Brokerless-UI"

#: Where the UI listens: True (127.0.0.1, a free port), a port (127.0.0.1), or "host:port".
UIAddress = bool | int | str


def parse_address(where: UIAddress) -> tuple[str, int]:
    """``where`` as (host, port); raises ValueError saying what is accepted."""
    if where is True:
        return "127.0.0.1", 0
    if isinstance(where, int) and not isinstance(where, bool) and 0 <= where < 65536:
        return "127.0.0.1", where
    if isinstance(where, str):
        host, sep, port = where.rpartition(":")
        if sep and port.isdigit() and int(port) < 65536:
            return host or "127.0.0.1", int(port)
    raise ValueError(
        f"ui={where!r}: use ui=True (a free port on 127.0.0.1), a port number, or "
        "'host:port' (an IPv4 address or a host name)"
    )


class TopologyUI:
    """The live web page of a running topology (see the module doc); ``url`` is where."""

    #: Whether ``POST /api/kill`` is taken: set by whoever runs the topology and stops it when
    #: ``killed`` is set, at ``kill_at`` (``time.monotonic()``).
    killable = False
    #: Called once a kill is taken (in the request's thread): a run started from Python stops
    #: itself so (``stream/registration.py``).
    on_kill: Callable[[], None] | None = None

    def __init__(self, run: ObservedRun, where: UIAddress = True, refresh: float = 0.5) -> None:
        host, port = parse_address(where)
        self.run = run
        self.refresh = refresh
        self._started = time.monotonic()
        self._topology = (run.plan, json.dumps(describe_topology(run)).encode())
        self._page = resources.files(__package__).joinpath("static").joinpath(_PAGE).read_bytes()
        self._lock = threading.Lock()
        self._stats: bytes | None = None
        self._stats_at = 0.0
        self.killed = threading.Event()
        self.kill_at: float | None = None
        try:
            self._server = ThreadingHTTPServer((host, port), _handler(self))
        except OSError as exc:  # the port is taken, the host unknown: say where and why
            advice = (
                " (choose another port, or 0 for a free one)" if exc.errno == EADDRINUSE else ""
            )
            raise OSError(
                exc.errno, f"the topology UI cannot listen on {host}:{port}: {exc.strerror}{advice}"
            ) from exc
        self._server.daemon_threads = True
        self._server.timeout = 0  # (handle_request: a connection gone before it, no wait)
        # server_address as bound (typeshed types it as the bind argument: str or bytes)
        bound_host, bound_port = self._server.socket.getsockname()[:2]
        self.url = f"http://{bound_host}:{bound_port}/"
        self._wake, self._woken = socket.socketpair()
        self._thread = threading.Thread(
            target=self._serve,
            name=f"{run.plan.name}:ui",
            daemon=True,
        )
        self._thread.start()

    def __repr__(self) -> str:
        return f"<TopologyUI {self.run.plan.name!r} at {self.url}>"

    def close(self) -> None:
        """Stop serving and free the port (idempotent)."""
        if self._thread.is_alive():
            with suppress(OSError):  # (closed meanwhile by another close)
                self._wake.send(b"\0")
            if self._thread is not threading.current_thread():
                self._thread.join()

    def _serve(self) -> None:
        """Take connections until ``close()`` (the module doc), then free the port."""
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self._server, selectors.EVENT_READ)
                selector.register(self._woken, selectors.EVENT_READ)
                while True:
                    for key, _ in selector.select():
                        if key.fileobj is self._woken:
                            return
                        self._server.handle_request()
        finally:
            self._server.server_close()
            self._wake.close()
            self._woken.close()

    def stats(self) -> bytes:
        """The JSON of ``/api/stats``, at most ``refresh`` seconds old."""
        with self._lock:
            now = time.monotonic()
            if self._stats is None or now - self._stats_at >= self.refresh:
                self._stats = self._fresh_stats(self._stats)
                self._stats_at = now
            return self._stats

    def _fresh_stats(self, last: bytes | None) -> bytes:
        run = self.run
        try:
            figures = describe_stats(run, run.statistics(), run.errors(), self._started)
        except Exception as exc:  # stopping, or a worker lost: say so, keep the last figures
            stale: dict[str, Any] = json.loads(last) if last else {"components": {}}
            stale["stale"] = f"{type(exc).__name__}: {exc}"
            stale["stopped"] = run.stopped
            stale["failure"] = None if run.failure is None else str(run.failure)
            return json.dumps({**stale, **self._kill_state()}).encode()
        return json.dumps({**figures, **self._kill_state()}, default=repr).encode()

    def _kill_state(self) -> dict[str, Any]:
        """``killable``; ``kill_in_s``: the seconds left before a kill stops the run, or None;
        ``rebalancing``: what a rebalance under way changes, or None."""
        left = None if self.kill_at is None else max(0.0, self.kill_at - time.monotonic())
        return {"killable": self.killable, "kill_in_s": left, "rebalancing": self.run.rebalancing}

    def status(self) -> bytes:
        """The JSON of ``/api/status`` (see the module doc)."""
        run = self.run
        if run.stopped:
            status = "stopped"
        elif self.kill_at is not None:
            status = "killed"
        elif run.rebalancing is not None:
            status = "rebalancing"
        else:
            status = "active" if run.active else "inactive"
        said = {"name": run.plan.name, "status": status, "workers": run.plan.config.num_workers}
        return json.dumps({**said, **self._kill_state()}).encode()

    def topology(self) -> bytes:
        """The JSON of ``/api/topology``: the plan, described again after a rebalance."""
        plan = self.run.plan
        if self._topology[0] is not plan:
            self._topology = (plan, json.dumps(describe_topology(self.run)).encode())
        return self._topology[1]

    def set_active(self, active: bool) -> bytes:
        """Activate or deactivate the run (``POST /api/activate`` or ``/api/deactivate``);
        the JSON of the answer.  Raises RuntimeError when the run has stopped, is killed or
        is rebalancing (as Storm refuses to activate a killed or rebalancing topology)."""
        run = self.run
        if run.stopped:
            raise RuntimeError(f"topology {run.plan.name!r} has stopped")
        if self.kill_at is not None:
            left = max(0.0, self.kill_at - time.monotonic())
            raise RuntimeError(f"topology {run.plan.name!r} is killed: it stops in {left:.3g} s")
        if run.rebalancing is not None:
            raise RuntimeError(
                f"topology {run.plan.name!r} is being rebalanced ({run.rebalancing}): its spouts "
                "are active again after it if they were before"
            )
        if active:
            run.activate()
        else:
            run.deactivate()
        self._changed()
        return json.dumps({"active": run.active}).encode()

    def kill(self, wait: float | None) -> bytes:
        """Storm's kill (``POST /api/kill``): deactivate the run now, and have whoever runs
        it stop it after ``wait`` seconds (None: the topology's message timeout); the JSON of
        the answer.  Raises RuntimeError when the run has stopped or nobody would stop it."""
        run = self.run
        if run.stopped:
            raise RuntimeError(f"topology {run.plan.name!r} has stopped")
        if not self.killable:
            raise RuntimeError(
                f"topology {run.plan.name!r} was started with register=False: stop it where it "
                "runs (run.stop())"
            )
        if wait is None:
            wait = run.plan.config.message_timeout_secs
        run.deactivate()
        self.kill_at = time.monotonic() + wait
        self.killed.set()
        if self.on_kill is not None:
            self.on_kill()
        self._changed()
        return json.dumps({"killed": True, "wait_s": wait}).encode()

    def rebalance(
        self, wait: float | None, workers: int | None, executors: dict[str, int]
    ) -> bytes:
        """Storm's rebalance (``POST /api/rebalance``): checked now (ValueError for what it
        refuses), carried out in the background; the JSON of the answer.  Raises RuntimeError
        when the run has stopped, is killed or is rebalancing already."""
        run = self.run
        if self.kill_at is not None and not run.stopped:
            raise RuntimeError(f"topology {run.plan.name!r} is killed: it cannot be rebalanced")
        timeout = run.plan.config.message_timeout_secs
        change = run.rebalance(wait, workers, executors, block=False)
        self._changed()
        said = {"rebalancing": change, "wait_s": timeout if wait is None else wait}
        return json.dumps(said).encode()

    def _changed(self) -> None:
        with self._lock:
            self._stats_at = float("-inf")  # the next /api/stats says so at once

    def page(self) -> bytes:
        return self._page


def _handler(ui: TopologyUI) -> type[BaseHTTPRequestHandler]:
    routes = {
        "/": (ui.page, "text/html; charset=utf-8"),
        "/index.html": (ui.page, "text/html; charset=utf-8"),
        "/api/topology": (ui.topology, "application/json"),
        "/api/stats": (ui.stats, "application/json"),
        "/api/status": (ui.status, "application/json"),
    }

    actions = {
        "/api/activate": lambda query: ui.set_active(True),
        "/api/deactivate": lambda query: ui.set_active(False),
        "/api/kill": lambda query: ui.kill(_wait(query)),
        "/api/rebalance": lambda query: ui.rebalance(
            _wait(query), _workers(query), _executors(query)
        ),
    }

    class Handler(BaseHTTPRequestHandler):
        timeout = _REQUEST_TIMEOUT
        server_version = "brokerless-ui"

        def do_GET(self) -> None:
            route = routes.get(self.path.split("?", 1)[0])
            if route is None:
                self.send_error(HTTPStatus.NOT_FOUND)
                return
            self._answer(route[0](), route[1])

        def do_POST(self) -> None:
            where = urlsplit(self.path)
            action = actions.get(where.path)
            if action is None:
                self.send_error(HTTPStatus.METHOD_NOT_ALLOWED)
                return
            if self.headers.get(ACTION_HEADER) is None:
                self.send_error(HTTPStatus.FORBIDDEN, f"send the header {ACTION_HEADER}: 1")
                return
            try:
                body = action(parse_qs(where.query))
            except ValueError as exc:  # a wait that is not a number of seconds, a bad rebalance
                self._refuse(HTTPStatus.BAD_REQUEST, str(exc))
                return
            except RuntimeError as exc:  # stopped
                self._refuse(HTTPStatus.CONFLICT, str(exc))
                return
            self._answer(body, "application/json")

        def _refuse(self, status: HTTPStatus, why: str) -> None:
            """Refuse an action: ``why`` in the JSON body (``{"error": why}``, UTF-8) and as the
            reason phrase, as far as a status line can carry it (latin-1, one line): a name
            in another script must not cost the answer."""
            reason = why.encode("latin-1", "backslashreplace").decode("latin-1")
            self.send_response(status, " ".join(reason.splitlines()))
            body = json.dumps({"error": why}).encode()
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_PUT(self) -> None:
            self.send_error(HTTPStatus.METHOD_NOT_ALLOWED)

        do_DELETE = do_PATCH = do_PUT

        def _answer(self, body: bytes, content_type: str) -> None:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the driver's terminal is the user's, not an access log

    return Handler


def _wait(query: dict[str, list[str]]) -> float | None:
    """A kill's ``wait`` (seconds, at least 0), or None when not given."""
    given = query.get("wait")
    if not given:
        return None
    try:
        wait = float(given[-1])
    except ValueError:
        wait = math.nan
    if not 0 <= wait < math.inf:
        raise ValueError(f"wait={given[-1]!r}: give the seconds to wait, a number >= 0")
    return wait


def _workers(query: dict[str, list[str]]) -> int | None:
    """A rebalance's ``workers`` (an integer), or None when not given."""
    given = query.get("workers")
    if not given:
        return None
    try:
        return int(given[-1])
    except ValueError:
        raise ValueError(f"workers={given[-1]!r}: give the number of workers") from None


def _executors(query: dict[str, list[str]]) -> dict[str, int]:
    """A rebalance's ``executors=COMPONENT=N`` (each given), as {component: N}."""
    executors = {}
    for given in query.get("executors", []):
        component, _, count = given.rpartition("=")
        try:
            executors[component] = int(count)
        except ValueError:
            component = ""
        if not component:
            raise ValueError(f"executors={given!r}: give COMPONENT=N, N the number of executors")
    return executors
