"""``python -m brokerless.stream``: the ``brokerless stream`` command
(``brokerless.cli.topologies``)."""

from brokerless.cli.topologies import main

raise SystemExit(main())
