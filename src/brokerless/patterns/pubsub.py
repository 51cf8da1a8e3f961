"""PUB, SUB, XPUB and XSUB: publish-subscribe with subscription forwarding.

Subscriptions travel upstream as messages: ``b"\\x01" + topic`` subscribes, ``b"\\x00" + topic``
cancels.  An XSUB/SUB keeps its own subscriptions counted and sends the whole set into every pipe
it gains (so a subscription made before a peer connects always reaches it), and again into a
pipe whose connection is being re-established (a publisher that restarts at the same address
gets them all; one still queued from before arrives twice, which a publisher's per-pipe table
absorbs); an XPUB/PUB reads them from its pipes as soon as they arrive and filters outgoing
messages with a :class:`SubscriptionTable`.  Subscription messages are written past the HWM:
dropping one would silently cut a subscriber off.

When everything (``b""``) is the only topic subscribed to -- the usual fan-out -- an XPUB/PUB
offers its subscribers' pipes as ``broadcast``, and the socket's ``send`` queues a single part
into each of them itself (``pipe.write_all``) while every one has room; otherwise ``xsend``
decides pipe by pipe.  Any change of subscriptions, pipes or options marks ``broadcast`` stale
(``refresh``), and the next ``xsend`` works it out again.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ..constants import SocketOption, SocketType
from ..errno import EINVAL
from ..error import ZMQError
from ..pipe import Lane, Pipe
from .base import Pattern, as_bytes, first_frame
from .strategies import Distributor, FairQueue
from .trie import SubscriptionCounts, SubscriptionTable

_O = SocketOption
SUBSCRIBE_PREFIX = 1
CANCEL_PREFIX = 0


class XPub(Pattern):
    socket_type = SocketType.XPUB
    options_accepted = frozenset(
        {
            _O.XPUB_VERBOSE,
            _O.XPUB_VERBOSER,
            _O.XPUB_NODROP,
            _O.XPUB_MANUAL,
            _O.XPUB_WELCOME_MSG,
            _O.SUBSCRIBE,
            _O.UNSUBSCRIBE,
        }
    )
    #: PUB does not pass subscriptions to the application.
    delivers_subscriptions = True

    def __init__(self, options: dict[SocketOption, Any]) -> None:
        super().__init__(options)
        self.dist = Distributor()
        self.subscriptions = SubscriptionTable()
        self.pending: deque[Any] = deque()  # subscription messages for the application
        self.last_pipe: Pipe | None = None  # who sent the last subscription (XPUB_MANUAL)
        # XPUB_MANUAL: what each subscriber asked for (granted or not), cancelled when it goes
        self.requested = SubscriptionTable()
        # XPUB_VERBOSE passes duplicate subscribes; XPUB_VERBOSER also every unsubscribe.
        self.verbose_subs = False
        self.verbose_unsubs = False
        self._stale = False  # ``broadcast`` needs working out again (see ``refresh``)

    def greeting(self) -> tuple[Any, ...]:
        welcome = self.options[_O.XPUB_WELCOME_MSG]
        return (welcome,) if welcome else ()

    def attach(self, pipe: Pipe) -> bool | None:
        self.dist.attach(pipe)
        self.greet(pipe)
        self.read_activated(pipe)
        return True

    def terminated(self, pipe: Pipe) -> None:
        """A subscriber left: its subscriptions go, reported as unsubscriptions (in topic
        order, as libzmq's trie gives them) -- with XPUB_MANUAL each topic it asked for,
        granted or not; with XPUB_VERBOSER each of its topics; else those now without a
        subscriber."""
        self.dist.terminated(pipe)
        if self.last_pipe is pipe:
            self.last_pipe = None
        if self.options[_O.XPUB_MANUAL]:
            topics = self.requested.topics_of(pipe)
            self.requested.rm_pipe(pipe)
            self.subscriptions.rm_pipe(pipe)
        elif self.verbose_unsubs:
            topics = self.subscriptions.topics_of(pipe)
            self.subscriptions.rm_pipe(pipe)
        else:
            topics = self.subscriptions.rm_pipe(pipe)
        for topic in sorted(topics):
            self._deliver(bytes((CANCEL_PREFIX,)) + topic)

    def read_activated(self, pipe: Pipe) -> None:
        while (msg := pipe.read()) is not None:
            self._upstream(pipe, msg)

    def _deliver(self, msg: Any) -> None:
        if self.delivers_subscriptions:
            self.pending.append(msg)

    def _upstream(self, pipe: Pipe, msg: Any) -> None:
        if msg.__class__ is not list:
            data = as_bytes(msg)
            if not data or data[0] > SUBSCRIBE_PREFIX:
                self._deliver(msg)  # an ordinary message sent up by an XSUB
            elif self._subscription(pipe, data):
                self._deliver(data)
            return
        # Each frame of a multipart message is looked at, as libzmq 4.3 does (its draft
        # ONLY_FIRST_SUBSCRIBE off): a subscription or a cancel is taken, and one passed on to
        # the application ends the message the frames before it make (libzmq hands it on
        # without MORE); the frames after it make another.
        current: list[Any] = []
        for part in msg:
            data = as_bytes(part)
            if not data or data[0] > SUBSCRIBE_PREFIX:
                current.append(part)
            elif self._subscription(pipe, data):
                current.append(data)
                self._deliver(current if len(current) > 1 else current[0])
                current = []
        if current:
            self._deliver(current if len(current) > 1 else current[0])

    def _subscription(self, pipe: Pipe, data: bytes) -> bool:
        """Take a subscription (``data[0]`` 1) or a cancel (0) from ``pipe``; whether the
        application is told of it."""
        topic = data[1:]
        if self.options[_O.XPUB_MANUAL]:
            self.last_pipe = pipe
            if data[0] == SUBSCRIBE_PREFIX:
                self.requested.add(topic, pipe)
            else:
                self.requested.rm(topic, pipe)
            return True
        if data[0] == SUBSCRIBE_PREFIX:
            notify = self.subscriptions.add(topic, pipe) or self.verbose_subs
        else:
            notify = self.subscriptions.rm(topic, pipe) or self.verbose_unsubs
        self.refresh()
        return bool(notify)

    def refresh(self) -> None:
        """A subscription, a pipe or an option changed: ``broadcast`` is worked out again at the
        next send (so a storm of subscriptions costs a flag each, not a look at every pipe)."""
        self.broadcast = None
        self._stale = True

    def _broadcast(self) -> tuple[tuple[Pipe, Lane], ...] | None:
        """The subscribers' pipes when everything (``b""``) is the only topic subscribed to --
        the usual fan-out: every message goes to each of them -- unless matching is inverted
        or a pipe conflates; else None."""
        everyone = self.subscriptions.everything_only()
        if (
            everyone is None
            or self.options[_O.INVERT_MATCHING]
            or any(pipe.outbound.conflate for pipe in everyone)
        ):
            return None
        return tuple((pipe, pipe.outbound) for pipe in everyone)

    def _targets(self, msg: Any) -> Any:
        everyone = self.subscriptions.everything_only()
        matched = (
            everyone
            if everyone is not None
            else self.subscriptions.match(as_bytes(first_frame(msg)))
        )
        if self.options[_O.INVERT_MATCHING]:
            return [pipe for pipe in self.dist.pipes if pipe not in matched]
        return matched

    def xsend(self, msg: Any) -> bool:
        if self._stale:  # (the socket's fast path takes the next ones, see ``refresh``)
            self._stale = False
            self.broadcast = self._broadcast()
        targets = self._targets(msg)
        if self.options[_O.XPUB_NODROP] and not self.dist.all_writable(targets):
            return False
        self.dist.send_to(msg, targets)
        return True

    def xprepare_send(self, first: Any) -> bool:
        return self.xhas_out()

    def xhas_out(self) -> bool:
        if self.options[_O.XPUB_NODROP]:
            return self.dist.all_writable(self.dist.pipes)
        return True

    def xrecv(self) -> Any:
        pending = self.pending
        return pending.popleft() if pending else None

    def xhas_in(self) -> bool:
        return bool(self.pending)

    def xsetsockopt(self, option: SocketOption, value: Any) -> None:
        if option == _O.XPUB_VERBOSE:
            self.verbose_subs, self.verbose_unsubs = bool(value), False
        elif option == _O.XPUB_VERBOSER:
            self.verbose_subs = self.verbose_unsubs = bool(value)
        if option not in (_O.SUBSCRIBE, _O.UNSUBSCRIBE):
            return
        if not self.options[_O.XPUB_MANUAL]:
            raise ZMQError(
                EINVAL,
                "Invalid argument: an XPUB takes SUBSCRIBE/UNSUBSCRIBE only with XPUB_MANUAL set",
            )
        if self.last_pipe is None:
            return
        if option == _O.SUBSCRIBE:
            self.subscriptions.add(value, self.last_pipe)
        else:
            self.subscriptions.rm(value, self.last_pipe)


class Pub(XPub):
    socket_type = SocketType.PUB
    options_accepted = XPub.options_accepted - {_O.SUBSCRIBE, _O.UNSUBSCRIBE}
    delivers_subscriptions = False

    def xrecv(self) -> Any:
        return Pattern.xrecv(self)

    def xhas_in(self) -> bool:
        return False


class XSub(Pattern):
    socket_type = SocketType.XSUB
    #: Whether received messages are filtered by the subscriptions (SUB does, XSUB does not:
    #: an XSUB passes on whatever its publishers chose to send it).
    filters = False

    def __init__(self, options: dict[SocketOption, Any]) -> None:
        super().__init__(options)
        options[_O.LINGER] = 0  # libzmq's default: closing never waits to send (un)subscriptions
        self.fq = FairQueue()
        self.dist = Distributor()
        self.subscriptions = SubscriptionCounts()
        self.prefetched: Any = None

    def greeting(self) -> tuple[Any, ...]:
        """One subscribe message per topic (built on demand: subscribing stays O(1))."""
        return tuple(bytes((SUBSCRIBE_PREFIX,)) + t for t in self.subscriptions.snapshot())

    def attach(self, pipe: Pipe) -> bool | None:
        self.fq.attach(pipe)
        self.dist.attach(pipe)
        # Send the subscriptions the connecting side did not already put in the pipe for us
        # (all of them, unless it did), and cancel any dropped since it took its snapshot.
        sent = set(pipe.greeted or ())
        current = self.greeting()
        for msg in current:
            if msg not in sent:
                pipe.force_write(msg)
        for msg in sent.difference(current):
            pipe.force_write(bytes((CANCEL_PREFIX,)) + msg[1:])
        return True

    def terminated(self, pipe: Pipe) -> None:
        self.fq.terminated(pipe)
        self.dist.terminated(pipe)

    def hiccuped(self, pipe: Pipe) -> None:
        for msg in self.greeting():
            pipe.force_write(msg)

    def read_activated(self, pipe: Pipe) -> None:
        self.fq.activated(pipe)

    def received_from(self) -> Pipe | None:
        return self.fq.last_pipe

    def _send_upstream(self, msg: Any) -> None:
        for pipe in self.dist.pipes:
            if not pipe.terminating:
                pipe.force_write(msg)

    def xsend(self, msg: Any) -> bool:
        # Each frame is looked at, as libzmq 4.3's XSUB does (ONLY_FIRST_SUBSCRIBE off): a
        # subscription is taken and goes on, a cancel goes on if it cancels one; the rest of
        # the message goes upstream with them, to every publisher.  One with a subscription
        # or a cancel in it is written past the HWM (the module doc).
        parts = msg if msg.__class__ is list else (msg,)
        kept: list[Any] = []
        changes = False
        for part in parts:
            data = as_bytes(part)
            if data and data[0] == SUBSCRIBE_PREFIX:
                self.subscriptions.add(data[1:])
                changes = True
            elif data and data[0] == CANCEL_PREFIX:
                changes = True
                if not self.subscriptions.rm(data[1:]):
                    continue  # (it cancels nothing: dropped)
            kept.append(part)
        if kept:
            out = kept if msg.__class__ is list and len(kept) > 1 else kept[0]
            if changes:
                self._send_upstream(out)
            else:
                self.dist.send_to_all(out)
        return True

    def xhas_out(self) -> bool:
        return True

    def _matches(self, msg: Any) -> bool:
        matched = self.subscriptions.matches(as_bytes(first_frame(msg)))
        return matched != bool(self.options[_O.INVERT_MATCHING])

    def xrecv(self) -> Any:
        msg = self.prefetched
        if msg is not None:
            self.prefetched = None
            if self.options[_O.CONFLATE]:  # a message that arrived since supersedes it
                newer = self._next()
                if newer is not None:
                    return newer
            return msg
        return self._next()

    def _next(self) -> Any:
        fq = self.fq
        if not self.filters:
            return fq.recv()
        while (msg := fq.recv()) is not None:
            if self._matches(msg):
                return msg
        return None

    def xhas_in(self) -> bool:
        if self.prefetched is not None:
            return True
        if self._passes_all():  # no message to look at before it is received
            return self.fq.has_in()
        self.prefetched = self.xrecv()
        return self.prefetched is not None

    def _passes_all(self) -> bool:
        """Every message is received as it comes: no filter (XSUB, or a SUB subscribed to
        everything, not inverted) and no conflation."""
        options = self.options
        if options[_O.CONFLATE]:
            return False
        if not self.filters:
            return True
        return b"" in self.subscriptions and not options[_O.INVERT_MATCHING]

    def recv_passes_through(self) -> bool:
        return self.prefetched is None and self._passes_all()


class Sub(XSub):
    socket_type = SocketType.SUB
    options_accepted = frozenset({_O.SUBSCRIBE, _O.UNSUBSCRIBE})
    filters = True

    def xsend(self, msg: Any) -> bool:
        return Pattern.xsend(self, msg)

    def xhas_out(self) -> bool:
        return False

    def xsetsockopt(self, option: SocketOption, value: Any) -> None:
        prefix = SUBSCRIBE_PREFIX if option == _O.SUBSCRIBE else CANCEL_PREFIX
        XSub.xsend(self, bytes((prefix,)) + value)
