"""Topologies: the builder users write, checked and planned into the ``plan.TopologyPlan``
the runtime executes.

    topo = (Topology("word-count")
            .spout("sentences", SentenceSpout, parallelism=2)
            .bolt("split", SplitBolt, parallelism=2, inputs={"sentences": shuffle()})
            .bolt("count", CountBolt, parallelism=2, tasks=4, inputs={"split": fields("word")}))

``build()`` checks the whole topology and returns a :class:`TopologyPlan`; every mistake is a
:class:`TopologyError` that names the component and says what to do.  The plan gives every task
an id (1, 2, ... in declaration order, the system's acker tasks last) and splits each
component's tasks over its executors; it is a pure function of the topology and its config, so
every worker process computes the same plan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from .component import (
    DEFAULT_STREAM,
    Bolt,
    BufferingBolt,
    Component,
    ComponentKind,
    ReplayableSpout,
    Spout,
    StatefulBolt,
    Stream,
    declared_streams,
)
from .config import Config, pending_problem, tick_problem
from .grouping import Grouping, Shuffle
from .plan import ACKER, ComponentPlan, ExecutorPlan, Subscription, TopologyPlan
from .tuple import Fields

Inputs = Mapping[str | tuple[str, str], Grouping] | Sequence[str]


class TopologyError(ValueError):
    """A mistake in a topology's definition, found when it is built."""


@dataclass(frozen=True)
class _Declaration:
    name: str
    kind: ComponentKind  # a spout or a bolt
    factory: Callable[[], Component]
    parallelism: Any
    tasks: Any
    inputs: Any
    tick_secs: Any = None  # a bolt's own tick tuple frequency
    max_pending: Any = None  # a spout's own max_spout_pending


class Topology:
    """A topology definition: spouts and bolts wired by groupings."""

    def __init__(self, name: str, config: Config | None = None) -> None:
        self.name = name
        self.config = config or Config()
        self._declarations: list[_Declaration] = []

    def spout(
        self,
        name: str,
        component: Callable[[], Spout],
        *,
        parallelism: int = 1,
        tasks: int | None = None,
        max_spout_pending: int | None = None,
    ) -> Topology:
        """Add a spout; ``component`` is a Spout class or a zero-argument factory.
        ``max_spout_pending``: this spout's, in place of the topology's
        ``Config.max_spout_pending`` (Storm's per-component setting)."""
        self._declarations.append(
            _Declaration(
                name,
                ComponentKind.SPOUT,
                component,
                parallelism,
                tasks,
                None,
                max_pending=max_spout_pending,
            )
        )
        return self

    def bolt(
        self,
        name: str,
        component: Callable[[], Bolt],
        *,
        inputs: Inputs,
        parallelism: int = 1,
        tasks: int | None = None,
        tick_tuple_freq_secs: float | None = None,
    ) -> Topology:
        """Add a bolt.  ``inputs`` maps a component (its default stream) or a
        ``(component, stream)`` pair to a grouping; a list of names means shuffle.
        ``tick_tuple_freq_secs``: this bolt's tick tuples (``Bolt.process_tick``), in place of
        the topology's ``Config.tick_tuple_freq_secs`` (Storm's per-component setting)."""
        self._declarations.append(
            _Declaration(
                name,
                ComponentKind.BOLT,
                component,
                parallelism,
                tasks,
                inputs,
                tick_tuple_freq_secs,
            )
        )
        return self

    def with_component(self, name: str, component: Callable[[], Component]) -> Topology:
        """A copy with ``name`` made by another class or factory (e.g. a mock spout)."""
        if name not in self.component_names():
            raise TopologyError(f"{self.name!r} has no component {name!r} to replace")
        copy = Topology(self.name, self.config)
        copy._declarations = [
            dataclasses.replace(d, factory=component) if d.name == name else d
            for d in self._declarations
        ]
        return copy

    def with_config(self, **changes: Any) -> Topology:
        """A copy with some config settings changed."""
        copy = Topology(self.name, self.config.replace(**changes))
        copy._declarations = list(self._declarations)
        return copy

    def component_names(self) -> list[str]:
        return [d.name for d in self._declarations]

    def build(self, config: Config | None = None) -> TopologyPlan:
        """Validate and plan the topology (``config`` defaults to the topology's own)."""
        return _Planner(self, config or self.config).plan()

    def __repr__(self) -> str:
        return f"<Topology {self.name!r} {self.component_names()}>"


class _Planner:
    def __init__(self, topology: Topology, config: Config) -> None:
        self.topology = topology
        self.config = config
        self.where = f"topology {topology.name!r}"

    def error(self, message: str) -> TopologyError:
        return TopologyError(f"{self.where}: {message}")

    def plan(self) -> TopologyPlan:
        problems = self.config.problems()
        if problems:
            raise self.error("config: " + "; ".join(problems))
        declarations = self.topology._declarations
        if not any(d.kind is ComponentKind.SPOUT for d in declarations):
            raise self.error("it has no spout: add one with .spout(name, SpoutClass)")
        seen: set[str] = set()
        for d in declarations:
            self.check_declaration(d, seen)
            seen.add(d.name)
        self.check_parallelism(declarations)
        kinds = {d.name: d.kind for d in declarations}
        streams: dict[str, dict[str, Stream]] = {}
        finite: dict[str, bool] = {}
        instances: dict[str, Component] = {}
        for d in declarations:
            streams[d.name], finite[d.name], instances[d.name] = self.inspect(d)
        inputs = {d.name: self.check_inputs(d, kinds, streams) for d in declarations}
        self.check_reachable(kinds, inputs)
        stateful = {name for name, c in instances.items() if isinstance(c, StatefulBolt)}
        if stateful:
            self.check_checkpointable(stateful, instances, inputs)
        ticks = {
            name: self.tick_secs(d, bolt)
            for d in declarations
            if isinstance(bolt := instances[(name := d.name)], Bolt)
        }
        return self.assemble(declarations, streams, finite, stateful, inputs, ticks)

    def check_declaration(self, d: _Declaration, seen: set[str]) -> None:
        if not isinstance(d.name, str) or not d.name:
            raise self.error(f"component name {d.name!r} must be a non-empty string")
        if d.name.startswith("__"):
            raise self.error(f"component {d.name!r}: names starting with '__' are reserved")
        if d.name in seen:
            raise self.error(f"component {d.name!r} is declared twice: give each a unique name")
        where = f"{d.kind} {d.name!r}"
        if not isinstance(d.parallelism, int) or d.parallelism < 1:
            raise self.error(f"{where}: parallelism must be an integer >= 1, not {d.parallelism!r}")
        tick = tick_problem(d.tick_secs)
        if tick is not None:
            raise self.error(f"{where}: tick_tuple_freq_secs {tick}")
        pending = pending_problem(d.max_pending)
        if pending is not None:
            raise self.error(f"{where}: max_spout_pending {pending} (None: the topology's)")
        if d.tasks is not None and (not isinstance(d.tasks, int) or d.tasks < d.parallelism):
            raise self.error(
                f"{where}: tasks must be an integer >= parallelism ({d.parallelism}), "
                f"not {d.tasks!r}"
            )
        if not callable(d.factory):
            raise self.error(f"{where}: {d.factory!r} is not a class or a factory function")
        if d.kind is ComponentKind.BOLT and not d.inputs:
            raise self.error(f"bolt {d.name!r} has no inputs: pass inputs={{'spout': shuffle()}}")

    def check_parallelism(self, declarations: list[_Declaration]) -> None:
        """``Config.parallelism``: executors of declared components, each from 1 to its
        tasks."""
        tasks = {d.name: d.tasks or d.parallelism for d in declarations}
        for name, executors in self.config.parallelism.items():
            if name not in tasks:
                known = ", ".join(repr(n) for n in tasks)
                raise self.error(f"parallelism of {name!r}: it has no such component ({known})")
            if isinstance(executors, bool) or not isinstance(executors, int) or executors < 1:
                raise self.error(
                    f"parallelism of {name!r} must be an integer >= 1, not {executors!r}"
                )
            if executors > tasks[name]:
                raise self.error(
                    f"parallelism of {name!r} must be at most its tasks ({tasks[name]}), not "
                    f"{executors}: a component's tasks never change (its state and fields "
                    "grouping are per task); declare it with tasks=N to allow up to N executors"
                )

    def inspect(self, d: _Declaration) -> tuple[dict[str, Stream], bool, Component]:
        """Make one instance to read the declared outputs (and check the type); returns the
        outputs, whether it is a finite spout, and the instance."""
        where = f"{d.kind} {d.name!r}"
        try:
            instance = d.factory()
        except Exception as exc:
            raise self.error(f"{where}: creating it with {d.factory!r} failed: {exc!r}") from exc
        expected = Spout if d.kind is ComponentKind.SPOUT else Bolt
        if not isinstance(instance, expected):
            raise self.error(
                f"{where}: {d.factory!r} made a {type(instance).__name__}, not a "
                f"{expected.__name__}: use .{d.kind}() only for {expected.__name__} subclasses"
            )
        try:
            streams = declared_streams(instance.outputs)
        except ValueError as exc:
            raise self.error(f"{where}: outputs: {exc}") from None
        finite = (
            d.kind is ComponentKind.SPOUT
            and isinstance(instance, Spout)  # as checked above: narrows the type for mypy
            and type(instance).exhausted is not Spout.exhausted
        )
        return streams, finite, instance

    def tick_secs(self, d: _Declaration, bolt: Bolt) -> float | None:
        """A bolt's tick tuple frequency: its declaration's, else the bolt's own
        (``Bolt.tick_tuple_freq_secs``), else the topology's; a batching or windowed bolt
        decides for itself (``BufferingBolt.resolve_tick_secs``)."""
        declared = d.tick_secs
        if declared is None:
            declared = bolt.tick_tuple_freq_secs
            problem = tick_problem(declared)
            if problem is not None:
                raise self.error(f"bolt {d.name!r}: its tick_tuple_freq_secs {problem}")
        if isinstance(bolt, BufferingBolt):
            try:
                return bolt.resolve_tick_secs(declared, self.config)
            except ValueError as exc:
                raise self.error(f"bolt {d.name!r}: {exc}") from None
        return self.config.tick_tuple_freq_secs if declared is None else declared

    def check_inputs(
        self,
        d: _Declaration,
        kinds: dict[str, ComponentKind],
        streams: dict[str, dict[str, Stream]],
    ) -> dict[tuple[str, str], Grouping]:
        if d.kind is ComponentKind.SPOUT:
            return {}
        where = f"bolt {d.name!r}"
        raw = d.inputs
        if isinstance(raw, str | tuple):
            raw = [raw]
        if not isinstance(raw, Mapping):
            raw = dict.fromkeys(raw, Shuffle())
        checked: dict[tuple[str, str], Grouping] = {}
        for key, grouping in raw.items():
            source, stream = (key, DEFAULT_STREAM) if isinstance(key, str) else tuple(key)
            if source not in kinds:
                raise self.error(
                    f"{where} subscribes to unknown component {source!r}; the components are "
                    f"{sorted(kinds)}: fix the name in its inputs"
                )
            declared = streams[source]
            if stream not in declared:
                raise self.error(
                    f"{where} subscribes to stream {stream!r} of {source!r}, which declares "
                    f"{sorted(declared) or 'no streams'}: declare it in {source!r}'s outputs "
                    "or subscribe to a declared stream"
                )
            if not isinstance(grouping, Grouping):
                hint = " (call it: e.g. shuffle())" if callable(grouping) else ""
                raise self.error(f"{where}: {grouping!r} is not a grouping{hint}")
            out = declared[stream]
            if grouping.direct and not out.direct:
                raise self.error(
                    f"{where} uses direct() on stream {stream!r} of {source!r}, which is not "
                    f"a direct stream: declare Stream(..., direct=True) or use another grouping"
                )
            if out.direct and not grouping.direct:
                raise self.error(
                    f"{where} uses {grouping!r} on direct stream {stream!r} of {source!r}: "
                    "subscribe to a direct stream with direct()"
                )
            problem = grouping.problem(tuple(out.fields))
            if problem:
                raise self.error(f"{where}, input {source!r} stream {stream!r}: {problem}")
            checked[(source, stream)] = grouping
        return checked

    def check_reachable(
        self, kinds: dict[str, ComponentKind], inputs: dict[str, dict[tuple[str, str], Grouping]]
    ) -> None:
        downstream = _edges(inputs)
        reached = _reach(
            [name for name, kind in kinds.items() if kind is ComponentKind.SPOUT], downstream
        )
        for name in kinds:
            if name not in reached:
                raise self.error(
                    f"bolt {name!r} can never receive a tuple: no spout feeds it (its inputs "
                    "form a cycle with no spout); subscribe it, or a bolt upstream of it, to a "
                    "spout"
                )

    def check_checkpointable(
        self,
        stateful: set[str],
        instances: dict[str, Component],
        inputs: dict[str, dict[tuple[str, str], Grouping]],
    ) -> None:
        """A topology with stateful bolts is checkpointed: its spouts must be replayable and
        it may have no cycle (see ``checkpoint.py``)."""
        why = f"it has stateful bolts ({sorted(stateful)}), so it is checkpointed"
        for name, instance in instances.items():
            if isinstance(instance, Spout) and not isinstance(instance, ReplayableSpout):
                raise self.error(
                    f"spout {name!r} is not a ReplayableSpout and {why}: a rollback must send "
                    "every spout back to the position of the last checkpoint; make it a "
                    "ReplayableSpout (position()/seek()), e.g. WALSpout over a log"
                )
        downstream = _edges(inputs)
        for name in instances:
            if any(name in _reach([after], downstream) for after in downstream.get(name, ())):
                raise self.error(
                    f"bolt {name!r} is in a cycle and {why}: a checkpoint barrier would wait "
                    "for itself; stateful topologies must be acyclic"
                )

    def assemble(
        self,
        declarations: list[_Declaration],
        streams: dict[str, dict[str, Stream]],
        finite: dict[str, bool],
        stateful: set[str],
        inputs: dict[str, dict[tuple[str, str], Grouping]],
        ticks: dict[str, float | None],
    ) -> TopologyPlan:
        components: dict[str, ComponentPlan] = {}
        executors: list[ExecutorPlan] = []
        next_task = 1
        layout: list[tuple[str, ComponentKind, Callable[[], Component] | None, int, int]] = [
            (
                d.name,
                d.kind,
                d.factory,
                self.config.parallelism.get(d.name, d.parallelism),
                d.tasks or d.parallelism,
            )
            for d in declarations
        ]
        ackers = self.config.ackers
        if ackers:
            layout.append((ACKER, ComponentKind.ACKER, None, ackers, ackers))
        default_pending = self.config.max_spout_pending
        pending = {
            d.name: default_pending if d.max_pending is None else d.max_pending
            for d in declarations
            if d.kind is ComponentKind.SPOUT
        }
        for name, kind, factory, parallelism, n_tasks in layout:
            tasks = tuple(range(next_task, next_task + n_tasks))
            next_task += n_tasks
            ids = []
            for group in _split(tasks, parallelism):
                ids.append(len(executors))
                executors.append(ExecutorPlan(len(executors), name, group))
            declared = streams.get(name, {})
            components[name] = ComponentPlan(
                name=name,
                kind=kind,
                factory=factory,
                tasks=tasks,
                executors=tuple(ids),
                streams=declared,
                schemas={s.name: Fields(s.fields) for s in declared.values()},
                inputs=inputs.get(name, {}),
                finite=finite.get(name, False),
                stateful=name in stateful,
                tick_secs=ticks.get(name),
                max_spout_pending=pending.get(name),
            )
        downstream = _edges(inputs)
        subscribers: dict[tuple[str, str], list[Subscription]] = {}
        for target, subscribed in inputs.items():
            for (source, stream), grouping in subscribed.items():
                in_cycle = source in _reach([target], downstream)
                subscribers.setdefault((source, stream), []).append(
                    Subscription(target, grouping, blocking=not in_cycle)
                )
        return TopologyPlan(
            self.topology.name, self.config, components, tuple(executors), subscribers
        )


def _edges(inputs: dict[str, dict[tuple[str, str], Grouping]]) -> dict[str, set[str]]:
    downstream: dict[str, set[str]] = {}
    for target, subscribed in inputs.items():
        for source, _ in subscribed:
            downstream.setdefault(source, set()).add(target)
    return downstream


def _reach(starts: Iterable[str], downstream: dict[str, set[str]]) -> set[str]:
    """Components reachable from ``starts`` (including them)."""
    seen = set(starts)
    todo = list(seen)
    while todo:
        for nxt in downstream.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _split(tasks: tuple[int, ...], parts: int) -> list[tuple[int, ...]]:
    """Contiguous groups of tasks, sizes differing by at most one (Storm's executor split)."""
    size, extra = divmod(len(tasks), parts)
    groups, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        groups.append(tasks[start:end])
        start = end
    return groups


def load_topology(reference: str) -> Topology:
    """``"package.module:name"`` -> the Topology it names (or that calling it returns)."""
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise TopologyError(f"topology reference {reference!r} must look like 'module:name'")
    found: Any = getattr(import_module(module_name), attribute)
    if not isinstance(found, Topology) and callable(found):
        found = found()
    if not isinstance(found, Topology):
        raise TopologyError(f"{reference!r} is a {type(found).__name__}, not a Topology")
    return found
