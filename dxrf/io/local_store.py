"""Reading groups from the local file system without following links or blocking.

A group on disk is a directory of files from wherever it came from. zarr's
own local store follows symbolic links (a chunk, or a whole ``y`` directory,
linked to another group is read silently) and opens whatever is at a key (a
named pipe in place of ``zarr.json`` blocks the reader forever). dxrf writes
only directories and regular files, so every local read goes through two
checks:

* :func:`check_tree`, before zarr opens anything: one walk of the group
  (``lstat`` only, no file opened) refusing links, pipes, sockets and devices;
* :class:`CheckedLocalStore`, the store of every local group opened for
  reading (also on workers): each key is opened with ``O_NOFOLLOW`` and
  ``O_NONBLOCK``, its directory must resolve to where it lies under the group,
  and ``fstat`` must say a regular file before a byte is read; metadata
  documents larger than :data:`MAX_METADATA_BYTES` are refused unread. So a
  file swapped for a link or a pipe after the walk is refused as well.

Object stores have no links or pipes; their keys are read by fsspec.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from zarr.abc.store import ByteRequest, OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.core.buffer import Buffer, BufferPrototype, default_buffer_prototype
from zarr.storage import LocalStore

__all__ = ["MAX_METADATA_BYTES", "CheckedLocalStore", "UnsafeFileError", "check_tree", "checked_store", "read_metadata_file"]

#: largest ``zarr.json`` read (a data group's holds a few bytes per chunk; 64 MiB is far above any dxrf writes)
MAX_METADATA_BYTES = 64 << 20

_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class UnsafeFileError(ValueError):
    """A group holds something dxrf never writes: a link, a pipe, a device, an oversized metadata file."""


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def check_tree(root: str | os.PathLike, what: str = "dxrf groups") -> None:
    """Refuse a group directory holding anything but directories and regular files.

    ``root`` itself may be reached through a link the user made; nothing
    below it may be a link. Only ``lstat`` is called: no file is opened.

    Raises
    ------
    UnsafeFileError
        Naming the entry, what it is (and a link's target) and that ``what``
        hold none.
    """
    root = Path(root)
    stack = [root]
    while stack:
        top = stack.pop()
        try:
            entries = list(os.scandir(top))
        except NotADirectoryError:
            continue
        for entry in entries:
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                stack.append(Path(entry.path))
            elif not stat.S_ISREG(mode):
                rel = str(Path(entry.path).relative_to(root))
                if stat.S_ISLNK(mode):
                    raise UnsafeFileError(f"{str(root)!r} contains the link {rel!r} -> {os.readlink(entry.path)!r}; {what} hold no links")
                raise UnsafeFileError(f"{str(root)!r} contains {_kind(mode)} {rel!r}; {what} hold only directories and regular files")


def _open_regular(root: Path, real_root: str, key: str) -> tuple[int, int] | None:
    """``(descriptor, size)`` of the regular file at ``key`` under ``root``; None if there is none."""
    parts = key.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise UnsafeFileError(f"{str(root)!r}: refusing to read the key {key!r} (it leaves the group)")
    path = root.joinpath(*parts)
    # O_NOFOLLOW guards the last component; the directories above it must be where they seem
    if os.path.realpath(path.parent) != os.path.join(real_root, *parts[:-1]):
        raise UnsafeFileError(f"{str(root)!r}: the directory of {key!r} is reached through a link; dxrf groups hold no links")
    try:
        fd = os.open(path, _FLAGS)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafeFileError(f"{str(root)!r} contains a symbolic link {key!r}; dxrf groups hold no links") from None
        raise UnsafeFileError(f"{str(root)!r}: cannot open {key!r}: {exc.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        if stat.S_ISDIR(st.st_mode):
            return None  # as zarr: a directory is no value
        raise UnsafeFileError(f"{str(root)!r}: {key!r} is {_kind(st.st_mode)}; dxrf groups hold only regular files")
    if key.rsplit("/", 1)[-1] == "zarr.json" and st.st_size > MAX_METADATA_BYTES:
        os.close(fd)
        raise UnsafeFileError(
            f"{str(root)!r}: the metadata {key!r} holds {st.st_size} bytes, more than the {MAX_METADATA_BYTES} dxrf reads"
        )
    return fd, st.st_size


def _read(root: Path, real_root: str, key: str, byte_range: ByteRequest | None) -> bytes | None:
    opened = _open_regular(root, real_root, key)
    if opened is None:
        return None
    fd, size = opened
    with os.fdopen(fd, "rb") as f:
        if byte_range is None:
            return f.read(size)  # never more than the size checked: a growing file cannot inflate the read
        if isinstance(byte_range, RangeByteRequest):
            f.seek(byte_range.start)
            return f.read(max(0, min(byte_range.end, size) - byte_range.start))
        if isinstance(byte_range, OffsetByteRequest):
            f.seek(byte_range.offset)
            return f.read(max(0, size - byte_range.offset))
        if isinstance(byte_range, SuffixByteRequest):
            f.seek(max(0, size - byte_range.suffix))
            return f.read(min(size, byte_range.suffix))
    raise TypeError(f"unexpected byte range {byte_range!r}")


def read_metadata_file(path: str | os.PathLike) -> bytes | None:
    """The bytes of the metadata file at ``path`` if it is a regular file (not a link) of bounded size, else None.

    For the quick looks at what a path holds (is it a dxrf group, of which
    kind): never blocks on a pipe, never follows a link.
    """
    path = Path(path)
    try:
        opened = _open_regular(path.parent, os.path.realpath(path.parent), path.name)
    except (UnsafeFileError, OSError):
        return None
    if opened is None:
        return None
    fd, size = opened
    with os.fdopen(fd, "rb") as f:
        return f.read(size)


class CheckedLocalStore(LocalStore):
    """A read-only zarr :class:`~zarr.storage.LocalStore` that opens only regular files, never through a link."""

    def __init__(self, root: Path | str, *, read_only: bool = True) -> None:
        super().__init__(root, read_only=True)
        self._real_root = os.path.realpath(self.root)

    def with_read_only(self, read_only: bool = True) -> CheckedLocalStore:
        return type(self)(self.root)

    def __reduce__(self) -> tuple:
        return (type(self), (str(self.root),))

    def _value(self, key: str, prototype: BufferPrototype | None, byte_range: ByteRequest | None) -> Buffer | None:
        data = _read(self.root, self._real_root, key, byte_range)
        if data is None:
            return None
        return (prototype or default_buffer_prototype()).buffer.from_bytes(data)

    def get_sync(self, key: str, *, prototype: BufferPrototype | None = None, byte_range: ByteRequest | None = None) -> Buffer | None:
        self._ensure_open_sync()
        return self._value(key, prototype, byte_range)

    async def get(self, key: str, prototype: BufferPrototype | None = None, byte_range: ByteRequest | None = None) -> Buffer | None:
        if not self._is_open:
            await self._open()
        return await asyncio.to_thread(self._value, key, prototype, byte_range)

    async def get_partial_values(
        self, prototype: BufferPrototype, key_ranges: Iterable[tuple[str, ByteRequest | None]]
    ) -> list[Buffer | None]:
        return [await self.get(key, prototype, byte_range) for key, byte_range in key_ranges]

    async def getsize(self, key: str) -> int:
        opened = _open_regular(self.root, self._real_root, key)
        if opened is None:
            raise FileNotFoundError(key)
        os.close(opened[0])
        return opened[1]


def checked_store(path: str, what: str = "dxrf groups") -> Any:
    """The store to read the local group at ``path`` with, after :func:`check_tree`."""
    check_tree(path, what)
    return CheckedLocalStore(path)
