"""Storm-style stream processing over brokerless: topologies of spouts and bolts.

    from brokerless.stream import Bolt, Spout, Topology, fields, shuffle, complete_topology

Local mode runs a topology in one process (``run_local``); multi-process mode runs it in N
worker processes over ipc or tcp (``run_multiprocess``, or ``python -m brokerless.stream run
module:topology --workers N``); ``complete_topology`` runs one to completion on fixed input and
returns what each component emitted.  See ``worker.py`` for how tuples move.
"""

from __future__ import annotations

from .component import DEFAULT_STREAM, Bolt, Component, Spout, Stream, TopologyContext
from .config import Config
from .grouping import (
    Grouping,
    all_,
    custom,
    direct,
    fields,
    global_,
    local_or_shuffle,
    none,
    partial_key,
    shuffle,
)
from .local import LocalRun, run_local
from .metrics import ComponentStats, ErrorReport, Statistics
from .queues import Shutdown
from .run import TopologyRun
from .serializer import MsgpackSerializer, PickleSerializer, SerializationError, Serializer
from .testing import CompletedTopology, FixedTupleSpout, complete_topology
from .topology import Topology, TopologyError, TopologyPlan
from .tuple import Tuple

__all__ = [
    "DEFAULT_STREAM",
    "Bolt",
    "CompletedTopology",
    "Component",
    "ComponentStats",
    "Config",
    "ErrorReport",
    "FixedTupleSpout",
    "Grouping",
    "LocalRun",
    "MsgpackSerializer",
    "PickleSerializer",
    "SerializationError",
    "Serializer",
    "Shutdown",
    "Spout",
    "Statistics",
    "Stream",
    "Topology",
    "TopologyContext",
    "TopologyError",
    "TopologyPlan",
    "TopologyRun",
    "Tuple",
    "all_",
    "complete_topology",
    "custom",
    "direct",
    "fields",
    "global_",
    "local_or_shuffle",
    "none",
    "partial_key",
    "run_local",
    "shuffle",
]
