"""Storm-style stream processing over brokerless: topologies of spouts and bolts.

    from brokerless.stream import Bolt, Spout, Topology, complete_topology, fields, shuffle

    class Split(Bolt):
        outputs = ["word"]

        def process(self, tup):
            for word in tup["sentence"].split():
                self.emit([word])              # anchored to tup, which is acked on return

    class Count(Bolt):
        outputs = ["word", "count"]

        def prepare(self, conf, context):
            self.counts = {}

        def process(self, tup):
            word = tup["word"]
            self.counts[word] = self.counts.get(word, 0) + 1
            self.emit([word, self.counts[word]])

    topology = (Topology("word-count")
                .spout("sentences", SentenceSpout, parallelism=2)
                .bolt("split", Split, parallelism=2, inputs={"sentences": shuffle()})
                .bolt("count", Count, parallelism=2, tasks=4, inputs={"split": fields("word")}))

    result = complete_topology(topology, {"sentences": [["the cat"], ["the dog"]]})
    result.emitted("count")   # [["the", 1], ["cat", 1], ["the", 2], ["dog", 1]], in some order

Local mode runs a topology in one process (``run_local``); multi-process mode runs it in N
worker processes over ipc or tcp (``run_multiprocess``, or
``python -m brokerless.stream run module:topology --workers N``); ``complete_topology`` runs
one to completion on fixed input in either mode and returns what each component emitted.

Stateful bolts (``StatefulBolt``, whose ``KeyValueState`` is exactly-once) make a topology
checkpointed: aligned barriers from replayable spouts (``WALSpout``, ``SequenceSpout``), and a
rollback to the last complete checkpoint when a worker is lost (``checkpoint.py``).
(``brokerless.spark.run_on_spark`` runs the workers as Spark tasks.)
Modules: ``component`` (Spout, Bolt, Stream), ``batching`` (streamparse's batching bolts),
``windowing`` (Storm's windowed bolts), ``sparse`` (streamparse's class DSL), ``topology``
(builder, validation, plan), ``grouping``, ``tuple``, ``serializer``, ``config``; and the
runtime: ``worker`` (how tuples move, back pressure), ``executor`` (with ``spout_executor``,
``bolt_executor``, ``acker_executor``; ``host``: what they see of their worker), ``emit`` (a
task's emit path), ``transfer`` (outboxes, credits), ``acker`` (reliability), ``queues``,
``messaging``, ``inbound`` (what a worker accepts from the network), ``routing``,
``assignment``, ``metrics``, ``run`` (completion), ``local``, ``control`` (the driver-workers
channel of workers in other processes), ``multiprocess``, ``testing``, ``examples`` (word
count); checkpoints: ``checkpoint`` (protocol, coordinator), ``stateful`` (its executors),
``state``, ``storage``, ``spouts``, ``wal`` (the write-ahead log ``WALSpout`` reads).  The
``brokerless stream`` command is ``brokerless.cli.topologies``.
"""

from __future__ import annotations

from .batching import BatchingBolt, TicklessBatchingBolt
from .checkpoint import CheckpointRecord, CheckpointStatistics, read_state
from .component import (
    DEFAULT_STREAM,
    Bolt,
    Component,
    ReplayableSpout,
    Spout,
    StatefulBolt,
    Stream,
    TopologyContext,
)
from .config import Config
from .control import WorkerProcessError
from .errorlog import ErrorReport
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
from .multiprocess import MultiprocessRun, run_multiprocess
from .plan import TopologyPlan
from .queues import Shutdown
from .run import TopologyRun
from .serializer import MsgpackSerializer, PickleSerializer, SerializationError, Serializer
from .spouts import SequenceSpout, WALSpout
from .state import KeyValueState
from .statistics import ComponentStats, Statistics, WindowStats
from .testing import CompletedTopology, FixedTupleSpout, complete_topology
from .topology import Topology, TopologyError
from .tuple import Tuple
from .windowing import Count, Duration, StatefulWindowedBolt, TupleWindow, WindowedBolt

__all__ = [
    "DEFAULT_STREAM",
    "BatchingBolt",
    "Bolt",
    "CheckpointRecord",
    "CheckpointStatistics",
    "CompletedTopology",
    "Component",
    "ComponentStats",
    "Config",
    "Count",
    "Duration",
    "ErrorReport",
    "FixedTupleSpout",
    "Grouping",
    "KeyValueState",
    "LocalRun",
    "MsgpackSerializer",
    "MultiprocessRun",
    "PickleSerializer",
    "ReplayableSpout",
    "SequenceSpout",
    "SerializationError",
    "Serializer",
    "Shutdown",
    "Spout",
    "StatefulBolt",
    "StatefulWindowedBolt",
    "Statistics",
    "Stream",
    "TicklessBatchingBolt",
    "Topology",
    "TopologyContext",
    "TopologyError",
    "TopologyPlan",
    "TopologyRun",
    "Tuple",
    "TupleWindow",
    "WALSpout",
    "WindowStats",
    "WindowedBolt",
    "WorkerProcessError",
    "all_",
    "complete_topology",
    "custom",
    "direct",
    "fields",
    "global_",
    "local_or_shuffle",
    "none",
    "partial_key",
    "read_state",
    "run_local",
    "run_multiprocess",
    "shuffle",
]
