"""Constants and enum classes carry libzmq's names and numeric values (checked against pyzmq's).

Against pyzmq this compares pyzmq with itself; the point is the run against brokerless.
"""

from __future__ import annotations

import enum
import errno

import pytest
import zmq as reference  # always real pyzmq: conftest only swaps the name "brokerless"

import brokerless as zmq

SOCKET_TYPES = [
    "PAIR", "PUB", "SUB", "REQ", "REP", "DEALER", "ROUTER", "PULL", "PUSH", "XPUB", "XSUB",
    "STREAM",
]  # fmt: skip

SOCKET_OPTIONS = [
    "SNDHWM", "RCVHWM", "LINGER", "ROUTING_ID", "IDENTITY", "SUBSCRIBE", "UNSUBSCRIBE",
    "RCVTIMEO", "SNDTIMEO", "CONFLATE", "IMMEDIATE", "ROUTER_MANDATORY", "ROUTER_HANDOVER",
    "PROBE_ROUTER", "REQ_CORRELATE", "REQ_RELAXED", "XPUB_VERBOSE", "XPUB_VERBOSER",
    "XPUB_NODROP", "XPUB_MANUAL", "XPUB_WELCOME_MSG", "INVERT_MATCHING", "RCVMORE", "TYPE",
    "EVENTS", "LAST_ENDPOINT", "FD", "MAXMSGSIZE", "RECONNECT_IVL", "RECONNECT_IVL_MAX",
    "HEARTBEAT_IVL", "HEARTBEAT_TTL", "HEARTBEAT_TIMEOUT", "HANDSHAKE_IVL", "TCP_KEEPALIVE",
    "IPV6",
]  # fmt: skip

FLAGS = ["NOBLOCK", "DONTWAIT", "SNDMORE"]

POLL_EVENTS = ["POLLIN", "POLLOUT", "POLLERR"]

MONITOR_EVENTS = [
    "EVENT_CONNECTED", "EVENT_CONNECT_DELAYED", "EVENT_CONNECT_RETRIED", "EVENT_LISTENING",
    "EVENT_BIND_FAILED", "EVENT_ACCEPTED", "EVENT_ACCEPT_FAILED", "EVENT_CLOSED",
    "EVENT_CLOSE_FAILED", "EVENT_DISCONNECTED", "EVENT_MONITOR_STOPPED", "EVENT_ALL",
    "EVENT_HANDSHAKE_FAILED_NO_DETAIL", "EVENT_HANDSHAKE_SUCCEEDED",
    "EVENT_HANDSHAKE_FAILED_PROTOCOL", "EVENT_HANDSHAKE_FAILED_AUTH",
]  # fmt: skip

ERRNOS = [
    "EAGAIN", "EFSM", "ETERM", "ENOTSOCK", "EINVAL", "EADDRINUSE", "EHOSTUNREACH",
    "EPROTONOSUPPORT", "ENOTSUP",
]  # fmt: skip

ALL_NAMES = SOCKET_TYPES + SOCKET_OPTIONS + FLAGS + POLL_EVENTS + MONITOR_EVENTS + ERRNOS


@pytest.mark.parametrize("name", ALL_NAMES)
def test_module_constant_has_libzmq_value(name):
    assert int(getattr(zmq, name)) == int(getattr(reference, name))


@pytest.mark.parametrize("name", ALL_NAMES)
def test_module_constant_is_an_int(name):
    value = getattr(zmq, name)
    assert isinstance(value, int)
    assert not isinstance(value, bool)


def test_socket_type_values_are_libzmqs():
    # Hard-coded too, so the check does not rest on the reference alone.
    assert [int(getattr(zmq, name)) for name in SOCKET_TYPES] == list(range(12))


def test_well_known_values():
    assert (zmq.NOBLOCK, zmq.DONTWAIT, zmq.SNDMORE) == (1, 1, 2)
    assert (zmq.POLLIN, zmq.POLLOUT, zmq.POLLERR) == (1, 2, 4)
    assert (zmq.ROUTING_ID, zmq.IDENTITY) == (5, 5)
    assert (zmq.SUBSCRIBE, zmq.UNSUBSCRIBE) == (6, 7)
    assert (zmq.SNDHWM, zmq.RCVHWM, zmq.LINGER) == (23, 24, 17)
    assert (zmq.RCVTIMEO, zmq.SNDTIMEO, zmq.LAST_ENDPOINT) == (27, 28, 32)
    assert (zmq.EVENT_CONNECTED, zmq.EVENT_ALL) == (1, 0xFFFF)


@pytest.mark.parametrize("name", ["EAGAIN", "EINVAL", "ENOTSUP", "EADDRINUSE", "ENOTSOCK"])
def test_system_errnos_match_the_os(name):
    assert getattr(zmq, name) == getattr(errno, name)


def test_zmq_specific_errnos_are_libzmqs():
    # libzmq's ZMQ_HAUSNUMERO (156384712) based numbers.
    assert zmq.EFSM == 156384712 + 51
    assert zmq.ETERM == 156384712 + 53


@pytest.mark.parametrize(
    ("enum_name", "names", "prefix"),
    [
        ("SocketType", SOCKET_TYPES, ""),
        ("SocketOption", SOCKET_OPTIONS, ""),
        ("Flag", FLAGS, ""),
        ("PollEvent", POLL_EVENTS, ""),
        ("Event", MONITOR_EVENTS, "EVENT_"),
        ("Errno", ERRNOS, ""),
    ],
)
def test_enum_class_has_the_members(enum_name, names, prefix):
    cls = getattr(zmq, enum_name)
    assert issubclass(cls, enum.Enum)
    for name in names:
        member = getattr(cls, name.removeprefix(prefix))
        assert isinstance(member, cls)
        assert member == getattr(zmq, name), name
        assert int(member) == int(getattr(getattr(reference, enum_name), name.removeprefix(prefix)))


@pytest.mark.parametrize("enum_name", ["SocketType", "SocketOption", "Errno"])
def test_int_enums_are_int_enums(enum_name):
    assert issubclass(getattr(zmq, enum_name), enum.IntEnum)


@pytest.mark.parametrize("enum_name", ["Flag", "PollEvent", "Event"])
def test_flag_enums_combine_as_int_flags(enum_name):
    assert issubclass(getattr(zmq, enum_name), enum.IntFlag)


def test_flags_combine_bitwise():
    assert zmq.POLLIN | zmq.POLLOUT == 3
    assert zmq.PollEvent.POLLIN | zmq.PollEvent.POLLOUT == 3
    assert zmq.DONTWAIT | zmq.SNDMORE == 3


def test_aliases_share_a_value():
    assert zmq.SocketOption.IDENTITY == zmq.SocketOption.ROUTING_ID
    assert zmq.Flag.NOBLOCK == zmq.Flag.DONTWAIT
    assert zmq.Event.ALL == zmq.EVENT_ALL


def test_enum_members_know_their_names():
    assert zmq.SocketType(8).name == "PUSH"
    assert zmq.SocketOption(23).name == "SNDHWM"
    assert zmq.Errno(zmq.ETERM).name == "ETERM"
    assert zmq.Event.HANDSHAKE_SUCCEEDED.name == "HANDSHAKE_SUCCEEDED"
