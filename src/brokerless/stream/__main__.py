"""``python -m brokerless.stream``: see :mod:`brokerless.stream.cli`."""

from .cli import main

raise SystemExit(main())
