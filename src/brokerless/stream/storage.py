"""Where checkpoints are kept: storage that the driver and every worker can reach.

One small interface, :class:`CheckpointStorage` (write, read, list, delete files named by
relative ``/``-separated paths), and two implementations:

* :class:`LocalStorage` -- a local directory (local and multi-process mode, or a mount that
  every machine shares).  A file is written beside its place, ``fsync``-ed and renamed over
  it, then the directory is ``fsync``-ed: a reader sees a whole file or none.
* :class:`ArrowStorage` -- any filesystem ``pyarrow.fs`` opens from a URL: ``hdfs://``
  (Hadoop-compatible), ``s3://``, ``gs://``, ``file://``; or, for a scheme pyarrow does not
  know, ``fsspec``'s (``abfs://``, ``memory://``, ...) when fsspec is installed, through
  ``pyarrow.fs.FSSpecHandler``.  A file is written under a temporary name and moved into
  place.

:func:`open_storage` picks one from a path or URL.
"""

from __future__ import annotations

import os
import shutil
import threading
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

__all__ = ["ArrowStorage", "CheckpointStorage", "LocalStorage", "described", "open_storage"]


class CheckpointStorage(ABC):
    """Files under one root, named by relative paths like ``"chk-0000000001/task-3"``."""

    url: str

    @abstractmethod
    def write(self, path: str, data: bytes) -> None:
        """Store ``data`` at ``path`` (replacing it; parents are made): whole or not at all."""

    @abstractmethod
    def read(self, path: str) -> bytes:
        """The bytes at ``path``; FileNotFoundError when there are none."""

    @abstractmethod
    def list(self) -> list[str]:
        """The names directly under the root (none when the root does not exist yet)."""

    @abstractmethod
    def delete(self, path: str) -> None:
        """Remove ``path``, a file or a directory with everything in it (absent: nothing)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"


def _temporary(path: str) -> str:
    return f"{path}.tmp-{os.getpid()}-{threading.get_ident()}"


class LocalStorage(CheckpointStorage):
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.url = str(self.root)

    def write(self, path: str, data: bytes) -> None:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = _temporary(str(target))
        with open(temporary, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, target)
        directory = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def read(self, path: str) -> bytes:
        return (self.root / path).read_bytes()

    def list(self) -> list[str]:
        try:
            return sorted(os.listdir(self.root))
        except FileNotFoundError:
            return []

    def delete(self, path: str) -> None:
        target = self.root / path
        if target.is_dir():
            shutil.rmtree(target, ignore_errors=True)
        else:
            target.unlink(missing_ok=True)


class ArrowStorage(CheckpointStorage):
    """A ``pyarrow.fs`` filesystem and a root on it, from a URL (needs pyarrow; fsspec for
    the schemes only it knows)."""

    def __init__(self, url: str) -> None:
        import pyarrow
        from pyarrow import fs

        self._fs_module = fs
        self.url = url
        try:
            self._fs, root = fs.FileSystem.from_uri(url)
        except pyarrow.ArrowInvalid:  # a scheme pyarrow does not know
            try:
                import fsspec
            except ImportError:
                raise ValueError(
                    f"checkpoint location {url!r}: pyarrow does not know its scheme; "
                    "install fsspec (and its package for that scheme)"
                ) from None
            filesystem, root = fsspec.core.url_to_fs(url)
            # pyarrow implements FSSpecHandler's methods; its stubs leave them abstract
            self._fs = fs.PyFileSystem(fs.FSSpecHandler(filesystem))  # type: ignore[abstract]
        self._root = root.rstrip("/")

    def _path(self, path: str) -> str:
        return f"{self._root}/{path}"

    def _type(self, path: str) -> Any:
        return self._fs.get_file_info(path).type

    def write(self, path: str, data: bytes) -> None:
        target = self._path(path)
        self._fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
        temporary = _temporary(target)
        with self._fs.open_output_stream(temporary) as stream:
            stream.write(data)
        self._fs.move(temporary, target)

    def read(self, path: str) -> bytes:
        target = self._path(path)
        if self._type(target) != self._fs_module.FileType.File:
            raise FileNotFoundError(f"{self.url}: no file {path!r}")
        with self._fs.open_input_stream(target) as stream:
            return bytes(stream.read())

    def list(self) -> list[str]:
        selector = self._fs_module.FileSelector(self._root, allow_not_found=True)
        return sorted(info.base_name for info in self._fs.get_file_info(selector))

    def delete(self, path: str) -> None:
        target = self._path(path)
        kind = self._type(target)
        if kind == self._fs_module.FileType.Directory:
            self._fs.delete_dir(target)
        elif kind == self._fs_module.FileType.File:
            self._fs.delete_file(target)


def described(error: BaseException) -> str:
    """A storage error for a message: its type and its text, which for an OSError names the
    file (its repr leaves the file out)."""
    return f"{type(error).__name__}: {error}"


def open_storage(location: str) -> CheckpointStorage:
    """The storage at ``location``: a local path, or a URL ``pyarrow.fs`` opens
    (``hdfs://namenode:8020/checkpoints/app``, ``s3://bucket/app``, ``file:///mnt/shared``)."""
    if not isinstance(location, str) or not location:
        raise ValueError(f"a checkpoint location must be a path or a URL, not {location!r}")
    if "://" not in location:
        return LocalStorage(location)
    try:
        return ArrowStorage(location)
    except ImportError:
        raise ValueError(
            f"checkpoint location {location!r} needs pyarrow (pip install pyarrow), or use a "
            "local directory (a shared mount on a cluster)"
        ) from None
