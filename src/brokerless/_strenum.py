"""``StrEnum``: Python 3.11's ``enum.StrEnum``, and on Python 3.10, which lacks it, an enum
that behaves the same: its members are ``str``, equal to their values, and print as them."""

from __future__ import annotations

import enum
import sys

__all__ = ["StrEnum"]

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:

    class StrEnum(str, enum.Enum):
        def __str__(self) -> str:
            return str.__str__(self)

        def __format__(self, spec: str) -> str:
            return str.__format__(str(self), spec)
