"""Subscription tables for the publish-subscribe sockets.

libzmq keeps prefix tries; in Python a trie walk costs a dict lookup per byte, so topics are
kept in a dict and grouped by length instead: matching a message tries one slice lookup per
distinct subscription length (usually one or two), and the all-topics subscription ``b""``
matches without slicing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any


class _ByLength:
    """Shared bookkeeping: how many topics of each length exist, and the sorted lengths."""

    __slots__ = ("_count_by_length", "_lengths")

    def __init__(self) -> None:
        self._count_by_length: dict[int, int] = {}
        self._lengths: list[int] = []  # sorted distinct topic lengths

    def _added(self, topic: bytes) -> None:
        n = len(topic)
        count = self._count_by_length.get(n, 0)
        self._count_by_length[n] = count + 1
        if not count:
            self._lengths.append(n)
            self._lengths.sort()

    def _removed(self, topic: bytes) -> None:
        n = len(topic)
        count = self._count_by_length[n] - 1
        if count:
            self._count_by_length[n] = count
        else:
            del self._count_by_length[n]
            self._lengths.remove(n)


class SubscriptionCounts(_ByLength):
    """A SUB/XSUB's own subscriptions, counted: each unsubscribe removes one subscribe."""

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        super().__init__()
        self._counts: dict[bytes, int] = {}

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._counts)

    def snapshot(self) -> tuple[bytes, ...]:
        """The topics, safe to take from another thread: ``tuple(dict)`` runs in C without
        releasing the GIL, so it cannot see the dict change under it."""
        return tuple(self._counts)

    def __len__(self) -> int:
        return len(self._counts)

    def __contains__(self, topic: object) -> bool:
        return topic in self._counts

    def add(self, topic: bytes) -> bool:
        """Count one more subscription; True when the topic is new."""
        n = self._counts.get(topic, 0)
        self._counts[topic] = n + 1
        if n == 0:
            self._added(topic)
        return n == 0

    def rm(self, topic: bytes) -> bool:
        """Count one subscription less; True when the last one for the topic went."""
        n = self._counts.get(topic, 0)
        if n == 0:
            return False
        if n > 1:
            self._counts[topic] = n - 1
            return False
        del self._counts[topic]
        self._removed(topic)
        return True

    def matches(self, data: bytes) -> bool:
        """Whether any subscription is a prefix of ``data``."""
        counts = self._counts
        if not counts:
            return False
        size = len(data)
        for n in self._lengths:
            if n > size:
                return False
            if (data[:n] if n else b"") in counts:
                return True
        return False


class SubscriptionTable(_ByLength):
    """An XPUB's view: which pipes subscribed to which topics (a pipe counts once per topic)."""

    __slots__ = ("_topics",)

    def __init__(self) -> None:
        super().__init__()
        self._topics: dict[bytes, set[Any]] = {}

    def add(self, topic: bytes, pipe: Any) -> bool:
        """Subscribe ``pipe``; True when it is the topic's first subscriber."""
        pipes = self._topics.get(topic)
        if pipes is None:
            self._topics[topic] = {pipe}
            self._added(topic)
            return True
        pipes.add(pipe)
        return False

    def rm(self, topic: bytes, pipe: Any) -> bool:
        """Unsubscribe ``pipe``; True when the topic has no subscriber left."""
        pipes = self._topics.get(topic)
        if pipes is None or pipe not in pipes:
            return False
        pipes.discard(pipe)
        if pipes:
            return False
        del self._topics[topic]
        self._removed(topic)
        return True

    def topics_of(self, pipe: Any) -> list[bytes]:
        return [topic for topic, pipes in self._topics.items() if pipe in pipes]

    def rm_pipe(self, pipe: Any) -> list[bytes]:
        """Drop every subscription of ``pipe``; returns the topics left with no subscriber."""
        return [topic for topic in self.topics_of(pipe) if self.rm(topic, pipe)]

    def everything_only(self) -> set[Any] | None:
        """The subscribers when the only topic is ``b""`` (everyone gets every message, the
        usual fan-out: no need to look at the message); else None."""
        if self._lengths == [0]:
            return self._topics[b""]
        return None

    def match(self, data: bytes) -> Iterable[Any]:
        """The pipes with a subscription that is a prefix of ``data``."""
        topics = self._topics
        if not topics:
            return ()
        size = len(data)
        found: Any = None
        for n in self._lengths:
            if n > size:
                break
            pipes = topics.get(data[:n] if n else b"")
            if pipes:
                found = pipes if found is None else found | pipes
        return found or ()

    def pipes(self) -> set[Any]:
        every: set[Any] = set()
        for pipes in self._topics.values():
            every |= pipes
        return every
