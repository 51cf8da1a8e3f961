"""Pipes on their own: batch reads and writes keep the HWM and the wake-up protocol."""

from __future__ import annotations

import pytest

from brokerless.pipe import ACTIVATE_READ, ACTIVATE_WRITE, pipepair

pytestmark = pytest.mark.timeout(10)


class Owner:
    """Records what a pipe tells the object at its end."""

    def __init__(self) -> None:
        self.commands: list[str] = []
        self.terminated: list = []

    def send_command(self, command: str, pipe: object) -> None:
        self.commands.append(command)

    def pipe_terminated(self, pipe: object) -> None:
        self.terminated.append(pipe)


def owned_pair(hwm: int):
    """Writer end ``a`` (SNDHWM ``hwm``) and reader end ``b`` (RCVHWM 0 counts as none: use 1)."""
    a, b = pipepair((hwm, 1), (1, 1))
    a.owner, b.owner = wa, rb = Owner(), Owner()
    return a, b, wa, rb


def test_write_many_stops_at_the_hwm_and_the_reader_wakes_the_writer():
    a, b, writer, _ = owned_pair(hwm=9)  # capacity 9 + 1 = 10
    assert a.write_many([bytes([i]) for i in range(25)]) == 10
    assert a.write(b"x") is False
    assert b.read_many(4) == [bytes([i]) for i in range(4)]
    assert writer.commands == []  # 6 left: above the low-water mark (5)
    assert b.read_many(1) == [b"\x04"]
    assert writer.commands == [ACTIVATE_WRITE]
    assert a.write_many([b"y", b"z"]) == 2


def test_read_many_that_empties_the_pipe_makes_the_next_write_wake_the_reader():
    a, b, _, reader = owned_pair(hwm=100)
    a.write_many([b"1", b"2"])
    assert reader.commands == []  # the reader has not looked yet: no need to wake it
    assert b.read_many(10) == [b"1", b"2"]
    assert b.read_many(10) == []
    a.write_many([b"3"])
    assert reader.commands == [ACTIVATE_READ]
    a.write_many([b"4"])
    assert reader.commands == [ACTIVATE_READ]  # awake now: one signal per transition
    assert b.read_many(1) == [b"3"]  # a full batch does not mark the reader asleep
    a.write(b"5")
    assert reader.commands == [ACTIVATE_READ]


def test_read_many_delivers_up_to_the_delimiter_then_reports_the_end():
    a, b, _, reader = owned_pair(hwm=100)
    a.write_many([b"last", [b"multi", b"part"]])
    a.terminate()
    assert b.read_many(10) == [b"last", [b"multi", b"part"]]
    assert reader.terminated == [b]
    assert b.read_many(10) == []


def test_write_many_to_a_terminating_pipe_takes_nothing():
    a, b, _, _ = owned_pair(hwm=100)
    b.terminate()
    a.process_pipe_term()
    assert a.write_many([b"1", b"2"]) == 0
