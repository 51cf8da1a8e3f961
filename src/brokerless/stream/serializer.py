"""Tuple serialization: msgpack by default (fast, cross-language), pluggable.

A serializer turns the *values* of a tuple into bytes and back; the tuple's header (source
task, stream, anchors) is framed by the stream layer itself.  A value the serializer cannot
encode fails only the emit that carried it, with a :class:`SerializationError` naming the
component, stream and field.
"""

from __future__ import annotations

import pickle
import threading
import zlib
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import msgpack


class SerializationError(ValueError):
    """A tuple value could not be serialized; the emit that carried it did not happen."""


@runtime_checkable
class Serializer(Protocol):
    """Encodes the values of one tuple.  Must be thread-safe and picklable."""

    def dumps(self, values: Sequence[Any]) -> bytes: ...

    def loads(self, data: bytes) -> Sequence[Any]: ...


_packers = threading.local()


def new_packer() -> Callable[[Any], bytes]:
    """A msgpack ``Packer.pack`` of the caller's own, for one thread at a time (a Packer is not
    thread-safe, and reusing one is several times faster than ``msgpack.packb``, which makes a
    new one per call)."""
    pack: Callable[[Any], bytes] = msgpack.Packer(use_bin_type=True).pack
    return pack


def packer() -> Callable[[Any], bytes]:
    """This thread's msgpack ``Packer.pack`` (see :func:`new_packer`)."""
    try:
        pack: Callable[[Any], bytes] = _packers.pack
    except AttributeError:
        pack = _packers.pack = new_packer()
    return pack


class MsgpackSerializer:
    """The default: msgpack, with str and bytes kept apart (``use_bin_type``/``raw=False``)."""

    def dumps(self, values: Sequence[Any]) -> bytes:
        return packer()(values)

    def loads(self, data: bytes) -> Sequence[Any]:
        values: Sequence[Any] = msgpack.unpackb(data, raw=False, strict_map_key=False)
        return values


def dumps_through(
    serializer: Serializer, pack: Callable[[Any], bytes]
) -> Callable[[Sequence[Any]], bytes]:
    """``serializer.dumps`` for a hot path: for the default serializer, the caller's own
    ``pack`` (:func:`new_packer`) -- the same bytes without a method call and a thread-local
    lookup per tuple."""
    return pack if type(serializer) is MsgpackSerializer else serializer.dumps


class PickleSerializer:
    """Any picklable Python value; Python-only, and only between processes that trust each
    other (unpickling runs code)."""

    def dumps(self, values: Sequence[Any]) -> bytes:
        return pickle.dumps(values, protocol=pickle.HIGHEST_PROTOCOL)

    def loads(self, data: bytes) -> Sequence[Any]:
        values: Sequence[Any] = pickle.loads(data)
        return values


def dumps_values(
    serializer: Serializer,
    values: Sequence[Any],
    fields: Sequence[str],
    component: str,
    stream: str,
) -> bytes:
    """Serialize ``values``; on failure raise SerializationError naming the offending field."""
    try:
        return serializer.dumps(values)
    except Exception as exc:
        for name, value in zip(fields, values, strict=False):
            try:
                serializer.dumps([value])
            except Exception as field_exc:
                raise SerializationError(
                    f"{component!r} emitted a value it cannot serialize in field {name!r} of "
                    f"stream {stream!r}: {type(value).__name__} ({field_exc}); emit values "
                    f"the topology's serializer supports"
                ) from field_exc
        raise SerializationError(
            f"{component!r} emitted values on stream {stream!r} that cannot be serialized: {exc}"
        ) from exc


def stable_hash(key: Sequence[Any], seed: int = 0) -> int:
    """A hash of ``key`` that is the same in every process (unlike the salted ``hash()``):
    CRC-32 of its msgpack encoding."""
    return zlib.crc32(packer()(key), seed)
