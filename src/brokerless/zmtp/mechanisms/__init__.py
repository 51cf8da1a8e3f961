"""Security mechanisms: each runs the handshake commands between greeting and traffic."""

from __future__ import annotations

from .base import Mechanism
from .null import NullMechanism

__all__ = ["Mechanism", "NullMechanism"]
