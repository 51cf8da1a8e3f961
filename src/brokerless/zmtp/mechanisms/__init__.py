"""Security mechanisms: each runs the handshake commands between greeting and traffic.

NULL and PLAIN are here; CURVE is :mod:`.curve` (imported where it is used: it loads PyNaCl).
"""

from __future__ import annotations

from .base import Mechanism
from .null import NullMechanism
from .plain import PlainClient, PlainServer

__all__ = ["Mechanism", "NullMechanism", "PlainClient", "PlainServer"]
