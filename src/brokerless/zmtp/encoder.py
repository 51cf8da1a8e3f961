"""ZMTP 3 and 2.0 framing, encoded: messages and commands into frames (decoded by :mod:`.frames`).

Theory of operation
-------------------
The encoder turns a batch of messages into few buffers for one ``sendmsg``: runs of small frames
are joined into one buffer (one copy, few iovecs), large bodies are passed by reference.  A
batch of single parts all of one size -- every frame with the same header -- is one ``join`` by
that header.  Headers of short frames are built once, in tables the hot path only indexes, and
those of long final frames as their sizes are met; the common message (one short part, a REQ's
envelope and request) is encoded inline, the rest the general way (``encode_message``).  CPython
pays per bytecode, so the fast paths are written to run as few as possible per message.
"""

from __future__ import annotations

from typing import Any

from .frames import COMMAND, LONG, MORE

# Headers of short frames, built once: the hot path only indexes these tables.
_LAST = [bytes((0, n)) for n in range(256)]
_NOT_LAST = [bytes((MORE, n)) for n in range(256)]
#: Headers of long final frames by size, made as sizes are met (at most _LONG_CACHED of them).
_LONG_LAST: dict[int, bytes] = {}
_LONG_CACHED = 4096
#: A batch of at least this many messages is first tried as messages of one size
#: (``_encode_uniform``).
UNIFORM_MIN = 16


def _long_last(size: int) -> bytes:
    """The header of a long final data frame of ``size`` octets, kept for the next one."""
    if len(_LONG_LAST) >= _LONG_CACHED:
        _LONG_LAST.clear()
    head = _LONG_LAST[size] = frame_header(size)
    return head


def frame_header(size: int, more: bool = False, command: bool = False) -> bytes:
    flags = (MORE if more else 0) | (COMMAND if command else 0)
    if size < 256:
        return bytes((flags, size))
    return bytes((flags | LONG,)) + size.to_bytes(8, "big")


def encode_command(body: bytes) -> bytes:
    return frame_header(len(body), command=True) + body


def encode_batch(
    msgs: list[Any], zero_copy_min: int, as_buffer: Any = None, encode: Any = None
) -> list[Any]:
    """The wire form of the messages ``msgs`` as a list of buffers.

    Bodies of ``zero_copy_min`` (at least 256) octets or more stay as they are (written by
    reference); runs of everything else are joined.  ``as_buffer`` turns a part that is not
    itself a buffer (e.g. a ``Frame`` on Python < 3.12) into one.  ``encode(out, msg)``, when
    given, encodes every message instead of :func:`encode_message` (for connections that turn
    some messages into commands).
    """
    if encode is None and len(msgs) >= UNIFORM_MIN:
        uniform = _encode_uniform(msgs, zero_copy_min)
        if uniform is not None:
            return uniform
    out: list[Any] = []
    run: list[Any] = []
    append = run.append
    short = _LAST
    fast = encode is None
    if encode is None:
        encode = encode_message
    long_heads = _LONG_LAST
    for msg in msgs:
        if fast and msg.__class__ is bytes:
            n = len(msg)
            if n < 256:
                append(short[n])
                append(msg)
                continue
            if n < zero_copy_min:  # a long frame, copied into the run
                head = long_heads.get(n)
                if head is None:
                    head = _long_last(n)
                append(head)
                append(msg)
                continue
        if fast and msg.__class__ is list:
            # A message of parts copied into the run (a REQ's envelope and request): straight
            # in; at the first part that is not bytes below ``zero_copy_min``, undone and
            # encoded the general way.
            mark = len(run)
            last = len(msg) - 1
            for i, part in enumerate(msg):
                n = len(part)
                if n >= zero_copy_min or part.__class__ is not bytes:
                    del run[mark:]
                    break
                if n < 256:
                    append(_NOT_LAST[n] if i < last else _LAST[n])
                elif i < last:
                    append(frame_header(n, more=True))
                else:
                    append(long_heads.get(n) or _long_last(n))
                append(part)
            else:
                continue
        frames: list[Any] = []
        encode(frames, msg)
        for buf in frames:
            if buf.__class__ is not bytes and as_buffer is not None:
                buf = as_buffer(buf)
            if len(buf) >= zero_copy_min:
                if run:
                    out.append(b"".join(run))
                    run.clear()
                out.append(buf)
            else:
                append(buf)
    if run:
        out.append(b"".join(run))
    return out


def _encode_uniform(msgs: list[Any], zero_copy_min: int) -> list[Any] | None:
    """The wire form of ``msgs`` when they are single parts all of one size below
    ``zero_copy_min``: every frame has the same header, so one ``join`` by it (in C) encodes
    them all; else None.  A stream of equal messages (a benchmark's, a sensor's, a PUB's to
    each of its subscribers) costs ~40 ns a message (the size check and the join, both in C)
    instead of the loop's ~85 (BENCHMARKS.md, *Fan-out*)."""
    first = msgs[0]
    n = len(first)
    if first.__class__ is not bytes or n >= zero_copy_min or len(msgs[-1]) != n:
        return None
    sizes = set(map(len, msgs))  # a multipart message's len() counts parts: join refuses it
    if len(sizes) != 1:
        return None
    head = _LAST[n] if n < 256 else (_LONG_LAST.get(n) or _long_last(n))
    try:
        return [head, head.join(msgs)]
    except TypeError:  # a multipart message (a list), or a part that is not a buffer
        return None


def encode_message(out: list[Any], msg: Any) -> None:
    """Append the frames of ``msg`` (a part, or a list of parts) to the buffer list ``out``."""
    if msg.__class__ is list:
        last = len(msg) - 1
        for i, part in enumerate(msg):
            n = len(part)
            if n < 256:
                out.append(_NOT_LAST[n] if i < last else _LAST[n])
            else:
                out.append(frame_header(n, more=i < last))
            out.append(part)
        return
    n = len(msg)
    out.append(_LAST[n] if n < 256 else frame_header(n))
    out.append(msg)


__all__ = ["UNIFORM_MIN", "encode_batch", "encode_command", "encode_message", "frame_header"]
