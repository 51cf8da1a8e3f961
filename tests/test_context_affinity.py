"""The I/O threads' CPUs (libzmq's THREAD_AFFINITY_CPU_ADD and _REMOVE): set before the
context starts its I/O threads, they keep those threads to the CPUs added; the options are
set-only, and what they and the other thread options accept, refuse and read back is libzmq's
(checked against pyzmq)."""

from __future__ import annotations

import os
import threading
import warnings

import pytest
import zmq as pyzmq  # libzmq, the reference

import brokerless as zmq
from tests.helpers import bind, recv_within

pytestmark = pytest.mark.timeout(30)
ALLOWED = sorted(os.sched_getaffinity(0))


def _cpus_of_io_threads_started_since(before: set[int]) -> list[set[int]]:
    """The CPU sets of the I/O threads that were not in ``before`` (ids of threads)."""
    return [
        os.sched_getaffinity(thread.native_id)
        for thread in threading.enumerate()
        if id(thread) not in before and thread.name.startswith("brokerless-io-")
    ]


def _threads() -> set[int]:
    return {id(thread) for thread in threading.enumerate()}


def _round_trip(context: zmq.Context) -> None:
    """A message over tcp, which the context's I/O threads carry (inproc would not)."""
    a, b = context.socket(zmq.PAIR), context.socket(zmq.PAIR)
    try:
        b.connect(bind(a, "tcp://127.0.0.1:*"))
        a.send(b"over a kept I/O thread")
        assert recv_within(b) == b"over a kept I/O thread"
    finally:
        a.close(linger=0)
        b.close(linger=0)


@pytest.mark.skipif(len(ALLOWED) < 2, reason="needs 2 CPUs to tell kept from not")
def test_the_io_threads_keep_to_the_cpus_added_and_not_removed():
    before = _threads()
    context = zmq.Context(io_threads=2)
    try:
        context.set(zmq.THREAD_AFFINITY_CPU_ADD, ALLOWED[0])
        context.set(zmq.THREAD_AFFINITY_CPU_ADD, ALLOWED[1])
        context.set(zmq.THREAD_AFFINITY_CPU_REMOVE, ALLOWED[0])
        _round_trip(context)
        assert _cpus_of_io_threads_started_since(before) == [{ALLOWED[1]}, {ALLOWED[1]}]
        assert os.sched_getaffinity(0) == set(ALLOWED)  # the caller's thread is left alone
    finally:
        context.destroy(linger=0)


def test_without_them_the_io_threads_run_where_the_process_may():
    before = _threads()
    context = zmq.Context()
    try:
        _round_trip(context)
        assert _cpus_of_io_threads_started_since(before) == [set(ALLOWED)]
    finally:
        context.destroy(linger=0)


def test_a_cpu_the_process_cannot_use_is_taken_and_the_thread_says_it_runs_on_any():
    context = zmq.Context()
    try:
        context.set(zmq.THREAD_AFFINITY_CPU_ADD, max(ALLOWED) + 1000)  # libzmq takes it too
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _round_trip(context)
        messages = [str(w.message) for w in caught if w.category is RuntimeWarning]
        assert any(f"CPUs [{max(ALLOWED) + 1000}]" in m for m in messages), messages
    finally:
        context.destroy(linger=0)


@pytest.mark.parametrize("module", [pyzmq, zmq], ids=["libzmq", "brokerless"])
def test_the_options_are_set_only_and_remove_needs_an_added_cpu(module):
    context = module.Context()
    try:
        context.set(module.THREAD_AFFINITY_CPU_ADD, ALLOWED[0])
        for option in (module.THREAD_AFFINITY_CPU_ADD, module.THREAD_AFFINITY_CPU_REMOVE):
            with pytest.raises(module.ZMQError) as info:
                context.get(option)
            assert info.value.errno == module.EINVAL
            if module is zmq:  # and says why
                assert "can be set, not read" in str(info.value)
        context.set(module.THREAD_AFFINITY_CPU_REMOVE, ALLOWED[0])
        with pytest.raises(module.ZMQError) as info:
            context.set(module.THREAD_AFFINITY_CPU_REMOVE, ALLOWED[0])  # no longer there
        assert info.value.errno == module.EINVAL
        with pytest.raises(module.ZMQError):
            context.set(module.THREAD_AFFINITY_CPU_ADD, -1)
        assert context.get(module.THREAD_NAME_PREFIX) == 0  # (read before it was set)
        context.set(module.THREAD_NAME_PREFIX, 7)
        assert context.get(module.THREAD_NAME_PREFIX) == 7
        context.set(module.THREAD_PRIORITY, 5)  # the same number as SOCKET_LIMIT, which stays
        assert context.get(module.SOCKET_LIMIT) == 65535
    finally:
        context.term()
