"""streamparse on brokerless: its class-based topology DSL and its component classes.

A streamparse project runs with its imports changed (``from streamparse import ...`` becomes
``from brokerless.stream.sparse import ...``) and nothing else::

    from brokerless.stream.sparse import Bolt, Grouping, Spout, Topology

    class WordCount(Topology):
        config = {"topology.workers": 2}
        word_spout = WordSpout.spec()
        count_bolt = WordCountBolt.spec(inputs={word_spout: Grouping.fields("word")}, par=2)

The components (``Spout``, ``Bolt``, ``BatchingBolt``, ``TicklessBatchingBolt``,
``ReliableSpout``; ``initialize``, streamparse's ``emit``) are in ``sparse_components.py``.

Each class attribute made by ``Component.spec`` is a component, named after the attribute
(or ``spec(name=...)``), in the order written.  ``inputs`` is a list of specs (each subscribed
with a shuffle, or direct for a direct stream) or a dict from a spec -- its default stream --
or ``spec["stream"]`` to a :class:`Grouping`.  The topology's ``config`` takes the Storm
settings brokerless has (:data:`STORM_SETTINGS`) and keys of the user's own, which every
component sees (``storm_conf`` in ``initialize``, ``conf.settings`` in ``open``/``prepare``);
another ``topology.`` key is refused, naming those.  A component's ``config`` takes
:data:`COMPONENT_SETTINGS`.

``WordCount.topology()`` is the brokerless :class:`~brokerless.stream.topology.Topology` (named
after the class), and so is what calling the class returns: that is how
``brokerless stream run module:WordCount`` and every ``run_*`` take it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from .component import ComponentSpec, Stream, StreamRef, declared_streams
from .component import Spout as _Spout
from .config import STORM_SETTINGS, Config, storm_fields
from .grouping import (
    Grouping as _Grouping,
)
from .grouping import (
    all_,
    direct,
    fields,
    global_,
    local_or_shuffle,
    none,
    shuffle,
)
from .sparse_components import (
    BatchingBolt,
    Bolt,
    ReliableSpout,
    Spout,
    TicklessBatchingBolt,
)
from .topology import Topology as _Topology
from .topology import TopologyError
from .tuple import Tuple

__all__ = [
    "COMPONENT_SETTINGS",
    "STORM_SETTINGS",
    "BatchingBolt",
    "Bolt",
    "Grouping",
    "ReliableSpout",
    "Spout",
    "Stream",
    "TicklessBatchingBolt",
    "Topology",
    "Tuple",
]

#: The Storm settings a component's ``config`` takes: the ``Topology.bolt``/``spout`` argument.
COMPONENT_SETTINGS = {
    "topology.tick.tuple.freq.secs": "tick_tuple_freq_secs",
    "topology.max.spout.pending": "max_spout_pending",
}


class Grouping:
    """streamparse's groupings: how a bolt's tasks share a stream."""

    SHUFFLE = shuffle()
    GLOBAL = global_()
    DIRECT = direct()
    ALL = all_()
    NONE = none()
    LOCAL_OR_SHUFFLE = local_or_shuffle()

    @staticmethod
    def fields(*names: str | list[str]) -> _Grouping:
        """Tuples with equal values in the named fields go to the same task."""
        if len(names) == 1 and isinstance(names[0], list):
            return fields(*names[0])
        return fields(*names)  # type: ignore[arg-type]  # (str each, as streamparse's)


class Topology:
    """A topology in streamparse's DSL (the module doc).  Subclass it; calling the subclass,
    or its ``topology()``, gives the brokerless Topology."""

    #: Storm settings of the whole topology (:data:`STORM_SETTINGS`)
    config: ClassVar[Mapping[str, Any]] = {}
    _specs: ClassVar[dict[str, ComponentSpec]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        specs = {
            value.name or attribute: value
            for attribute, value in vars(cls).items()
            if isinstance(value, ComponentSpec)
        }
        cls._specs = specs

    def __new__(cls) -> _Topology:  # type: ignore[misc]  # (the DSL's use: see the class doc)
        return cls.topology()

    @classmethod
    def topology(cls) -> _Topology:
        """The brokerless topology this class describes."""
        name = cls.__name__
        try:
            config = Config(**_settings(cls.config, name))
        except TypeError as exc:
            raise TopologyError(f"topology {name!r}: config: {exc}") from None
        built = _Topology(name, config)
        names = {id(spec): component for component, spec in cls._specs.items()}
        for component, spec in cls._specs.items():
            where = f"topology {name!r}, component {component!r}"
            par = 1 if spec.par is None else spec.par
            settings = _component_settings(spec.config, where)
            factory: Any = spec.component  # (the builder checks what it makes)
            if isinstance(factory, type) and issubclass(factory, _Spout):
                if spec.inputs:
                    raise TopologyError(f"{where}: a spout takes no inputs")
                built.spout(component, factory, parallelism=par, **settings)
            else:
                inputs = _inputs(spec.inputs, names, where)
                built.bolt(component, factory, inputs=inputs, parallelism=par, **settings)
        return built


def _settings(config: Mapping[str, Any], name: str) -> dict[str, Any]:
    """Config fields from a topology's ``config`` (see :func:`storm_fields`)."""
    try:
        return storm_fields(config)
    except ValueError as exc:
        raise TopologyError(f"topology {name!r}: {exc}") from None


def _component_settings(config: Mapping[str, Any] | None, where: str) -> dict[str, Any]:
    found = {}
    for key, value in (config or {}).items():
        setting = COMPONENT_SETTINGS.get(key)
        if setting is None:
            raise TopologyError(
                f"{where}: config {key!r} is not a component setting brokerless has; it takes "
                f"{sorted(COMPONENT_SETTINGS)} (the others are the topology's)"
            )
        found[setting] = value
    return found


def _inputs(
    inputs: Any, names: dict[int, str], where: str
) -> dict[str | tuple[str, str], _Grouping]:
    """A spec's ``inputs`` as ``Topology.bolt`` takes them."""

    def source(ref: Any) -> tuple[ComponentSpec, str]:
        if isinstance(ref, ComponentSpec):
            return ref, "default"
        if isinstance(ref, StreamRef):
            return ref.spec, ref.stream
        raise TopologyError(
            f"{where}: inputs name components by their spec (or spec['stream']), not {ref!r}"
        )

    def key(spec: ComponentSpec, stream: str) -> tuple[str, str]:
        component = names.get(id(spec))
        if component is None:
            raise TopologyError(f"{where}: an input, {spec!r}, is not a component of it")
        return component, stream

    found: dict[str | tuple[str, str], _Grouping] = {}
    if isinstance(inputs, Mapping):
        for ref, grouping in inputs.items():
            if not isinstance(grouping, _Grouping):
                raise TopologyError(
                    f"{where}: the grouping of an input is a Grouping (Grouping.SHUFFLE, "
                    f"Grouping.fields(...), ...), not {grouping!r}"
                )
            found[key(*source(ref))] = grouping
        return found
    if isinstance(inputs, ComponentSpec | StreamRef):
        inputs = [inputs]
    if not isinstance(inputs, list | tuple) or not inputs:
        raise TopologyError(f"{where}: a bolt's inputs are a list or a dict, not {inputs!r}")
    for ref in inputs:
        spec, stream = source(ref)
        streams = declared_streams(getattr(spec.component, "outputs", ()))
        is_direct = stream in streams and streams[stream].direct
        found[key(spec, stream)] = Grouping.DIRECT if is_direct else Grouping.SHUFFLE
    return found
