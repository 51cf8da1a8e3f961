"""The ZMTP 3.x codec (``brokerless.zmtp``) on its own: bytes in, bytes out, no sockets.

Wire bytes the tests expect are written out by hand from RFC 23 (ZMTP 3.0) and RFC 37 (ZMTP 3.1),
so they check the codec against the specification and not against itself.
"""

from __future__ import annotations

import itertools
import random
import sys
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brokerless.constants import SocketType as T
from brokerless.frame import Frame
from brokerless.zmtp import (
    ERROR_STATE,
    GREETING,
    HANDSHAKE,
    IDENTITY,
    MAX_FRAME_SIZE,
    TRAFFIC,
    Connection,
    FrameDecoder,
    HandshakeError,
    MessageTooLarge,
    PeerError,
    Ping,
    Pong,
    ProtocolError,
    Ready,
    UnexpectedFrame,
    encode_message,
)
from brokerless.zmtp.encoder import UNIFORM_MIN, encode_batch
from brokerless.zmtp.frames import (
    COMMAND,
    DIRECT_MIN,
    DIRECT_READ_MAX,
    LARGE,
    LONG,
    PIECE_MIN,
    RUN_MIN,
    WAIT_READ_MAX,
    WINDOW,
)
from brokerless.zmtp.frames_v1 import V1FrameDecoder

pytestmark = pytest.mark.timeout(30)

FAST = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- wire bytes, written by hand -----------------------------------------------------------------


def greeting(
    major: int = 3,
    minor: int = 1,
    mechanism: bytes = b"NULL",
    as_server: bool = False,
    padding: bytes = bytes(8),
) -> bytes:
    """A 64-octet ZMTP 3 greeting: signature, version, mechanism, as-server, filler."""
    assert len(padding) == 8
    return (
        b"\xff" + padding + b"\x7f"
        + bytes((major, minor))
        + mechanism.ljust(20, b"\x00")
        + (b"\x01" if as_server else b"\x00")
        + bytes(31)
    )  # fmt: skip


def command(name: bytes, data: bytes = b"") -> bytes:
    """A command frame: flags 0x04 (short) or 0x06 (long), size, name length, name, data."""
    body = bytes((len(name),)) + name + data
    if len(body) < 256:
        return b"\x04" + bytes((len(body),)) + body
    return b"\x06" + len(body).to_bytes(8, "big") + body


def metadata(props: dict[bytes, bytes]) -> bytes:
    return b"".join(bytes((len(k),)) + k + len(v).to_bytes(4, "big") + v for k, v in props.items())


def ready(socket_type: bytes, **extra: bytes) -> bytes:
    props = {b"Socket-Type": socket_type}
    props.update({k.encode(): v for k, v in extra.items()})
    return command(b"READY", metadata(props))


def frame(body: bytes, more: bool = False) -> bytes:
    if len(body) < 256:
        return bytes((0x01 if more else 0x00, len(body))) + body
    return bytes((0x03 if more else 0x02,)) + len(body).to_bytes(8, "big") + body


def wire(msg) -> bytes:
    """A message (bytes, or a list of parts) as frames."""
    if isinstance(msg, list):
        return b"".join(frame(p, more=i < len(msg) - 1) for i, p in enumerate(msg))
    return frame(msg)


# -- driving connections ---------------------------------------------------------------------------


def exchange(a: Connection, b: Connection) -> tuple[list, list]:
    """Shuttle bytes between two connections until both are quiet; what each received."""
    got_a: list = []
    got_b: list = []
    for _ in range(10):
        to_b, to_a = a.data_to_send(), b.data_to_send()
        if not to_a and not to_b:
            return got_a, got_b
        if to_a:
            got_a += a.receive_data(to_a)
        if to_b:
            got_b += b.receive_data(to_b)
    raise AssertionError("the connections never went quiet")


def greet(a: Connection, b: Connection) -> None:
    """Exchange greetings, in their three steps (signature, major version, the rest)."""
    for _ in range(3):
        to_b, to_a = a.data_to_send(), b.data_to_send()
        assert a.receive_data(to_a) == [] and b.receive_data(to_b) == []
    assert a.state is HANDSHAKE and b.state is HANDSHAKE


def connected(type_a: T, type_b: T, **kw_b) -> tuple[Connection, Connection]:
    """Two connections through greeting and handshake, both in TRAFFIC."""
    a, b = Connection(type_a), Connection(type_b, as_server=True, **kw_b)
    got_a, got_b = exchange(a, b)
    assert [type(e) for e in got_a] == [Ready]
    assert [type(e) for e in got_b] == [Ready]
    assert a.state is TRAFFIC and b.state is TRAFFIC
    return a, b


def facing(socket_type: T, peer_type: bytes, *, minor: int = 1, **kw) -> tuple[Connection, Ready]:
    """One connection handshaken with a hand-crafted peer; its greeting and READY are drained."""
    conn = Connection(socket_type, **kw)
    out = conn.receive_data(greeting(minor=minor) + ready(peer_type))
    assert len(out) == 1 and isinstance(out[0], Ready)
    assert conn.state is TRAFFIC
    sent = conn.data_to_send()
    assert sent[:10] == b"\xff" + (1).to_bytes(8, "big") + b"\x7f"
    assert sent[10:12] == b"\x03\x01"
    return conn, out[0]


def feed_in_chunks(conn_or_decoder, data: bytes, cuts: list[int]) -> list[list]:
    """Feed ``data`` split at ``cuts``; what each call returned."""
    feed = getattr(conn_or_decoder, "receive_data", None) or conn_or_decoder.feed
    bounds = [0, *sorted(set(cuts)), len(data)]
    return [feed(data[lo:hi]) for lo, hi in itertools.pairwise(bounds) if hi > lo]


# -- strategies ----------------------------------------------------------------------------------


@st.composite
def parts(draw) -> bytes:
    """A frame body: mostly 0-300 octets (some over 255, some empty), rarely over 64 KiB."""
    kind = draw(st.integers(0, 19))
    if kind == 0:
        size = draw(st.integers(65536, 65536 + 600))
        seed = draw(st.binary(min_size=1, max_size=16))
        return (seed * (size // len(seed) + 1))[:size]
    if kind == 1:
        return b""
    if kind <= 4:
        return draw(st.binary(min_size=256, max_size=300))
    return draw(st.binary(max_size=300))


messages = st.one_of(parts(), st.lists(parts(), min_size=2, max_size=5))
message_lists = st.lists(messages, max_size=8)

TRAFFIC_PAIRS = [
    (T.PUSH, T.PULL),
    (T.PAIR, T.PAIR),
    (T.DEALER, T.ROUTER),
    (T.REQ, T.REP),
    (T.PUB, T.SUB),
    (T.XPUB, T.XSUB),
]


# -- framing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("msg", "expected"),
    [
        (b"", b"\x00\x00"),
        (b"abc", b"\x00\x03abc"),
        (b"x" * 255, b"\x00\xff" + b"x" * 255),
        (b"x" * 256, b"\x02" + (256).to_bytes(8, "big") + b"x" * 256),
        ([b"a", b""], b"\x01\x01a\x00\x00"),
        ([b"y" * 300, b"z"], b"\x03" + (300).to_bytes(8, "big") + b"y" * 300 + b"\x00\x01z"),
        (
            [b"a", b"b", b"y" * 256],
            b"\x01\x01a\x01\x01b\x02" + (256).to_bytes(8, "big") + b"y" * 256,
        ),
    ],
)
def test_encode_message_wire_form(msg, expected):
    out: list = []
    encode_message(out, msg)
    assert b"".join(out) == expected
    assert FrameDecoder().feed(expected) == [msg]


def test_encode_takes_bytearray_and_memoryview_parts():
    out: list = []
    encode_message(out, [bytearray(b"ab"), memoryview(b"c" * 300)])
    encode_message(out, memoryview(b"xyz"))
    assert FrameDecoder().feed(b"".join(out)) == [[b"ab", b"c" * 300], b"xyz"]


def test_one_part_list_arrives_as_bytes():
    """The wire cannot tell ``[b"x"]`` from ``b"x"``; the decoder delivers the simpler form."""
    out: list = []
    encode_message(out, [b"x"])
    assert b"".join(out) == b"\x00\x01x"
    assert FrameDecoder().feed(b"".join(out)) == [b"x"]


def test_long_frame_with_a_small_size_is_accepted():
    """RFC 37: short sizes SHOULD be used below 256; a long header for a small body is valid."""
    data = b"\x02" + (3).to_bytes(8, "big") + b"abc" + b"\x03" + bytes(8) + b"\x00\x01z"
    assert FrameDecoder().feed(data) == [b"abc", [b"", b"z"]]


def test_decoder_delivers_byte_by_byte():
    msgs = [b"one", [b"", b"two", b"t" * 256], b"", [b"a", b"b"]]
    stream = b"".join(wire(m) for m in msgs)
    dec = FrameDecoder()
    got = []
    for i in range(len(stream)):
        got += dec.feed(stream[i : i + 1])
    assert got == msgs
    assert dec.buffered == 0


def test_decoder_says_whether_a_read_met_a_large_frame():
    """``large``: whether the first long frame of the last feed (or the frame it began in) is
    one of LARGE octets or more -- what a PULL goes by to read its connection itself."""
    big, small = b"L" * LARGE, b"s" * (LARGE - 1)
    stream = wire(big)
    dec = FrameDecoder()
    assert dec.feed(memoryview(stream)[:5]) == [] and dec.large  # its header begun
    assert dec.feed(memoryview(stream)[5:1000]) == [] and dec.large
    assert dec.feed(memoryview(stream)[1000:]) == [big] and dec.large
    assert dec.feed(memoryview(wire(small) + wire(b"x"))) == [small, b"x"]
    assert not dec.large
    assert dec.feed(memoryview(wire(b"x") + wire(big) + wire(small))) == [b"x", big, small]
    assert dec.large  # short frames first
    assert dec.feed(memoryview(wire(small) + wire(big))) == [small, big] and not dec.large
    assert dec.feed(memoryview(wire(b"y"))) == [b"y"] and not dec.large
    assert dec.feed(wire(big) + wire(b"z")) == [big, b"z"] and dec.large  # bytes: its first frame
    assert dec.feed(wire(b"z") + wire(big)) == [b"z", big] and not dec.large


def test_decoder_accepts_bytearray_and_memoryview_input():
    stream = wire([b"p", b"q" * 300]) + wire(b"r")
    dec = FrameDecoder()
    assert dec.feed(bytearray(stream[:5])) == []
    assert dec.feed(memoryview(stream)[5:]) == [[b"p", b"q" * 300], b"r"]


@FAST
@given(msgs=message_lists, data=st.data())
def test_frame_decoder_round_trip_split_anywhere(msgs, data):
    out: list = []
    for m in msgs:
        encode_message(out, m)
    stream = b"".join(out)
    assert stream == b"".join(wire(m) for m in msgs)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=30), label="cuts")
    batches = feed_in_chunks(FrameDecoder(), stream, cuts)
    assert [m for batch in batches for m in batch] == msgs
    check_all_or_nothing(msgs, 0, cuts, len(stream), batches)


@FAST
@given(msgs=message_lists, data=st.data())
def test_frame_decoder_fed_from_a_reused_read_buffer_keeps_nothing_of_it(msgs, data):
    """Fed as a transport feeds it -- views of one read buffer, overwritten by the next read
    -- the decoder still delivers every message whole, whatever frames the reads end in: what
    it holds between reads is its own copy.  A read may also be decoded twice (an interrupted
    reader restores the state saved before it and decodes the read again)."""
    stream = b"".join(wire(m) for m in msgs)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=30), label="cuts")
    again = data.draw(st.lists(st.booleans(), min_size=32, max_size=32), label="again")
    bounds = [0, *sorted(set(cuts)), len(stream)]
    buffer = bytearray(len(stream))
    dec = FrameDecoder()
    got: list = []
    for i, (lo, hi) in enumerate(itertools.pairwise(bounds)):
        buffer[: hi - lo] = stream[lo:hi]
        read = memoryview(buffer)[: hi - lo]
        saved = dec.save()
        first = dec.feed(read)
        if again[i % 32]:
            dec.restore(saved)
            assert dec.feed(read) == first
        got += first
        buffer[:] = b"\xff" * len(buffer)  # the next read overwrites the buffer
    assert got == msgs and dec.buffered == 0


def test_a_large_frame_over_several_reads_is_held_as_it_comes():
    """A frame's octets are held as they arrive, however large its header says it is, and its
    body comes out whole (and marked large) when the read that completes it comes."""
    body = bytes(range(256)) * 1024  # 256 KiB
    stream = wire(body) + wire(b"next")
    dec = FrameDecoder()
    assert dec.feed(memoryview(stream)[:5]) == [] and dec.buffered == 5  # a partial header
    assert dec.feed(memoryview(stream)[5:70_000]) == [] and dec.buffered == 70_000
    assert dec.large
    assert dec.feed(memoryview(stream)[70_000:140_000]) == [] and dec.buffered == 140_000
    assert dec.feed(memoryview(stream)[140_000:]) == [body, b"next"]
    assert dec.large and dec.buffered == 0


def numbered(size: int, n: int) -> bytes:
    """A body of ``size`` octets with ``n`` throughout, so that a mix-up shows."""
    return ((n.to_bytes(2, "big") + bytes(range(254))) * (size // 256 + 1))[:size]


def test_a_large_body_read_whole_after_its_header_is_handed_on_as_read():
    """Once a large frame's header is in, the decoder asks for the rest of its body as bytes
    of their own, and a read that brings all of it becomes the message itself, uncopied; then
    it asks for the next header alone."""
    body = bytes(range(256)) * 800  # 204,800 octets: DIRECT_MIN or more
    head = wire(body)[:9]
    dec = FrameDecoder()
    assert dec.direct_read == 0 and dec.read_limit == 0
    assert dec.feed(memoryview(head + body[:1000])) == []
    assert dec.direct_read == len(body) - 1000  # the rest, once more than one read in
    assert dec.feed(body[1000:5000]) == [] and dec.direct_read == len(body) - 5000
    assert dec.feed(body[5000:]) == [body] and dec.read_limit == 9 and dec.direct_read == 0
    assert dec.feed(memoryview(head + body[:10])) == [] and dec.direct_read == len(body) - 10
    assert dec.feed(body[10:] + wire(b"next")) == [body, b"next"]
    assert dec.read_limit == 0  # (that read did not end where the large frame did)
    assert dec.feed(memoryview(head)) == [] and dec.direct_read == len(body)
    whole = bytes(body)  # (a distinct object, as a read makes one)
    (got,) = dec.feed(whole)
    assert got is whole and dec.read_limit == 9
    assert dec.feed(memoryview(wire(b"small"))) == [b"small"] and dec.read_limit == 0
    dec.feed(memoryview(wire(b"x" * (DIRECT_MIN - 1))[:100]))
    assert dec.direct_read == 0  # (below DIRECT_MIN: read into the buffer)


def test_a_frame_trickled_an_octet_a_read_costs_about_its_octets():
    """A peer that sends a large frame an octet at a time (each read brings one) makes the
    decoder hold about what it sent, not an object per octet: small pieces are merged."""
    dec = FrameDecoder()
    dec.feed(memoryview(b"\x02" + (1 << 30).to_bytes(8, "big")))
    sent = 200_000
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(sent):
            dec.feed(b"x")
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert dec.buffered == 9 + sent
    assert held < 1.2 * sent, f"{held} octets of memory for {sent} octets held"


@pytest.mark.parametrize("kind", ["command", "handshake command", "zmtp 1.0 frame"])
def test_a_read_into_a_large_held_frame_of_any_kind_copies_only_itself(kind):
    """However many octets of a frame are held -- a command, one during the handshake, a ZMTP
    1.0 frame -- a read that does not complete it costs about its own octets, never a copy of
    all that is held (that made a frame sent in n reads cost n² / 2 reads' worth of copying:
    128 MiB took 13 s, from an unauthenticated peer)."""
    read, held = 256 * 1024, 8 << 20
    claimed = 1 << 30
    if kind == "zmtp 1.0 frame":
        dec: FrameDecoder = V1FrameDecoder()
        dec.feed(b"\x02\x00i")  # the peer's identity first
        header = b"\xff" + (claimed + 1).to_bytes(8, "big") + b"\x00"
    else:
        dec = FrameDecoder(handshaking=kind == "handshake command")
        header = bytes((COMMAND | LONG,)) + claimed.to_bytes(8, "big") + b"\x07MESSAGE"
    dec.feed(memoryview(header))
    chunk = memoryview(bytes(read))
    for _ in range(held // read):
        assert dec.feed(chunk) == []
    tracemalloc.start()
    try:
        dec.feed(chunk)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert dec.buffered == len(header) + held + read
    assert peak < 2 * read, f"a read of {read} octets made {peak} octets of copies"


def test_a_read_into_a_message_of_many_parts_costs_no_copy_of_its_parts():
    """A message of many parts, each read saved first (as a lent read does) and each part
    completed from a held frame: a read costs about its own octets, not a copy of the list of
    parts so far (a peer sending a message of n parts in 2n reads cost n² / 2)."""
    dec = FrameDecoder()
    part = frame(b"p", more=True)
    for _ in range(50_000):
        dec.save()
        assert dec.feed(memoryview(part)[:1]) == []
        dec.save()
        assert dec.feed(memoryview(part)[1:]) == []
    tracemalloc.start()
    try:
        dec.save()
        dec.feed(memoryview(part)[:1])
        dec.save()
        dec.feed(memoryview(part)[1:])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10_000, f"a 3-octet frame's reads made {peak} octets of copies"
    assert dec.feed(memoryview(frame(b"end"))) == [[b"p"] * 50_001 + [b"end"]]


def test_saving_the_state_costs_the_same_however_many_pieces_are_held():
    """A reader saves before every read, and a large frame may come in thousands of reads: the
    save copies nothing of what is held (a copy of the list of pieces made a frame sent in n
    reads cost n² / 2), and still undoes a feed that appended pieces or grew the last one."""
    dec = FrameDecoder()
    pieces = [bytes((i % 251,)) * PIECE_MIN for i in range(5000)] + [b"short"]
    rest = bytes(range(256)) * (2 * PIECE_MIN // 256)
    body = b"".join(pieces) + rest
    dec.feed(memoryview(b"\x02" + len(body).to_bytes(8, "big")))
    for piece in pieces:
        dec.feed(memoryview(piece))
    tracemalloc.start()
    try:
        saved = dec.save()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1000, f"saving the state of {len(pieces)} held pieces made {peak} octets"
    for _ in range(2):
        assert dec.feed(memoryview(rest[:10])) == []  # (merged into the short last piece)
        assert dec.feed(memoryview(rest[10 : PIECE_MIN + 10])) == []  # (a piece of its own)
        dec.restore(saved)
    assert dec.feed(memoryview(rest)) == [body]


def test_a_feed_undone_twice_leaves_the_state_before_it():
    """``restore`` undoes a feed however often it is called with the same saved state (the
    parts an unfinished message had, and the held octets)."""
    dec = FrameDecoder()
    assert dec.feed(frame(b"a", more=True)) == []
    saved = dec.save()
    for _ in range(2):
        assert dec.feed(frame(b"b", more=True) + frame(b"cd", more=True)[:2]) == []
        dec.restore(saved)
    assert dec.feed(frame(b"e")) == [[b"a", b"e"]] and dec.buffered == 0


def test_a_direct_read_asks_for_no_more_than_its_bound_whatever_the_header_claims():
    """A header may claim far more than the peer sends: the decoder never asks for more than
    DIRECT_READ_MAX at once, so a read's ``bytes`` costs at most that ahead of the octets."""
    dec = FrameDecoder()
    dec.feed(memoryview(b"\x02" + (1 << 40).to_bytes(8, "big") + b"abc"))
    assert dec.direct_read == DIRECT_READ_MAX and dec.buffered == 12


def test_a_body_too_large_for_a_direct_read_is_offered_whole_to_a_read_that_waits():
    """A rest of more than DIRECT_READ_MAX would come in pieces, joined in one more copy of the
    whole body: the decoder offers it whole (``wait_read``) to a reader that may block -- once
    a frame, so a peer trickling it costs at most one such read -- and a read that brings all
    of it becomes the message itself.  A header's claim is bounded by WAIT_READ_MAX."""
    body = numbered(DIRECT_READ_MAX + 3000, 7)
    head = wire(body)[:9]
    dec = FrameDecoder()
    assert dec.feed(memoryview(head)) == [] and dec.wait_read == len(body)
    assert dec.direct_read == DIRECT_READ_MAX
    whole = bytes(body)
    (got,) = dec.feed(whole)
    assert got is whole and dec.wait_read == 0
    dec.feed(memoryview(head + body[:10]))
    assert dec.wait_read == len(body) - 10
    dec.feed(body[10:5000])  # (a read that came short)
    assert dec.wait_read == 0 and dec.direct_read == len(body) - 5000
    assert dec.feed(body[5000:]) == [body]
    dec.feed(memoryview(head))
    dec.feed(body[:1])  # (one octet: even a piece too short to keep alone ends the offer)
    assert dec.wait_read == 0 and dec.direct_read == DIRECT_READ_MAX
    assert dec.feed(body[1:2]) == [] and dec.feed(body[2:]) == [body]
    small = numbered(DIRECT_READ_MAX, 8)
    dec.feed(memoryview(wire(small)[:9]))
    assert dec.wait_read == 0 and dec.direct_read == DIRECT_READ_MAX  # (one direct read)
    dec = FrameDecoder()
    dec.feed(memoryview(b"\x02" + (1 << 40).to_bytes(8, "big") + b"abc"))
    assert dec.wait_read == WAIT_READ_MAX
    dec = FrameDecoder()
    dec.feed(memoryview(b"\x06" + (DIRECT_READ_MAX + 10).to_bytes(8, "big")))  # a command
    assert dec.wait_read == 0


@FAST
@given(
    msgs=st.lists(
        st.one_of(
            parts(),
            st.builds(numbered, st.integers(DIRECT_MIN, DIRECT_MIN + 3000), st.integers(0, 65535)),
        ),
        max_size=6,
    ),
    data=st.data(),
)
def test_frame_decoder_read_as_it_asks_delivers_every_message(msgs, data):
    """A transport that reads as the decoder asks -- the rest of a large body as bytes of its
    own, a header alone after one, else into a reused buffer -- with the peer's octets
    arriving in any amounts, gets every message whole and in order."""
    stream = b"".join(wire(m) for m in msgs)
    buffer = bytearray(256 * 1024)
    dec = FrameDecoder()
    got: list = []
    pos = 0
    while pos < len(stream):
        ready = data.draw(st.integers(1, 300_000), label="octets arrived")
        direct = dec.direct_read
        if direct:
            read: bytes | memoryview = stream[pos : pos + min(direct, ready)]
        else:
            n = min(ready, len(buffer), dec.read_limit or len(buffer), len(stream) - pos)
            buffer[:n] = stream[pos : pos + n]
            read = memoryview(buffer)[:n]
        pos += len(read)
        got += dec.feed(read)
        buffer[:] = bytes(len(buffer))  # the next read overwrites the buffer
    assert got == msgs and dec.buffered == 0


@st.composite
def runs_of_equal_sizes(draw) -> list:
    """Messages in runs of one size, short or long frames (the decoder cuts runs of RUN_MIN or
    more at their stride), broken by other messages, bodies all different."""
    msgs: list = []
    for _ in range(draw(st.integers(1, 5))):
        size = draw(st.one_of(st.integers(0, 255), st.integers(256, 2000)))  # short, long
        count = draw(st.integers(RUN_MIN - 2, RUN_MIN * 5))
        msgs += [bytes((len(msgs) + i) % 256 for i in range(size)) for _ in range(count)]
        msgs += draw(st.lists(messages, max_size=2))
    return msgs


@FAST
@given(msgs=runs_of_equal_sizes(), data=st.data())
def test_frame_decoder_runs_of_equal_sizes_split_anywhere(msgs, data):
    stream = b"".join(wire(m) for m in msgs)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=10), label="cuts")
    batches = feed_in_chunks(FrameDecoder(), stream, cuts)
    assert [m for batch in batches for m in batch] == msgs
    check_all_or_nothing(msgs, 0, cuts, len(stream), batches)
    assert all(
        type(p) is bytes
        for batch in batches
        for m in batch
        for p in (m if type(m) is list else [m])
    )


def test_frame_decoder_cuts_a_run_of_equal_sizes_up_to_a_partial_frame():
    msgs = [bytes((i,)) * 100 for i in range(RUN_MIN * 3)]
    stream = b"".join(wire(m) for m in msgs)
    dec = FrameDecoder()
    assert dec.feed(stream[:-50]) == msgs[:-1]  # the last frame is not whole yet
    assert dec.buffered == 102 - 50
    assert dec.feed(stream[-50:]) == msgs[-1:]


@FAST
@given(msgs=message_lists, data=st.data())
def test_frame_decoder_round_trip_from_a_reused_receive_buffer(msgs, data):
    """As an engine feeds it: views of one reusable bytearray, overwritten after each call."""
    stream = b"".join(wire(m) for m in msgs)
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(stream)), max_size=30))))
    dec, got = FrameDecoder(), []
    rbuf = bytearray(len(stream) or 1)
    for lo, hi in itertools.pairwise([0, *cuts, len(stream)]):
        if hi > lo:
            rbuf[: hi - lo] = stream[lo:hi]
            got += dec.feed(memoryview(rbuf)[: hi - lo])
            rbuf[:] = bytes(len(rbuf))  # what the decoder kept must not be a view of it
    assert got == msgs
    assert all(type(p) is bytes for m in got for p in (m if type(m) is list else [m]))


def reads_of_many_frames(seed: int) -> list:
    """Messages filling several decoding windows: runs of short frames (some of one size),
    multipart messages, long frames, and one larger than a window, in a seeded order."""
    rng = random.Random(seed)
    msgs: list = []
    while len(msgs) < 4000:
        kind = rng.randrange(10)
        if kind < 5:
            msgs += [bytes([kind]) * 100] * rng.randrange(1, 60)  # runs of one size
        elif kind < 8:
            msgs.append([rng.randbytes(rng.randrange(0, 256)) for _ in range(rng.randrange(2, 5))])
        elif kind == 8:
            msgs.append(rng.randbytes(rng.randrange(256, 3000)))
        elif rng.randrange(8) == 0:
            msgs.append(rng.randbytes(WINDOW + rng.randrange(-20, 20)))
    return msgs


@pytest.mark.parametrize("seed", range(4))
def test_frame_decoder_reads_larger_than_its_window(seed):
    """A read is decoded in windows of at most WINDOW octets while short frames come: frames
    and multipart messages that straddle a window's end, long frames and one larger than a
    window all come out whole and in order, from one read or from reads cut anywhere."""
    msgs = reads_of_many_frames(seed)
    stream = b"".join(wire(m) for m in msgs)
    assert len(stream) > 3 * WINDOW
    assert FrameDecoder().feed(memoryview(bytearray(stream))) == msgs
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(stream)), 12))
    dec, got = FrameDecoder(), []
    for lo, hi in itertools.pairwise([0, *cuts, len(stream)]):
        got += dec.feed(memoryview(bytearray(stream[lo:hi])))
    assert got == msgs
    assert dec.buffered == 0


@FAST
@given(msgs=message_lists, zero_copy_min=st.integers(256, 70_000))
def test_encode_batch_is_the_wire_form_with_large_bodies_by_reference(msgs, zero_copy_min):
    bufs = encode_batch(msgs, zero_copy_min)
    assert b"".join(bufs) == b"".join(wire(m) for m in msgs)
    large = [p for m in msgs for p in (m if type(m) is list else [m]) if len(p) >= zero_copy_min]
    by_reference = [b for b in bufs if any(b is p for p in large)]
    assert len(by_reference) == len(large)
    # everything else is joined: no two small buffers in a row
    assert all(
        any(x is p for p in large) or any(y is p for p in large)
        for x, y in itertools.pairwise(bufs)
    )


@pytest.mark.parametrize(
    ("msgs", "joined"),
    [
        ([b"a" * 100] * 40, True),
        ([bytes([i]) * 300 for i in range(20)], True),  # long frames
        ([b"ab"] * 20 + [[b"c", b"d"]] * 20, False),  # messages of two parts: len() is 2
        ([[b"ab", b"cd"]] * 20, False),
        ([b"x" * 5] * 15 + [b"y" * 4] + [b"z" * 5], False),  # one size differs
        ([b"ab"] * 19 + [Frame(b"cd")], sys.version_info >= (3, 12)),  # a buffer from 3.12
        ([b"x" * 5] * (UNIFORM_MIN - 1), False),  # too few to be worth a look
        ([bytes(70_000)] * 20, False),  # bodies written by reference
    ],
    ids=["short", "long", "multipart-among", "multipart", "sizes-differ", "frame", "few", "large"],
)
def test_a_batch_of_messages_of_one_size_is_encoded_in_one_join(msgs, joined):
    """Single parts all of one size are joined by their common header into one buffer; any
    other batch takes the general path, to the same wire form."""
    bufs = encode_batch(msgs, 1 << 16, as_buffer=lambda part: part.buffer)
    assert b"".join(bufs) == b"".join(wire(m.bytes if type(m) is Frame else m) for m in msgs)
    assert (len(bufs) == 2 and len(bufs[1]) > len(msgs[0]) * (len(msgs) - 1)) == joined


def test_encode_batch_takes_parts_through_as_buffer():
    class Boxed:
        def __init__(self, data: bytes) -> None:
            self.data = data

        def __len__(self) -> int:
            return len(self.data)

    msgs = [[Boxed(b"ab"), Boxed(b"c" * 300)], Boxed(b"d")]
    bufs = encode_batch(msgs, 1 << 20, as_buffer=lambda part: part.data)
    assert b"".join(bufs) == wire([b"ab", b"c" * 300]) + wire(b"d")


def test_connection_encode_batch_sends_subscriptions_as_commands():
    sub, _ = connected(T.SUB, T.PUB)
    bufs = sub.encode_batch([b"\x01topic", b"\x00topic"], 1 << 16)
    one_by_one: list = []
    sub.encode(one_by_one, b"\x01topic")
    sub.encode(one_by_one, b"\x00topic")
    assert b"".join(bufs) == b"".join(one_by_one)
    assert bufs[0][:1] == bytes((0x04,))  # a COMMAND frame, not a message


def test_receive_says_whether_events_came_with_the_messages():
    a, b = connected(T.PUSH, T.PULL)
    a.send_message(b"one")
    assert b.receive(a.data_to_send()) == ([b"one"], False)
    a.send_message(b"two")
    a.send_ping(10)
    items, events = b.receive(a.data_to_send())
    assert items[0] == b"two" and isinstance(items[1], Ping)
    assert events is True


def check_all_or_nothing(msgs, start, cuts, total, batches):
    """After each chunk, exactly the messages whose last octet has arrived were delivered
    (``start``: where the first message begins in the stream; events are not counted)."""
    ends, pos = [], start
    for m in msgs:
        pos += len(wire(m))
        ends.append(pos)
    assert pos == total
    bounds = [c for c in sorted(set(cuts)) if 0 < c < total] + ([total] if total else [])
    delivered = 0
    for hi, batch in zip(bounds, batches, strict=True):
        delivered += sum(1 for x in batch if not isinstance(x, Ready))
        assert delivered == sum(1 for e in ends if e <= hi), f"after octet {hi}"


# -- connections: round trips ----------------------------------------------------------------------


@FAST
@given(msgs=message_lists, pair=st.sampled_from(TRAFFIC_PAIRS))
def test_connection_round_trip(msgs, pair):
    a, b = connected(*pair)
    for m in msgs:
        a.send_message(m)
    assert b.receive_data(a.data_to_send()) == msgs
    # ``encode`` into a caller's buffer list gives the same bytes as ``send_message``.
    out: list = []
    for m in msgs:
        a.encode(out, m)
    assert b"".join(out) == b"".join(wire(m) for m in msgs)
    assert a.data_to_send() == b""


@FAST
@given(msgs=message_lists, pair=st.sampled_from(TRAFFIC_PAIRS), data=st.data())
def test_connection_round_trip_split_anywhere(msgs, pair, data):
    """The whole stream (greeting, READY, messages) cut at arbitrary points still decodes, and
    every receive_data returns exactly the messages completed so far (all or nothing)."""
    a = Connection(pair[0])
    a.receive_data(greeting() + ready(pair[1].name.encode()))
    assert a.state is TRAFFIC
    handshake = a.data_to_send()
    for m in msgs:
        a.send_message(m)
    stream = handshake + a.data_to_send()
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=30), label="cuts")
    batches = feed_in_chunks(Connection(pair[1]), stream, cuts)
    got = [item for batch in batches for item in batch]
    assert isinstance(got[0], Ready) and got[0].socket_type is pair[0]
    assert got[1:] == msgs
    check_all_or_nothing(msgs, len(handshake), cuts, len(stream), batches)
    # Ready comes out with the chunk that completes the peer's READY, not before.
    bounds = [c for c in sorted(set(cuts)) if 0 < c < len(stream)] + [len(stream)]
    for hi, batch in zip(bounds, batches, strict=True):
        has_ready = any(isinstance(x, Ready) for x in batch)
        if hi < len(handshake):
            assert not batch
        else:
            assert has_ready
            break


def test_connection_byte_by_byte():
    a, b = Connection(T.DEALER, b"dealer-1"), Connection(T.ROUTER)
    a.receive_data(greeting() + ready(b"ROUTER"))
    msgs = [b"hello", [b"", b"x" * 256], [b"a", b"b", b""]]
    for m in msgs:
        a.send_message(m)
    stream = a.data_to_send()
    got = []
    for i in range(len(stream)):
        got += b.receive_data(stream[i : i + 1])
    assert got[0] == Ready(T.DEALER, b"dealer-1", got[0].metadata, 1)
    assert got[1:] == msgs


def test_greeting_and_ready_wire_form():
    """The greeting goes out in libzmq's steps (RFC 23, "Backwards Interoperability"): the
    signature, the major version once the peer's signature is in, the rest once its version
    is; libzmq pads the signature with the routing id's length + 1 (see greeting.py)."""
    conn = Connection(T.DEALER, b"id")
    whole = greeting(padding=(3).to_bytes(8, "big"))
    assert conn.data_to_send() == whole[:10]
    assert conn.receive_data(greeting()[:10]) == []
    assert conn.data_to_send() == whole[10:11]
    assert conn.receive_data(greeting()[10:11]) == []
    assert conn.data_to_send() == whole[11:]
    conn.receive_data(greeting()[11:])
    assert conn.state is HANDSHAKE
    assert conn.data_to_send() == ready(b"DEALER", Identity=b"id")


def test_as_server_flag_in_greeting():
    for as_server in (True, False):
        conn = Connection(T.PULL, as_server=as_server)
        conn.receive_data(greeting()[:11])
        assert conn.data_to_send()[32] == as_server


def test_send_before_traffic_is_refused():
    conn = Connection(T.PUSH)
    with pytest.raises(RuntimeError):
        conn.send_message(b"too early")


# -- subscriptions ---------------------------------------------------------------------------------


@pytest.mark.parametrize("sub_type", [T.SUB, T.XSUB])
def test_subscriber_sends_commands_to_a_3_1_peer(sub_type):
    conn, peer = facing(sub_type, b"XPUB")
    assert peer.minor_version == 1
    conn.send_message(b"\x01topic")
    conn.send_message(b"\x00topic")
    conn.send_message(b"\x01")  # subscribe to everything
    sent = conn.data_to_send()
    assert sent == (
        b"\x04\x0f\x09SUBSCRIBEtopic" + b"\x04\x0c\x06CANCELtopic" + b"\x04\x0a\x09SUBSCRIBE"
    )
    assert sent == command(b"SUBSCRIBE", b"topic") + command(b"CANCEL", b"topic") + command(
        b"SUBSCRIBE"
    )


def test_long_subscription_is_a_long_command():
    conn, _ = facing(T.SUB, b"PUB")
    topic = b"t" * 300
    conn.send_message(b"\x01" + topic)
    sent = conn.data_to_send()
    assert sent[:1] == b"\x06"
    assert sent == command(b"SUBSCRIBE", topic)


def test_xsub_sends_other_messages_as_messages():
    conn, _ = facing(T.XSUB, b"XPUB")
    conn.send_message(b"\x02not a subscription")
    conn.send_message([b"\x01multi", b"part"])
    conn.send_message(b"")
    assert conn.data_to_send() == (
        wire(b"\x02not a subscription") + wire([b"\x01multi", b"part"]) + wire(b"")
    )


@pytest.mark.parametrize("sub_type", [T.SUB, T.XSUB])
@pytest.mark.parametrize("pub_type", [T.PUB, T.XPUB])
def test_subscriptions_between_connections(sub_type, pub_type):
    sub, pub = connected(sub_type, pub_type)
    sub.send_message(b"\x01topic")
    sub.send_message(b"\x00topic")
    sub.send_message(b"\x01")
    sent = sub.data_to_send()
    assert sent[0] == 0x04  # commands on the wire
    assert pub.receive_data(sent) == [b"\x01topic", b"\x00topic", b"\x01"]


@pytest.mark.parametrize("sub_type", [T.SUB, T.XSUB])
def test_subscriber_sends_messages_to_a_3_0_peer(sub_type):
    conn, peer = facing(sub_type, b"XPUB", minor=0)
    assert peer.minor_version == 0
    conn.send_message(b"\x01topic")
    conn.send_message(b"\x00topic")
    assert conn.data_to_send() == b"\x00\x06\x01topic\x00\x06\x00topic"


def test_publisher_decodes_3_0_subscription_messages():
    conn, _ = facing(T.XPUB, b"SUB", minor=0)
    assert conn.receive_data(b"\x00\x06\x01topic\x00\x06\x00topic") == [b"\x01topic", b"\x00topic"]


def test_publisher_decodes_subscribe_and_cancel_commands():
    conn, _ = facing(T.XPUB, b"SUB")
    data = command(b"SUBSCRIBE", b"topic") + command(b"CANCEL", b"topic") + command(b"SUBSCRIBE")
    assert conn.receive_data(data) == [b"\x01topic", b"\x00topic", b"\x01"]


def test_newer_minor_version_counts_as_3_1():
    conn = Connection(T.SUB)
    out = conn.receive_data(greeting(minor=7) + ready(b"PUB"))
    assert out[0].minor_version == 7
    conn.data_to_send()
    conn.send_message(b"\x01t")
    assert conn.data_to_send() == command(b"SUBSCRIBE", b"t")


def test_newer_major_version_is_accepted():
    """RFC 37: a peer MUST accept higher protocol versions."""
    conn = Connection(T.SUB)
    out = conn.receive_data(greeting(major=4, minor=0) + ready(b"PUB"))
    assert isinstance(out[0], Ready)
    conn.data_to_send()
    conn.send_message(b"\x01t")
    assert conn.data_to_send() == command(b"SUBSCRIBE", b"t")


@pytest.mark.parametrize("padding", [bytes(8), b"\xff" * 8, b"garbage!", (1).to_bytes(8, "big")])
def test_greeting_padding_is_not_significant(padding):
    conn = Connection(T.PULL)
    out = conn.receive_data(greeting(padding=padding) + ready(b"PUSH"))
    assert isinstance(out[0], Ready)


# -- PING / PONG -----------------------------------------------------------------------------------


def test_ping_answered_with_pong_with_the_same_context():
    conn, _ = facing(T.PULL, b"PUSH")
    out = conn.receive_data(command(b"PING", b"\x12\x34ctx"))
    assert out == [Ping(ttl=0x1234, context=b"ctx")]
    assert conn.data_to_send() == b"\x04\x08\x04PONGctx"


@pytest.mark.parametrize("ctx", [b"", b"c", b"0123456789abcdef"])
def test_ping_context_up_to_16_octets(ctx):
    conn, _ = facing(T.PAIR, b"PAIR")
    assert conn.receive_data(command(b"PING", b"\x00\x00" + ctx)) == [Ping(0, ctx)]
    assert conn.data_to_send() == command(b"PONG", ctx)


def test_a_ping_context_over_16_octets_is_answered_with_its_first_16():
    """As libzmq answers it (RFC 37 allows 16 octets; a longer one is not refused)."""
    conn, _ = facing(T.PAIR, b"PAIR")
    ctx = bytes(range(17))
    assert conn.receive_data(command(b"PING", b"\x00\x00" + ctx)) == [Ping(0, ctx[:16])]
    assert conn.data_to_send() == command(b"PONG", ctx[:16])


@pytest.mark.parametrize("data", [b"", b"\x00"])
def test_malformed_ping_is_refused(data):
    conn, _ = facing(T.PAIR, b"PAIR")
    with pytest.raises(ProtocolError):
        conn.receive_data(command(b"PING", data))
    assert conn.state is ERROR_STATE


def test_send_ping_and_pong_between_connections():
    a, b = connected(T.DEALER, T.ROUTER)
    a.send_ping(150, b"hb-1")
    sent = a.data_to_send()
    assert sent == b"\x04\x0b\x04PING\x00\x96hb-1"
    assert b.receive_data(sent) == [Ping(150, b"hb-1")]
    assert a.receive_data(b.data_to_send()) == [Pong(b"hb-1")]


def test_ping_between_messages_keeps_their_order():
    conn, _ = facing(T.PULL, b"PUSH")
    data = wire(b"one") + command(b"PING", b"\x00\x01") + wire([b"two", b"2"])
    data += command(b"PONG", b"x")
    assert conn.receive_data(data) == [b"one", Ping(1, b""), [b"two", b"2"], Pong(b"x")]


def test_unknown_commands_in_traffic_are_ignored():
    conn, _ = facing(T.PULL, b"PUSH")
    assert conn.receive_data(command(b"JOIN", b"g") + wire(b"m") + command(b"X")) == [b"m"]


# -- socket types (RFC 37 table) -------------------------------------------------------------------

RFC37_PEERS = {
    "REQ": {"REP", "ROUTER"},
    "REP": {"REQ", "DEALER"},
    "DEALER": {"REP", "DEALER", "ROUTER"},
    "ROUTER": {"REQ", "DEALER", "ROUTER"},
    "PUB": {"SUB", "XSUB"},
    "XPUB": {"SUB", "XSUB"},
    "SUB": {"PUB", "XPUB"},
    "XSUB": {"PUB", "XPUB"},
    "PUSH": {"PULL"},
    "PULL": {"PUSH"},
    "PAIR": {"PAIR"},
}
ALL_PAIRS = [(a, b) for a in RFC37_PEERS for b in RFC37_PEERS]
VALID = [p for p in ALL_PAIRS if p[1] in RFC37_PEERS[p[0]]]
INVALID = [p for p in ALL_PAIRS if p[1] not in RFC37_PEERS[p[0]]]


@pytest.mark.parametrize(("ours", "theirs"), VALID)
def test_valid_socket_type_pair_completes_the_handshake(ours, theirs):
    a, b = Connection(T[ours]), Connection(T[theirs])
    got_a, got_b = exchange(a, b)
    assert got_a == [a.peer] and got_b == [b.peer]
    assert a.peer.socket_type is T[theirs] and b.peer.socket_type is T[ours]
    assert a.peer.metadata["socket-type"] == theirs.encode()


@pytest.mark.parametrize(("ours", "theirs"), INVALID)
def test_invalid_socket_type_pair_is_refused(ours, theirs):
    a, b = Connection(T[ours]), Connection(T[theirs])
    greet(a, b)
    to_a, to_b = b.data_to_send(), a.data_to_send()  # READYs
    with pytest.raises(HandshakeError, match="cannot talk"):
        a.receive_data(to_a)
    assert a.state is ERROR_STATE
    # The table is symmetric: the peer refuses too.
    with pytest.raises(HandshakeError):
        b.receive_data(to_b)
    assert b.state is ERROR_STATE
    # The refusing side says why (RFC 37 ERROR command) before the transport closes.
    assert a.data_to_send() == command(b"ERROR", b"\x13Invalid socket type")


@pytest.mark.parametrize("peer_type", [b"BOGUS", b"", b"push", b"\xff\xfe", b"STREAM"])
def test_unknown_or_unsupported_peer_socket_type_is_refused(peer_type):
    conn = Connection(T.PULL)
    with pytest.raises(HandshakeError):
        conn.receive_data(greeting() + ready(peer_type))


def test_missing_socket_type_is_refused():
    conn = Connection(T.PULL)
    with pytest.raises(HandshakeError):
        conn.receive_data(greeting() + command(b"READY", metadata({b"Identity": b"x"})))


def test_metadata_names_are_case_insensitive():
    conn = Connection(T.PULL)
    out = conn.receive_data(
        greeting() + command(b"READY", metadata({b"SOCKET-TYPE": b"PUSH", b"X-Extra": b"v"}))
    )
    assert out[0].socket_type is T.PUSH
    assert out[0].metadata["x-extra"] == b"v"


@pytest.mark.parametrize(
    ("ours", "theirs"), [p for p in VALID if p[0] in {"REQ", "DEALER", "ROUTER"}]
)
def test_identity_reaches_the_peer(ours, theirs):
    a, b = Connection(T[ours], b"my-id-\x00\xff"), Connection(T[theirs], b"other")
    got_a, got_b = exchange(a, b)
    assert got_b[0].routing_id == b"my-id-\x00\xff"
    expected = b"other" if theirs in {"REQ", "DEALER", "ROUTER"} else b""
    assert got_a[0].routing_id == expected


@pytest.mark.parametrize("ours", ["PUSH", "PUB", "SUB", "REP", "PAIR"])
def test_other_types_do_not_announce_an_identity(ours):
    conn = Connection(T[ours], b"ignored")
    conn.receive_data(greeting())
    assert b"Identity" not in conn.data_to_send()


def test_empty_identity_is_sent_empty():
    a, b = Connection(T.DEALER), Connection(T.ROUTER)
    _, got_b = exchange(a, b)
    assert got_b[0].routing_id == b""
    assert got_b[0].metadata["identity"] == b""


# -- refusals --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(bytes(64), id="zeros"),  # a ZMTP 1.0 frame of length 0
        pytest.param(b"\xff" + bytes(8) + b"\x00" + bytes(54), id="no-0x7f"),  # the same, long
        pytest.param(b"\xff" + bytes(8) + b"\x03" + bytes(54), id="not-0x7f"),
    ],
)
def test_foreign_greeting_is_refused(data):
    """(ZMTP 1.0 and 2.0 peers are understood: see test_zmtp_legacy.py.)"""
    conn = Connection(T.PULL)
    with pytest.raises(ProtocolError):
        conn.receive_data(data)
    assert conn.state is ERROR_STATE
    with pytest.raises(ProtocolError):
        conn.receive_data(greeting())  # a failed connection stays failed


def test_greeting_byte_by_byte():
    conn = Connection(T.PULL)
    data = greeting() + ready(b"PUSH")
    out = []
    for i in range(len(data)):
        out += conn.receive_data(data[i : i + 1])
        assert conn.state is (GREETING if i < 63 else (HANDSHAKE if i < len(data) - 1 else TRAFFIC))
    assert isinstance(out[0], Ready)


@pytest.mark.parametrize("mechanism", [b"PLAIN", b"CURVE", b"GSSAPI", b"null", b"NU LL", b""])
def test_wrong_or_malformed_mechanism_is_refused(mechanism):
    conn = Connection(T.PULL)
    with pytest.raises(HandshakeError):
        conn.receive_data(greeting(mechanism=mechanism))
    assert conn.state is ERROR_STATE


def test_mechanism_checked_only_once_the_greeting_is_whole():
    conn = Connection(T.PULL)
    assert conn.receive_data(greeting(mechanism=b"PLAIN")[:63]) == []
    with pytest.raises(HandshakeError, match="PLAIN"):
        conn.receive_data(b"\x00")


@pytest.mark.parametrize("bit", [0x08, 0x10, 0x20, 0x40, 0x80])
def test_reserved_flag_bits_are_refused(bit):
    conn, _ = facing(T.PULL, b"PUSH")
    with pytest.raises(ProtocolError, match="reserved"):
        conn.receive_data(bytes((bit, 3)))  # the header alone is enough
    assert conn.state is ERROR_STATE
    with pytest.raises(ProtocolError, match="reserved"):
        FrameDecoder().feed(bytes((bit | 0x01, 0)))


def test_reserved_flag_bits_refused_during_the_handshake():
    conn = Connection(T.PULL)
    with pytest.raises(ProtocolError):
        conn.receive_data(greeting() + b"\x0c\x05")


@pytest.mark.parametrize("flags", [0x05, 0x07])
def test_more_flag_on_a_command_is_refused(flags):
    conn, _ = facing(T.PULL, b"PUSH")
    body = b"\x04PING\x00\x00"
    if flags & 0x02:
        header = bytes((flags,)) + len(body).to_bytes(8, "big")
    else:
        header = bytes((flags, len(body)))
    with pytest.raises(ProtocolError, match="MORE"):
        conn.receive_data(header + body)
    assert conn.state is ERROR_STATE


@pytest.mark.parametrize("body", [b"", b"\x00", b"\x05PIN", b"\x04P1NG", b"\x04PI G"])
def test_malformed_command_is_refused(body):
    conn, _ = facing(T.PULL, b"PUSH")
    with pytest.raises(ProtocolError):
        conn.receive_data(bytes((0x04, len(body))) + body)


def test_frame_over_max_msg_size_refused_from_the_header():
    conn, _ = facing(T.PULL, b"PUSH", max_msg_size=1000)
    conn.receive_data(frame(b"x" * 1000))  # exactly the limit is fine
    header = b"\x02" + (1001).to_bytes(8, "big")
    assert conn.receive_data(header[:8]) == []  # not yet a whole header
    with pytest.raises(MessageTooLarge):
        conn.receive_data(header[8:])  # no body octet has arrived
    assert conn.state is ERROR_STATE


def test_a_fault_in_the_read_that_completes_the_handshake_comes_after_it():
    """READY, messages and an oversize frame in one read: the handshake completes and the
    messages before the fault are handed over with the error, as libzmq, which handles frame
    by frame, delivers them."""
    conn = Connection(T.PULL, max_msg_size=1000)
    oversize = b"\x02" + (1001).to_bytes(8, "big")
    with pytest.raises(MessageTooLarge) as info:
        conn.receive_data(greeting() + ready(b"PUSH") + frame(b"first") + oversize)
    ready_event, *messages = info.value.messages
    assert isinstance(ready_event, Ready) and ready_event.socket_type is T.PUSH
    assert messages == [b"first"]
    assert conn.state is ERROR_STATE


def test_a_fault_before_the_handshake_completes_hands_over_nothing():
    conn = Connection(T.PULL, max_msg_size=1000)
    with pytest.raises(MessageTooLarge) as info:  # a frame over MAXMSGSIZE before READY
        conn.receive_data(greeting() + b"\x06" + (1001).to_bytes(8, "big"))
    assert info.value.messages == []
    assert conn.state is ERROR_STATE


def test_short_frame_over_max_msg_size_refused_from_the_header():
    dec = FrameDecoder(max_msg_size=10)
    assert dec.feed(b"\x00\x0a" + bytes(10)) == [bytes(10)]
    with pytest.raises(MessageTooLarge):
        dec.feed(b"\x01\x0b")


def test_max_msg_size_limits_each_frame():
    dec = FrameDecoder(max_msg_size=100)
    assert dec.feed(wire([b"a" * 100, b"b" * 100])) == [[b"a" * 100, b"b" * 100]]


def test_max_msg_size_zero_allows_only_empty_frames():
    dec = FrameDecoder(max_msg_size=0)
    assert dec.feed(b"\x00\x00") == [b""]
    with pytest.raises(MessageTooLarge):
        dec.feed(b"\x00\x01")


def test_huge_declared_size_refused_without_a_limit():
    """A size over 2^63-1 is not a valid frame (RFC 37); refused from the header."""
    with pytest.raises(ProtocolError):
        FrameDecoder().feed(b"\x02" + (1 << 63).to_bytes(8, "big"))
    with pytest.raises(ProtocolError):
        FrameDecoder().feed(b"\x02" + b"\xff" * 8)


def test_a_frame_no_process_could_hold_is_refused_from_its_header_without_a_limit():
    """Issue 11 point 2: with MAXMSGSIZE unset, a header claiming more than MAX_FRAME_SIZE
    (2^62 here) is refused as soon as its size is in, and the messages before it are kept."""
    assert min(1 << 48, sys.maxsize) == MAX_FRAME_SIZE
    header = b"\x02" + (1 << 62).to_bytes(8, "big")
    conn, _ = facing(T.PULL, b"PUSH")
    assert conn.receive_data(wire(b"first") + header[:8]) == [b"first"]
    with pytest.raises(MessageTooLarge, match="more than any process can hold") as info:
        conn.receive_data(header[8:] + b"body")
    assert info.value.messages == []
    assert conn.state is ERROR_STATE and conn.decoder.buffered == 0
    dec = FrameDecoder()
    assert dec.feed(b"\x02" + MAX_FRAME_SIZE.to_bytes(8, "big")) == []  # the ceiling itself waits
    with pytest.raises(MessageTooLarge):
        FrameDecoder().feed(b"\x06" + (MAX_FRAME_SIZE + 1).to_bytes(8, "big"))  # commands too


def test_closing_drops_a_partial_frame_at_once():
    """A large frame's partial body is released when the connection is over, not when the last
    reference to it goes; input after that is refused."""
    conn, _ = facing(T.PULL, b"PUSH")
    conn.receive_data(b"\x03" + (1 << 30).to_bytes(8, "big") + bytes(1 << 20))
    assert conn.decoder.buffered == 9 + (1 << 20)
    conn.close()
    assert conn.decoder.buffered == 0 and conn.state is ERROR_STATE
    with pytest.raises(ProtocolError):
        conn.receive_data(bytes(10))


def test_a_protocol_error_drops_the_partial_message():
    conn, _ = facing(T.PULL, b"PUSH")
    assert conn.receive_data(wire(b"a" * 300)[:-1]) == []
    with pytest.raises(ProtocolError):
        conn.receive_data(b"a" + b"\xf0\x00")
    assert conn.decoder.buffered == 0


def test_huge_declared_size_within_limit_waits_without_buffering_it():
    dec = FrameDecoder()
    assert dec.feed(b"\x02" + (1 << 40).to_bytes(8, "big") + b"abc") == []
    assert dec.buffered == 12


def test_message_before_ready_is_refused():
    conn = Connection(T.PULL)
    with pytest.raises(HandshakeError, match="before the handshake"):
        conn.receive_data(greeting() + wire(b"sneaky"))
    assert conn.state is ERROR_STATE


@pytest.mark.parametrize(
    "early",
    [
        pytest.param(frame(b"before-handshake", more=True), id="more"),
        pytest.param(frame(b"x" * 300, more=True), id="long-more"),
        pytest.param(frame(b"before-handshake"), id="final"),
    ],
)
def test_a_data_frame_before_ready_is_refused_however_the_input_is_split(early):
    """Issue 11 point 6: greeting + frame(MORE) + READY + frame used to deliver
    ``[b"before-handshake", b"after"]``, a message begun before the handshake and completed
    after it.  Any data frame before READY is refused from its header, whatever the split, and
    nothing is ever delivered."""
    data = greeting() + early + ready(b"PUSH") + wire(b"after")
    seen_by = 64 + 2  # the decoder looks at a frame once two of its octets are in
    for cut in range(1, len(data)):
        conn = Connection(T.PULL)
        delivered = []
        with pytest.raises(UnexpectedFrame, match="before the handshake") as info:
            delivered += conn.receive_data(data[:cut])
            assert cut < seen_by, "the early frame's header was accepted"
            delivered += conn.receive_data(data[cut:])
        assert delivered == [] and info.value.messages == []
        assert conn.state is ERROR_STATE


def test_other_command_during_null_handshake_is_refused():
    """libzmq reports it as ZMTP_UNEXPECTED_COMMAND, as it does a data frame there."""
    conn = Connection(T.PULL)
    with pytest.raises(UnexpectedFrame):
        conn.receive_data(greeting() + command(b"PING", b"\x00\x00"))


def test_error_command_during_the_handshake():
    conn = Connection(T.PULL)
    with pytest.raises(PeerError, match="go away"):
        conn.receive_data(greeting() + command(b"ERROR", b"\x07go away"))
    assert conn.state is ERROR_STATE


def test_error_command_from_a_refusing_connection():
    """A refusing Connection has already sent its READY (NULL sends it at once), so a peer that
    accepted the pair is in TRAFFIC when the ERROR arrives: the connection fails there."""
    refuser = Connection(T.PUSH)
    with pytest.raises(HandshakeError):
        refuser.receive_data(greeting() + ready(b"PUSH"))  # pretends to be a PUSH
    sent = refuser.data_to_send()
    assert sent.endswith(command(b"ERROR", b"\x13Invalid socket type"))
    victim = Connection(T.PULL)
    with pytest.raises(ProtocolError):
        victim.receive_data(sent)
    assert victim.state is ERROR_STATE


def test_error_after_ready_is_a_peer_error_with_the_reason():
    conn = Connection(T.PULL)
    with pytest.raises(PeerError, match="Invalid socket type"):
        conn.receive_data(
            greeting() + ready(b"PUSH") + command(b"ERROR", b"\x13Invalid socket type")
        )


def test_error_command_in_traffic_fails_the_connection():
    conn, _ = facing(T.PULL, b"PUSH")
    with pytest.raises(ProtocolError):
        conn.receive_data(command(b"ERROR", b"\x03bye"))
    assert conn.state is ERROR_STATE


def test_empty_data_before_the_greeting_is_harmless():
    conn = Connection(T.PULL)
    assert conn.receive_data(b"") == []
    assert conn.state is GREETING


@pytest.mark.parametrize(
    "fatal",
    [
        pytest.param(b"\x02" + (101).to_bytes(8, "big"), id="too-large"),
        pytest.param(command(b"ERROR", b"\x03bye"), id="error-command"),
    ],
)
def test_whole_messages_before_a_fatal_frame_are_not_lost(fatal):
    """However the codec reports it (raising on the next call, or carrying the messages on the
    exception), a message whose last frame arrived before the fatal one must reach the app."""
    conn, _ = facing(T.PULL, b"PUSH", max_msg_size=100)
    delivered: list = []
    with pytest.raises(ProtocolError) as info:
        delivered += conn.receive_data(wire(b"good") + wire([b"also", b"good"]) + fatal)
        delivered += conn.receive_data(b"")
    delivered += getattr(info.value, "messages", [])
    assert delivered == [b"good", [b"also", b"good"]]


def test_whole_messages_before_a_fatal_frame_in_an_earlier_chunk_arrive():
    conn, _ = facing(T.PULL, b"PUSH", max_msg_size=100)
    assert conn.receive_data(wire(b"good")) == [b"good"]
    with pytest.raises(MessageTooLarge):
        conn.receive_data(b"\x02" + (101).to_bytes(8, "big"))


def test_empty_data_is_harmless_later():
    conn = Connection(T.PULL)
    assert conn.receive_data(b"\xff") == []
    assert conn.receive_data(b"") == []
    conn.receive_data(greeting()[1:])
    assert conn.receive_data(b"") == []
    conn.receive_data(ready(b"PUSH"))
    assert conn.state is TRAFFIC
    assert conn.receive_data(b"") == []


# -- properties: hostile input ---------------------------------------------------------------------

_G = greeting()
_PREFIXES = [b"", _G[:1], _G[:10], _G[:11], _G, _G + ready(b"PUSH")[:5], _G + ready(b"PUSH")]
_ITEM_TYPES = (bytes, list, Ready, Ping, Pong)


def feed_hostile(conn: Connection, chunks: list[bytes]) -> None:
    for chunk in chunks:
        try:
            out = conn.receive_data(chunk)
        except ProtocolError:
            assert conn.state is ERROR_STATE
            with pytest.raises(ProtocolError):
                conn.receive_data(b"\x00\x00")
            return
        assert all(isinstance(x, _ITEM_TYPES) for x in out)
        assert conn.state in (GREETING, HANDSHAKE, IDENTITY, TRAFFIC)
        conn.data_to_send()


chunks = st.lists(st.binary(min_size=1, max_size=120), max_size=8)


@st.composite
def frame_shaped(draw) -> bytes:
    """Frames that get past the length check: random flags (mostly valid), random bodies, and
    commands with real or random names."""
    flags = draw(st.sampled_from([0x00, 0x01, 0x02, 0x03, 0x04, 0x06, 0x05, 0x08, 0x84]))
    if flags & 0x04 and draw(st.booleans()):
        name = draw(
            st.sampled_from(
                [b"READY", b"ERROR", b"PING", b"PONG", b"SUBSCRIBE", b"CANCEL", b"JOIN"]
            )
        )
        body = bytes((len(name),)) + name + draw(st.binary(max_size=40))
    else:
        body = draw(st.binary(max_size=40))
    size = draw(st.one_of(st.just(len(body)), st.integers(0, 300)))
    if flags & 0x02:
        return bytes((flags,)) + size.to_bytes(8, "big") + body
    return bytes((flags, size % 256)) + body


@FAST
@given(prefix=st.sampled_from(_PREFIXES), tail=chunks)
def test_random_bytes_to_a_fresh_connection_raise_only_protocol_error(prefix, tail):
    feed_hostile(Connection(T.PULL), [c for c in [prefix, *tail] if c])


@FAST
@given(prefix=st.sampled_from(_PREFIXES[4:]), frames=st.lists(frame_shaped(), max_size=8))
def test_random_frames_during_the_handshake_raise_only_protocol_error(prefix, frames):
    feed_hostile(Connection(T.PULL), [prefix, *[f for f in frames if f]])


@FAST
@given(tail=chunks, frames=st.lists(frame_shaped(), max_size=8), sub=st.booleans())
def test_random_input_in_traffic_raises_only_protocol_error(tail, frames, sub):
    conn, _ = facing(T.XPUB if sub else T.PULL, b"SUB" if sub else b"PUSH", max_msg_size=200)
    feed_hostile(conn, [f for f in frames if f] + tail)
