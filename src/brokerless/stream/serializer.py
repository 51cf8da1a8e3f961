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


#: The msgpack extension type of a Python tuple among a tuple's values: a bolt gets a tuple
#: where one was emitted (a dict key, say) whether the tuple came from its own worker, as the
#: objects themselves, or from another one -- Storm's Kryo keeps types the same way.
TUPLE_EXT = 1


def _value(obj: Any) -> Any:
    """What msgpack packs for a value it does not take as it is (``strict_types``)."""
    if isinstance(obj, tuple):
        return msgpack.ExtType(TUPLE_EXT, _pack_value(list(obj)))
    base: type[Any]
    for base in (int, str, float, bytes, list, dict):  # subclasses (IntEnum, OrderedDict...)
        if isinstance(obj, base):
            return base(obj)
    raise TypeError(f"can not serialize {type(obj).__name__!r} object")


def _pack_value(obj: Any) -> bytes:
    packed: bytes = msgpack.packb(obj, use_bin_type=True, strict_types=True, default=_value)
    return packed


def new_value_packer() -> Callable[[Sequence[Any]], bytes]:
    """A msgpack packer of a tuple's values (lists and tuples among them kept apart; the values
    themselves, a tuple or a list, are an array), for one thread at a time (see
    :func:`new_packer`)."""
    pack = msgpack.Packer(use_bin_type=True, strict_types=True, default=_value).pack

    def pack_values(values: Sequence[Any]) -> bytes:
        packed: bytes = pack(list(values))  # (a tuple here would take the extension's way)
        return packed

    return pack_values


_value_packers = threading.local()


def _ext(code: int, data: bytes) -> Any:
    if code == TUPLE_EXT:
        return tuple(_unpack_value(data))
    return msgpack.ExtType(code, data)


def _unpack_value(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=_ext)


class MsgpackSerializer:
    """The default: msgpack, with str and bytes kept apart (``use_bin_type``/``raw=False``)
    and tuples kept tuples (:data:`TUPLE_EXT`)."""

    def dumps(self, values: Sequence[Any]) -> bytes:
        try:
            pack: Callable[[Sequence[Any]], bytes] = _value_packers.pack
        except AttributeError:
            pack = _value_packers.pack = new_value_packer()
        return pack(values)

    def loads(self, data: bytes) -> Sequence[Any]:
        values: Sequence[Any] = msgpack.unpackb(
            data, raw=False, strict_map_key=False, ext_hook=_ext
        )
        return values


def dumps_through(
    serializer: Serializer, pack: Callable[[Any], bytes]
) -> Callable[[Sequence[Any]], bytes]:
    """``serializer.dumps`` for a hot path: for the default serializer, the caller's own
    ``pack`` (:func:`new_value_packer`) -- the same bytes without a method call and a
    thread-local lookup per tuple."""
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
