"""Socket types as strategies over pipes; ``PATTERNS`` maps a socket type to its class."""

from __future__ import annotations

from ..constants import SocketType
from .base import Pattern
from .pair import Pair
from .pipeline import Pull, Push
from .pubsub import Pub, Sub, XPub, XSub
from .reqrep import Dealer, Rep, Req, Router
from .stream import Stream

PATTERNS: dict[SocketType, type[Pattern]] = {
    cls.socket_type: cls
    for cls in (Pair, Pub, Sub, Req, Rep, Dealer, Router, Pull, Push, XPub, XSub, Stream)
}

__all__ = ["PATTERNS", "Pattern"]
