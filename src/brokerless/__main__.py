"""``python -m brokerless``: the ``brokerless`` command (see :mod:`brokerless.cli`)."""

from brokerless.cli import main

raise SystemExit(main())
