"""The live topology UI, as Storm UI is to Storm: a web page served from the driver.

    with run_local(topology, ui=8080) as run:      # or ui=True: a free port; run.ui.url
        run.wait_until_done()

or ``brokerless stream ui module:topology``.  The page draws the topology's graph (spouts,
bolts, the groupings on the edges) and, updated live, per component and per executor (its
tasks): emitted, transferred, acked, failed, executed, execute or complete latency, a bolt's
process latency, queue depth, tuples in flight; per worker its transfer queue and traffic;
the configuration; the errors with their tracebacks; and the attempts of a run that restarts
(Spark).  Its buttons deactivate and activate the topology and, for a run of ``brokerless
stream``, kill it, as Storm UI's do.  Behind it are JSON endpoints, ``/api/topology``,
``/api/stats`` and ``/api/status``, and the buttons' POSTs (``model.py`` says what the
figures hold; ``server.py`` how they are served and what the actions do).
"""

from __future__ import annotations

from .server import TopologyUI, UIAddress, parse_address

__all__ = ["TopologyUI", "UIAddress", "parse_address"]
