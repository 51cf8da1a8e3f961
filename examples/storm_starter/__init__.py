"""Apache Storm's storm-starter topologies, ported to ``brokerless.stream``.

Each module is one of storm-starter's topologies (``examples/storm-starter`` in apache/storm),
written as a Python user would write it here, and runnable from this folder (``examples/``)::

    brokerless stream list storm_starter      # each module's topology
    brokerless stream run storm_starter.exclamation:topology --emitted exclaim2
    brokerless stream run storm_starter.word_count:topology --workers 2 --emitted count

or from Python (``complete_topology(topology)``, ``run_local(topology)``, ...):

- ``exclamation``: ExclamationTopology -- two chained bolts.
- ``word_count``: WordCountTopology -- its split bolt, a multilang Python bolt in Storm, is a
  plain Python bolt here; fields grouping on the word.
- ``rolling_top_words``: RollingTopWords -- tick tuples, a slot-based sliding window counter,
  intermediate rankers and a total ranker on a global grouping; and (``skewed``)
  SkewedRollingTopWords, its counters fed by partial key grouping.
- ``sliding_window``: SlidingWindowTopology -- count-based windows, sliding and tumbling.
- ``sliding_tuple_ts``: SlidingTupleTsTopology -- event-time windows on a timestamp field, with
  a lag.
- ``single_join``: SingleJoinExample -- two streams joined on their common fields, found from
  the context.
- ``stateful``: StatefulTopology -- checkpointed ``StatefulBolt`` sums.
- ``stateful_windowing``: StatefulWindowingTopology -- a ``StatefulWindowedBolt``.

Storm's spouts there are endless and random; these are bounded and deterministic
(``spouts.py``), so that a run ends by itself with a result you can check.  Not ported: the
DRPC, Trident, Kafka, HDFS, blob store and Streams API examples, whose APIs brokerless does
not have.
"""
