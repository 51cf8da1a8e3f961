"""pyzmq's helper modules under their pyzmq paths: zmq.utils.{monitor, jsonapi, strtypes,
interop, garbage, win32}, zmq.decorators, zmq.log.handlers, zmq.sugar.* and zmq.backend.

Modules are imported by the package's own name, so the same tests describe pyzmq when run
against it (BROKERLESS_TEST_AGAINST=pyzmq).
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading

import pytest

import brokerless as zmq
from tests.helpers import bind, recv_within


def submodule(name: str):
    return importlib.import_module(f"{zmq.__name__}.{name}")


# -- zmq.utils -------------------------------------------------------------------------------


def test_jsonapi_speaks_utf8_bytes():
    jsonapi = submodule("utils.jsonapi")
    assert jsonapi.dumps({"a": "é"}) == b'{"a": "\\u00e9"}'
    assert jsonapi.loads('{"a": "é"}'.encode()) == {"a": "é"}
    assert jsonapi.jsonmod.loads("[1]") == [1]


def test_strtypes_casts_with_a_deprecation_warning():
    strtypes = submodule("utils.strtypes")
    with pytest.warns(DeprecationWarning):
        assert strtypes.cast_bytes("é") == "é".encode()
    with pytest.warns(DeprecationWarning):
        assert strtypes.cast_unicode(b"abc") == "abc"


def test_interop_takes_int_addresses():
    interop = submodule("utils.interop")
    assert interop.cast_int_addr(1234) == 1234
    with pytest.raises(ValueError):
        interop.cast_int_addr("not an address")


def test_garbage_collector_holds_nothing_between_tests():
    assert not submodule("utils.garbage").gc.refs


def test_recv_monitor_message_decodes_a_real_event(make):
    monitor_module = submodule("utils.monitor")
    rep = make(zmq.REP)
    events = rep.get_monitor_socket(zmq.EVENT_LISTENING)
    rep.bind("tcp://127.0.0.1:0")
    assert events.poll(5000)
    event = monitor_module.recv_monitor_message(events)
    assert event["event"] == zmq.EVENT_LISTENING
    assert event["endpoint"] == rep.last_endpoint
    rep.disable_monitor()
    events.close(linger=0)


def listener_events(module, endpoint: str) -> list[tuple[int, str]]:
    """The monitor events of bind, unbind, bind again and close on ``endpoint``, each with
    whether its value is a file descriptor (LISTENING and CLOSED carry the listener's)."""
    ctx = module.Context()
    try:
        sock = ctx.socket(module.PULL)
        events = sock.get_monitor_socket()
        events.rcvtimeo = 300  # (the last one, MONITOR_STOPPED, is sent when it closes)
        sock.bind(endpoint)
        sock.unbind(sock.last_endpoint.decode())
        sock.bind(endpoint)
        sock.close()
        seen = []
        while True:
            try:
                frames = events.recv_multipart()
            except module.Again:
                return seen
            event = int.from_bytes(frames[0][:2], "little")
            value = int.from_bytes(frames[0][2:6], "little")
            seen.append((event, "fd" if value > 2 else str(value)))
    finally:
        ctx.destroy(linger=0)


@pytest.mark.parametrize("transport", ["tcp", "inproc"])
def test_a_listener_is_reported_as_libzmq_reports_it(transport):
    """LISTENING and CLOSED carry the listening socket's descriptor, unbind reports CLOSED,
    and an inproc bind reports nothing, as with libzmq (brokerless gave 0 as the value, said
    nothing at unbind, and reported inproc binds)."""
    import zmq as reference

    endpoint = "tcp://127.0.0.1:0" if transport == "tcp" else f"inproc://listener-{id(zmq)}"
    # (sorted: libzmq's unbind is done by its I/O thread, so its CLOSED may come after the
    # next LISTENING)
    assert sorted(listener_events(zmq, endpoint)) == sorted(listener_events(reference, endpoint))


def test_parse_monitor_message_refuses_what_is_not_an_event():
    with pytest.raises(RuntimeError):
        submodule("utils.monitor").parse_monitor_message([b"short", b"tcp://x:1"])


@pytest.mark.skipif(sys.platform == "win32", reason="Ctrl-C handling is POSIX's here")
def test_win32_allow_interrupt_is_a_no_op_context_manager_off_windows():
    """zmq.utils.win32.allow_interrupt(action) hooks Ctrl-C on Windows; elsewhere SIGINT
    already interrupts a blocking call, so it installs nothing and never calls ``action``."""
    win32 = submodule("utils.win32")
    called = []
    with win32.allow_interrupt(lambda: called.append(True)) as entered:
        assert entered is None
    with win32.allow_interrupt():
        pass
    assert called == []


# -- zmq.decorators --------------------------------------------------------------------------


def test_context_and_socket_decorators_pass_and_close_what_they_make():
    decorators = submodule("decorators")
    made = {}

    @decorators.context()
    @decorators.socket(zmq.PUSH)
    def work(ctx, push, extra=None):
        made.update(ctx=ctx, push=push, extra=extra)
        assert push.context is ctx
        assert push.type == zmq.PUSH
        return "done"

    assert work(extra=1) == "done"
    assert made["extra"] == 1
    assert made["push"].closed and made["ctx"].closed


def test_decorators_pass_by_name_and_refuse_a_second_value():
    decorators = submodule("decorators")

    @decorators.context("myctx", io_threads=2)
    def named(myctx):
        return myctx.IO_THREADS

    assert named() == 2

    @decorators.context(name="ctx")
    def twice(ctx):
        pass

    with pytest.raises(TypeError):
        twice(ctx="mine")


def test_a_socket_decorator_without_a_context_uses_the_shared_one():
    decorators = submodule("decorators")

    @decorators.socket("sub", zmq.SUB)
    def use(sub):
        return sub.context

    try:
        assert use() is zmq.Context.instance()
    finally:
        zmq.Context.instance().term()


# -- zmq.log.handlers ------------------------------------------------------------------------


def _subscribed(ctx, pub):
    """A SUB of ``pub`` (to everything) whose subscription the PUB has seen: a probe sent
    after it came through, and was read."""
    sub = ctx.socket(zmq.SUB)
    sub.linger = 0
    sub.subscribe(b"")
    sub.connect(pub.last_endpoint.decode())
    for _ in range(100):
        pub.send_multipart([b"probe", b""])
        if sub.poll(50):
            break
    while sub.poll(50):
        sub.recv_multipart()
    return sub


@pytest.fixture
def logger():
    log = logging.getLogger(f"brokerless-test-{threading.get_ident()}")
    log.setLevel(logging.DEBUG)
    log.propagate = False
    yield log
    for handler in list(log.handlers):
        log.removeHandler(handler)


def test_pub_handler_publishes_topic_and_message(ctx, logger):
    handlers = submodule("log.handlers")
    handler = handlers.PUBHandler("inproc://pub-handler", ctx, root_topic="app")
    assert handler.ctx is ctx
    logger.addHandler(handler)
    sub = _subscribed(ctx, handler.socket)
    logger.info("disk.full::no room")
    logger.warning("plain")
    assert recv_within(sub, multipart=True) == [b"app.INFO.disk.full", b"no room\n"]
    topic, message = recv_within(sub, multipart=True)
    assert topic == b"app.WARNING"
    assert message.endswith(b" - plain\n")
    handler.socket.close(linger=0)
    sub.close(linger=0)


def test_pub_handler_takes_a_socket_and_a_formatter_per_level(ctx, logger):
    handlers = submodule("log.handlers")
    pub = ctx.socket(zmq.PUB)
    pub.linger = 0
    bind(pub, "inproc://pub-handler-socket")
    handler = handlers.PUBHandler(pub)
    assert handler.socket is pub and handler.ctx is ctx
    handler.setFormatter(logging.Formatter("DBG %(message)s"), logging.DEBUG)
    logger.addHandler(handler)
    sub = _subscribed(ctx, pub)
    logger.debug("hello")
    assert recv_within(sub, multipart=True) == [b"DEBUG", b"DBG hello"]
    sub.close(linger=0)


@pytest.mark.beyond_pyzmq
def test_pub_handler_reports_a_failed_send_through_handle_error(ctx, logger):
    """A record the socket cannot take (here: it was closed) goes to ``handleError``, as the
    logging module asks of every handler, and the logging call returns; pyzmq's lets the
    ZMQError out of ``logger.info``, so one closed socket breaks every later log call."""
    handlers = submodule("log.handlers")
    pub = ctx.socket(zmq.PUB)
    handler = handlers.PUBHandler(pub)
    failed: list[logging.LogRecord] = []
    handler.handleError = failed.append
    logger.addHandler(handler)
    pub.close(linger=0)
    logger.info("after close")
    assert [record.getMessage() for record in failed] == ["after close"]


def _topic_logger():
    records: list[logging.LogRecord] = []
    log = submodule("log.handlers").TopicLogger("brokerless-topic-logger")
    log.addHandler(logging.Handler())
    log.handlers[0].emit = records.append
    return log, records


def test_topic_logger_puts_the_topic_first():
    log, records = _topic_logger()
    log.log(logging.WARNING, "disk.full", "no %s", "room")
    assert records[0].getMessage() == "disk.full::no room"
    assert records[0].levelno == logging.WARNING


@pytest.mark.beyond_libzmq
def test_topic_logger_level_methods_take_the_topic_first():
    """pyzmq 27's level methods all log at CRITICAL and mangle the message (its generated
    methods share one loop variable); these log what they say."""
    log, records = _topic_logger()
    log.warning("disk.full", "no %s", "room")
    log.debug("a.b", "text")
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.WARNING, "disk.full::no room"),
        (logging.DEBUG, "a.b::text"),
    ]


# -- zmq.sugar, zmq.backend, versions --------------------------------------------------------


def test_sugar_module_paths_name_the_same_classes():
    assert submodule("sugar.socket").Socket is zmq.Socket
    assert submodule("sugar.context").Context is zmq.Context
    assert submodule("sugar.frame").Frame is zmq.Frame
    assert submodule("sugar.poll").Poller is zmq.Poller
    assert submodule("sugar.tracker").MessageTracker is zmq.MessageTracker
    assert issubclass(zmq.Socket, submodule("backend").Socket)


def test_version_functions():
    version = submodule("sugar.version")
    info = zmq.pyzmq_version_info()
    assert all(isinstance(n, int) for n in info[:3])
    assert len(info) == (4 if version.VERSION_EXTRA else 3)
    assert zmq.pyzmq_version() == zmq.__version__
    assert zmq.zmq_version() == ".".join(map(str, zmq.zmq_version_info()))


def test_the_pyzmq_version_is_the_one_whose_api_is_offered():
    """Code written for pyzmq picks a path by its version (``zmq.pyzmq_version_info() >= (17,
    0)``, ``LooseVersion(zmq.__version__) <= "14.5.0"``): it must find the pyzmq API it gets,
    27.3.0's, not brokerless's own release number (0.1.0 took pyzmq < 14 paths)."""
    import zmq as reference

    assert zmq.__version__ == zmq.pyzmq_version() == reference.__version__ == "27.3.0"
    assert zmq.pyzmq_version_info() == reference.pyzmq_version_info() == (27, 3, 0)


@pytest.mark.beyond_pyzmq
def test_brokerless_own_release_is_the_package_version():
    from importlib.metadata import version

    assert version("brokerless") == zmq.BROKERLESS_VERSION


@pytest.mark.beyond_libzmq
@pytest.mark.parametrize("name", ["get_includes", "get_library_dirs"])
def test_what_needs_libzmq_says_it_is_not_there(name):
    with pytest.raises(NotImplementedError, match="no libzmq"):
        getattr(zmq, name)()


@pytest.mark.parametrize("module", ["brokerless", "pyzmq"])
def test_a_connection_whose_handshake_fails_is_reported_disconnected_too(module):
    """libzmq reports a failed handshake (HANDSHAKE_FAILED_*) and then the connection's end
    (DISCONNECTED), so code that counts connections up at ACCEPTED/CONNECTED and down at
    DISCONNECTED sees them go; brokerless reported the failure only."""
    import socket

    import zmq as reference

    lib = zmq if module == "brokerless" else reference
    ctx = lib.Context()
    try:
        server = ctx.socket(lib.PULL)
        server.plain_server = True
        events = server.get_monitor_socket()
        events.rcvtimeo = 5000
        port = server.bind_to_random_port("tcp://127.0.0.1")
        client = ctx.socket(lib.PUSH)  # NULL against PLAIN: refused
        client.connect(f"tcp://127.0.0.1:{port}")
        with socket.create_connection(("127.0.0.1", port)) as raw:  # no ZMTP at all
            raw.sendall(b"\xff" + bytes(8))
        seen: list[int] = []
        while seen.count(int(lib.EVENT_DISCONNECTED)) < 2:
            frames = events.recv_multipart()
            seen.append(int.from_bytes(frames[0][:2], "little"))
        failed = lib.EVENT_HANDSHAKE_FAILED_PROTOCOL | lib.EVENT_HANDSHAKE_FAILED_NO_DETAIL
        assert seen.count(int(lib.EVENT_ACCEPTED)) == 2
        assert sum(1 for event in seen if event & failed) == 2
    finally:
        ctx.destroy(linger=0)
