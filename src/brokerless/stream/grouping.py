"""Stream groupings: which tasks of a subscribing component receive each tuple.

A grouping object (``shuffle()``, ``fields("word")``, ...) is a description; every source task
binds its own *chooser* from it (``Grouping.bind``), a function ``values -> [task ids]`` that
keeps the per-source state (shuffle order, partial-key loads) and runs on the emit path.

Key hashing (fields, partial key) uses :func:`~brokerless.stream.serializer.stable_hash`, so
the same key reaches the same task from every task in every process.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .serializer import SerializationError, stable_hash

Chooser = Callable[[tuple[Any, ...]], list[int]]


class CustomStreamGrouping(Protocol):
    """A user's grouping object (Storm's ``CustomStreamGrouping``); it may also have
    ``prepare(binding, stream, target_tasks)``, called once before the first choice."""

    def choose_tasks(self, source_task: int, values: tuple[Any, ...]) -> Sequence[int]: ...


#: A user's grouping function: ``(values, target_tasks) -> task ids``.
CustomChooser = Callable[[tuple[Any, ...], list[int]], Sequence[int]]
UserGrouping = CustomChooser | CustomStreamGrouping | type[CustomStreamGrouping]


@dataclass(frozen=True)
class Binding:
    """What a chooser is bound to: one source task's view of one subscription."""

    source_component: str
    source_task: int
    stream: str
    fields: tuple[str, ...]  # the stream's fields
    target_component: str
    target_tasks: tuple[int, ...]  # sorted
    worker_tasks: frozenset[int]  # tasks in the source task's worker


class Grouping:
    """Base class.  ``direct`` groupings subscribe to direct streams, all others to regular
    ones."""

    direct = False

    def problem(self, fields: tuple[str, ...]) -> str | None:
        """What is wrong with using this grouping on a stream with ``fields``, if anything."""
        return None

    def bind(self, binding: Binding) -> Chooser:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__.lower()}()"


def _shuffler(tasks: Sequence[int], seed: int) -> Chooser:
    """Round-robin over a shuffled order, reshuffled each round: even and unpredictable."""
    order = list(tasks)
    if len(order) == 1:
        only = [order[0]]
        return lambda values: only
    rng = random.Random(seed)
    rng.shuffle(order)
    position = 0

    def choose(values: tuple[Any, ...]) -> list[int]:
        nonlocal position
        if position == len(order):
            rng.shuffle(order)
            position = 0
        task = order[position]
        position += 1
        return [task]

    return choose


class Shuffle(Grouping):
    def bind(self, binding: Binding) -> Chooser:
        return _shuffler(binding.target_tasks, binding.source_task)


class NoneGrouping(Shuffle):
    """ "Don't care": the same as shuffle."""

    def __repr__(self) -> str:
        return "none()"


class LocalOrShuffle(Grouping):
    """Shuffle among the target tasks in the source task's worker, or among all of them when
    none is there."""

    def bind(self, binding: Binding) -> Chooser:
        local = [t for t in binding.target_tasks if t in binding.worker_tasks]
        return _shuffler(local or binding.target_tasks, binding.source_task)

    def __repr__(self) -> str:
        return "local_or_shuffle()"


class _KeyGrouping(Grouping):
    def __init__(self, names: Sequence[str]) -> None:
        if not names or not all(isinstance(n, str) for n in names):
            raise TypeError(f"{type(self).__name__} needs one or more field names")
        self.names = tuple(names)

    def problem(self, fields: tuple[str, ...]) -> str | None:
        unknown = [n for n in self.names if n not in fields]
        if unknown:
            return (
                f"{self!r} names unknown field(s) {unknown}; the stream has fields {list(fields)}"
            )
        return None

    def _key_hasher(self, binding: Binding) -> Callable[[tuple[Any, ...], int], int]:
        positions = [binding.fields.index(n) for n in self.names]
        names = self.names

        def key_hash(values: tuple[Any, ...], seed: int) -> int:
            key = [values[i] for i in positions]
            try:
                return stable_hash(key, seed)
            except Exception as exc:
                raise SerializationError(
                    f"{binding.source_component!r} cannot group on fields {list(names)} of "
                    f"stream {binding.stream!r}: the key {key!r} cannot be hashed ({exc})"
                ) from exc

        return key_hash

    def __repr__(self) -> str:
        return f"{type(self).__name__.lower()}({', '.join(map(repr, self.names))})"


class Fields(_KeyGrouping):
    """Tuples with equal values in the named fields go to the same task."""

    def bind(self, binding: Binding) -> Chooser:
        tasks = binding.target_tasks
        n = len(tasks)
        key_hash = self._key_hasher(binding)
        singles = [[t] for t in tasks]
        return lambda values: singles[key_hash(values, 0) % n]


class PartialKey(_KeyGrouping):
    """Partial key grouping (two choices): each key goes to the less loaded of two tasks
    picked by two hashes, so a hot key is spread over at most two tasks."""

    def bind(self, binding: Binding) -> Chooser:
        tasks = binding.target_tasks
        n = len(tasks)
        key_hash = self._key_hasher(binding)
        load = [0] * n

        def choose(values: tuple[Any, ...]) -> list[int]:
            first = key_hash(values, 13) % n
            second = key_hash(values, 17) % n
            pick = first if load[first] <= load[second] else second
            load[pick] += 1
            return [tasks[pick]]

        return choose

    def __repr__(self) -> str:
        return f"partial_key({', '.join(map(repr, self.names))})"


class All(Grouping):
    """Every task gets every tuple."""

    def bind(self, binding: Binding) -> Chooser:
        every = list(binding.target_tasks)
        return lambda values: every

    def __repr__(self) -> str:
        return "all_()"


class Global(Grouping):
    """Every tuple goes to the task with the lowest id."""

    def bind(self, binding: Binding) -> Chooser:
        lowest = [binding.target_tasks[0]]
        return lambda values: lowest

    def __repr__(self) -> str:
        return "global_()"


class Direct(Grouping):
    """The emitter picks the task (``emit_direct``); only on direct streams."""

    direct = True


class Custom(Grouping):
    """A user's grouping: a function ``(values, target_tasks) -> task ids``, or a class (or
    instance) with ``prepare(context, stream, target_tasks)`` (optional) and
    ``choose_tasks(source_task, values) -> task ids``."""

    def __init__(self, chooser: UserGrouping) -> None:
        if not callable(chooser) and not hasattr(chooser, "choose_tasks"):
            raise TypeError(
                f"custom() needs a function or a class with choose_tasks, not {chooser!r}"
            )
        self.chooser = chooser

    def bind(self, binding: Binding) -> Chooser:
        user = self.chooser
        targets = list(binding.target_tasks)
        if isinstance(user, type) or hasattr(user, "choose_tasks"):
            grouping = user() if isinstance(user, type) else copy.deepcopy(user)
            if hasattr(grouping, "prepare"):
                grouping.prepare(binding, binding.stream, list(targets))
            source = binding.source_task

            def pick(values: tuple[Any, ...]) -> Sequence[int]:
                return grouping.choose_tasks(source, values)
        else:

            def pick(values: tuple[Any, ...]) -> Sequence[int]:
                return user(values, targets)

        allowed = frozenset(targets)

        def choose(values: tuple[Any, ...]) -> list[int]:
            chosen = list(pick(values))
            wrong = [t for t in chosen if t not in allowed]
            if wrong:
                raise ValueError(
                    f"custom grouping {user!r} chose task(s) {wrong} of "
                    f"{binding.target_component!r}, whose tasks are {targets}"
                )
            return chosen

        return choose

    def __repr__(self) -> str:
        return f"custom({self.chooser!r})"


def shuffle() -> Grouping:
    """Spread tuples evenly over the tasks (round-robin in a random order)."""
    return Shuffle()


def fields(*names: str) -> Grouping:
    """Tuples with equal values in ``names`` go to the same task."""
    return Fields(names)


def partial_key(*names: str) -> Grouping:
    """Like fields, but a key may go to two tasks (the less loaded of two), balancing hot keys."""
    return PartialKey(names)


def all_() -> Grouping:
    """Every task receives every tuple (Storm's allGrouping)."""
    return All()


def global_() -> Grouping:
    """Every tuple goes to the lowest task id (Storm's globalGrouping)."""
    return Global()


def none() -> Grouping:
    """No preference (Storm's noneGrouping): currently shuffle."""
    return NoneGrouping()


def direct() -> Grouping:
    """Subscribe to a direct stream: each tuple goes where ``emit_direct`` sends it."""
    return Direct()


def local_or_shuffle() -> Grouping:
    """Prefer target tasks in the emitter's worker (no serialization, no network)."""
    return LocalOrShuffle()


def custom(chooser: UserGrouping) -> Grouping:
    """A user-defined grouping; see :class:`Custom`."""
    return Custom(chooser)
