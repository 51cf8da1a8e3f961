"""Subscription tables for the publish-subscribe sockets.

libzmq keeps prefix tries; in Python a trie walk costs a dict lookup per byte, so topics are
kept in a dict and grouped by length instead: matching a message tries one slice lookup per
distinct subscription length (usually one or two), and the all-topics subscription ``b""``
matches without slicing.

That costs a slice and a hash of ``n`` octets for every distinct length ``n`` up to the
message's, which subscribers choose: a peer subscribing to a few thousand topics of as many
lengths (a few MB, sent once) would make every message of a few KB cost milliseconds to
publish, where libzmq's trie walk costs its length.  So a publisher's table whose distinct
lengths add up to more than :data:`MATCH_COST_MAX` octets matches through a radix tree
(:class:`_Radix`: edges of many octets, compared in place) instead, which looks at each octet
of the message at most once; built when first needed, kept up to date from then on, and
dropped when the table is empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

#: The most octets a match by length may slice and hash (the sum of the distinct lengths)
#: before a publisher's table matches through its radix tree instead.
MATCH_COST_MAX = 4096


class _ByLength:
    """Shared bookkeeping: how many topics of each length exist, and the sorted lengths."""

    __slots__ = ("_count_by_length", "_length_sum", "_lengths")

    def __init__(self) -> None:
        self._count_by_length: dict[int, int] = {}
        self._lengths: list[int] = []  # sorted distinct topic lengths
        self._length_sum = 0  # of the distinct lengths: what a match by length may hash

    def _added(self, topic: bytes) -> None:
        n = len(topic)
        count = self._count_by_length.get(n, 0)
        self._count_by_length[n] = count + 1
        if not count:
            self._lengths.append(n)
            self._lengths.sort()
            self._length_sum += n

    def _removed(self, topic: bytes) -> None:
        n = len(topic)
        count = self._count_by_length[n] - 1
        if count:
            self._count_by_length[n] = count
        else:
            del self._count_by_length[n]
            self._lengths.remove(n)
            self._length_sum -= n


class _Node:
    """A radix tree's node: the edge from its parent (one or more octets), its children by
    the first octet of theirs, and the topic the octets down to here spell, if one is."""

    __slots__ = ("children", "edge", "topic")

    def __init__(self, edge: bytes, topic: bytes | None = None) -> None:
        self.edge = edge
        self.children: dict[int, _Node] = {}
        self.topic = topic


class _Radix:
    """The topics of a table as a radix tree, to find those that are prefixes of a message
    looking at each of its octets at most once."""

    __slots__ = ("_root",)

    def __init__(self, topics: Iterable[bytes]) -> None:
        self._root = _Node(b"")
        for topic in topics:
            self.add(topic)

    def add(self, topic: bytes) -> None:
        node, pos, size = self._root, 0, len(topic)
        while pos < size:
            child = node.children.get(topic[pos])
            if child is None:
                node.children[topic[pos]] = _Node(topic[pos:], topic)
                return
            edge = child.edge
            common = len(edge)
            if not topic.startswith(edge, pos):
                common = 1  # (the first octets are equal: that is how the child was found)
                while pos + common < size and topic[pos + common] == edge[common]:
                    common += 1
                middle = _Node(edge[:common])
                child.edge = edge[common:]
                middle.children[child.edge[0]] = child
                node.children[edge[0]] = middle
                child = middle
            node, pos = child, pos + common
        node.topic = topic

    def discard(self, topic: bytes) -> None:
        path: list[_Node] = []
        node, pos = self._root, 0
        while pos < len(topic):
            child = node.children.get(topic[pos])
            if child is None or not topic.startswith(child.edge, pos):
                return
            path.append(node)
            node, pos = child, pos + len(child.edge)
        node.topic = None
        # Prune: a node that is no topic goes if it has no child, or merges into its one child.
        while path and node.topic is None and len(node.children) < 2:
            parent = path.pop()
            if node.children:
                (child,) = node.children.values()
                child.edge = node.edge + child.edge
                parent.children[node.edge[0]] = child
                return
            del parent.children[node.edge[0]]
            node = parent

    def prefixes_of(self, data: bytes) -> Iterator[bytes]:
        """The topics that are prefixes of ``data``, shortest first."""
        node, pos, size = self._root, 0, len(data)
        if node.topic is not None:
            yield node.topic
        while pos < size:
            child = node.children.get(data[pos])
            if child is None or not data.startswith(child.edge, pos):
                return
            node, pos = child, pos + len(child.edge)
            if node.topic is not None:
                yield node.topic


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

    __slots__ = ("_radix", "_topics")

    def __init__(self) -> None:
        super().__init__()
        self._topics: dict[bytes, set[Any]] = {}
        self._radix: _Radix | None = None  # (see the module docstring)

    def add(self, topic: bytes, pipe: Any) -> bool:
        """Subscribe ``pipe``; True when it is the topic's first subscriber."""
        pipes = self._topics.get(topic)
        if pipes is None:
            self._topics[topic] = {pipe}
            self._added(topic)
            if self._radix is not None:
                self._radix.add(topic)
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
        if self._radix is not None:
            if self._topics:
                self._radix.discard(topic)
            else:
                self._radix = None
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
        found: Any = None
        if self._radix is not None or self._length_sum > MATCH_COST_MAX:
            if self._radix is None:
                self._radix = _Radix(topics)
            for topic in self._radix.prefixes_of(data):
                found = topics[topic] if found is None else found | topics[topic]
            return found or ()
        size = len(data)
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
