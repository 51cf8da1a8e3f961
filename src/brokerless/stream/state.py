"""The state a checkpoint keeps for one task, and its bytes in storage.

A :class:`~brokerless.stream.component.StatefulBolt` task keeps its state in a
:class:`KeyValueState`; a :class:`~brokerless.stream.component.ReplayableSpout` task's state is
its position.  :func:`encode_snapshot` turns either into one file of a checkpoint and
:func:`decode_snapshot` reads it back, refusing a file that is damaged or belongs to another
task.

A snapshot file is ``MAGIC | crc32 (4 bytes, big-endian) | body``, the body a msgpack array
``[version, component, task, checkpoint, payload]``; the CRC covers the body.  ``payload`` is
the topology's serializer's encoding of ``[position]`` (a spout) or of ``[[keys], [values]]``
(a bolt's state: two lists, which msgpack packs ten times faster than a list of pairs), with
a third item, its windows, for a stateful windowed bolt; so state holds what tuples can hold.
Through msgpack a tuple comes back as a list; a list key comes back as a tuple (keys must be
hashable), so tuple keys round-trip.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

import msgpack

from .serializer import Serializer

__all__ = ["KeyValueState", "SnapshotError", "decode_snapshot", "encode_snapshot"]

MAGIC = b"BLSS"
_VERSION = 1
_CRC = struct.Struct(">I")


class KeyValueState(dict[Any, Any]):
    """A stateful bolt task's state: a dict, with Storm's ``KeyValueState`` names too.  Keys
    and values must be what the topology's serializer encodes."""

    def put(self, key: Any, value: Any) -> None:
        self[key] = value

    def delete(self, key: Any) -> None:
        """Remove ``key`` (absent: nothing happens)."""
        self.pop(key, None)


class SnapshotError(ValueError):
    """A snapshot file that cannot be read back (damaged, or not this task's)."""


def encode_snapshot(
    serializer: Serializer,
    component: str,
    task: int,
    checkpoint: int,
    state: Any,
    windows: Any = None,
) -> bytes:
    """The file for ``task`` in ``checkpoint``: ``state`` is a spout's position or a bolt's
    :class:`KeyValueState` (with the ``windows`` of a stateful windowed bolt)."""
    if isinstance(state, KeyValueState):
        kept = [list(state), list(state.values())]
        if windows is not None:
            kept.append(windows)
        payload = serializer.dumps(kept)
    else:
        payload = serializer.dumps([state])
    body = msgpack.packb([_VERSION, component, task, checkpoint, payload], use_bin_type=True)
    return MAGIC + _CRC.pack(zlib.crc32(body)) + body


def decode_snapshot(
    serializer: Serializer,
    data: bytes,
    component: str,
    task: int,
    checkpoint: int,
    stateful: bool,
    windows: bool = False,
) -> Any:
    """What :func:`encode_snapshot` stored for ``task`` in ``checkpoint``: a
    :class:`KeyValueState` when ``stateful`` (with ``windows``: that and the windows stored
    with it, or None), else a spout's position.  Raises :class:`SnapshotError` saying what is
    wrong."""
    where = f"snapshot of task {task} ({component!r}) in checkpoint {checkpoint}"
    header = len(MAGIC) + _CRC.size
    if len(data) < header or not data.startswith(MAGIC):
        raise SnapshotError(f"{where}: not a snapshot file")
    body = data[header:]
    if zlib.crc32(body) != _CRC.unpack_from(data, len(MAGIC))[0]:
        raise SnapshotError(f"{where}: its checksum does not match (damaged)")
    try:
        version, found_component, found_task, found_checkpoint, payload = msgpack.unpackb(
            body, raw=False
        )
    except Exception as exc:
        raise SnapshotError(f"{where}: unreadable ({exc})") from None
    if version != _VERSION:
        raise SnapshotError(f"{where}: format version {version!r}, this brokerless reads 1")
    if (found_component, found_task, found_checkpoint) != (component, task, checkpoint):
        raise SnapshotError(
            f"{where}: the file holds task {found_task} ({found_component!r}) of checkpoint "
            f"{found_checkpoint}"
        )
    values = serializer.loads(payload)
    if not stateful:
        return values[0]
    keys, values, *kept = values
    state = KeyValueState(zip(map(_hashable, keys), values, strict=True))
    return (state, kept[0] if kept else None) if windows else state


def _hashable(key: Any) -> Any:
    """A key as it went in: msgpack gives tuples back as lists, which cannot be keys."""
    if isinstance(key, list):
        return tuple(_hashable(item) for item in key)
    return key
