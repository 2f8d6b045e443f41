"""Verifiable zarr arrays: what every dxrf writer records and every reader checks.

zarr reads a chunk that is not in the store as the array's fill value, and
trusts the shape and dtype written in each array's own ``zarr.json``. So a
deleted chunk file reads as zeros and an edited shape adds rows of zeros,
silently. dxrf therefore writes every array so that it can be verified:

* every chunk is stored, even one equal to the fill value
  (``write_empty_chunks``), so a missing chunk key is an error, not zeros;
* every chunk carries a CRC-32C of its stored bytes (zarr v3's ``crc32c``
  codec, after the compressor), so a changed byte fails to decode;
* the parent group records each array's shape, dtype and chunk shape
  (:func:`describe`), published with the group's own metadata, which is written
  last; :func:`verify` compares them and lists the store's chunk keys before
  any chunk is read;
* the record also holds each chunk's CRC-32C in grid order
  (:func:`chunk_checksums`, key ``crc32c``), so a chunk is bound to its array
  and its place in the grid: a chunk moved, swapped with another of the same
  size, or copied from another group carries a valid checksum of its own
  bytes but not the one recorded for where it now lies
  (:func:`check_positions`, run as each chunk is read). Groups and models
  written before the table have no ``crc32c`` key and are read with the
  per-chunk check alone.

Before any of this, :func:`check_grid` bounds what the array's metadata
declares in O(1) time and memory: at most :data:`MAX_CHUNKS` chunks, and a
chunk no larger than the caller's budget. Only then is the store listed, and
the grid is walked lazily, never held as a list.

Failed checks raise :class:`IntegrityError` (a ``ValueError``) naming the
array and, where it is one chunk, the chunk.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import zarr

__all__ = [
    "MAX_CHUNKS", "IntegrityError", "array_options", "check_grid", "check_positions", "checked_reader", "chunk_checksums",
    "describe", "verify",
]

#: most chunks one stored array may declare: its grid is walked, and a dask graph gets one task per chunk
MAX_CHUNKS = 1 << 18


class IntegrityError(ValueError):
    """A stored array does not match what its writer recorded, or a chunk is missing or corrupt."""


def array_options(compressor: Any | None = None) -> dict[str, Any]:
    """Keyword arguments of ``zarr.Group.create_array`` for a verifiable array.

    ``compressor`` (a bytes-to-bytes codec or None) comes first; the
    checksum is taken of the stored, compressed bytes.
    """
    codecs = ([] if compressor is None else [compressor]) + [zarr.codecs.Crc32cCodec()]
    return {"compressors": codecs, "config": {"write_empty_chunks": True}}


def describe(arr: zarr.Array) -> dict[str, Any]:
    """What :func:`verify` checks: shape, dtype and chunk shape, as JSON values."""
    return {"shape": [int(s) for s in arr.shape], "dtype": str(arr.dtype), "chunks": [int(c) for c in arr.chunks]}


def _codec_names(arr: zarr.Array) -> list[str]:
    return [type(c).__name__ for c in arr.compressors]


def chunk_count(arr: zarr.Array) -> int:
    """The number of chunks in the array's grid, from its metadata alone (O(ndim))."""
    return math.prod(math.ceil(s / c) for s, c in zip(arr.shape, arr.chunks)) if all(arr.shape) else 0


def check_grid(arr: zarr.Array, where: str, *, max_chunk_bytes: int | None = None) -> int:
    """Bound what the metadata declares before anything is listed or allocated; return the chunk count.

    O(ndim) time and memory: the grid may hold at most :data:`MAX_CHUNKS`
    chunks, and one decoded chunk at most ``max_chunk_bytes`` bytes.
    """
    if any(c < 1 for c in arr.chunks):
        raise IntegrityError(f"{where}: the chunk shape {tuple(arr.chunks)} has an empty side")
    n = chunk_count(arr)
    if n > MAX_CHUNKS:
        raise IntegrityError(
            f"{where}: shape {tuple(arr.shape)} in chunks of {tuple(arr.chunks)} declares {n} chunks; "
            f"dxrf reads at most {MAX_CHUNKS} chunks per array (write it with larger chunks)"
        )
    size = math.prod(arr.chunks) * arr.dtype.itemsize
    if max_chunk_bytes is not None and size > max_chunk_bytes:
        raise IntegrityError(
            f"{where}: one chunk of shape {tuple(arr.chunks)} and dtype {arr.dtype} takes {size} bytes, "
            f"more than the {max_chunk_bytes} allowed"
        )
    return n


def _chunk_keys(arr: zarr.Array) -> Iterator[tuple[tuple[int, ...], str]]:
    """The grid's chunk coordinates and keys in C order, one at a time."""
    grid = [math.ceil(s / c) if s else 0 for s, c in zip(arr.shape, arr.chunks)]
    encode = arr.metadata.encode_chunk_key
    return ((coords, encode(coords)) for coords in itertools.product(*(range(g) for g in grid)))


def _prefix(arr: zarr.Array) -> str:
    path = arr.store_path.path
    return path.rstrip("/") + "/" if path else ""


def _stored_keys(arr: zarr.Array, limit: int, where: str) -> set[str]:
    """Keys in the store below the array, relative to it (one listing, no chunk read); at most ``limit``."""
    from zarr.core.sync import sync

    store, prefix = arr.store_path.store, _prefix(arr)

    async def listing() -> set[str]:
        keys: set[str] = set()
        async for k in store.list_prefix(prefix):
            keys.add(k[len(prefix):])
            if len(keys) > limit:
                raise IntegrityError(f"{where}: the store holds more than {limit} objects under the array, more than its grid")
        return keys

    return sync(listing())


def _trailers(arr: zarr.Array, keys: list[str]) -> list[bytes | None]:
    """The last 4 bytes (the CRC-32C) of each stored chunk in ``keys``; None where one is missing."""
    from zarr.abc.store import SuffixByteRequest
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    store, prefix, proto = arr.store_path.store, _prefix(arr), default_buffer_prototype()

    async def get_all() -> list[bytes | None]:
        import asyncio

        out: list[bytes | None] = []
        for i in range(0, len(keys), 64):  # bounded concurrency for object stores
            got = await asyncio.gather(*(store.get(prefix + k, proto, SuffixByteRequest(4)) for k in keys[i : i + 64]))
            out.extend(None if b is None else b.to_bytes() for b in got)
        return out

    return sync(get_all())


def chunk_checksums(arr: zarr.Array) -> str:
    """Each stored chunk's CRC-32C in grid (C) order, as hex: the table that binds chunks to their places.

    Read from the stored chunks' last 4 bytes (where the ``crc32c`` codec puts
    it) once all are written, so it is what a reader finds in an untouched store.
    """
    keys = [k for _, k in _chunk_keys(arr)]
    found = _trailers(arr, keys)
    missing = [k for k, b in zip(keys, found) if b is None or len(b) != 4]
    if missing:
        raise IntegrityError(f"chunk {missing[0]!r} of the array just written is missing")
    return "".join(b.hex() for b in found)  # type: ignore[union-attr]


def _check_table(table: Any, n: int, where: str) -> str | None:
    """The ``crc32c`` table of a record, checked for its length (O(1)); None when the writer kept none."""
    if table is None:
        return None
    if not isinstance(table, str) or len(table) != 8 * n or (table and not table.isalnum()):
        raise IntegrityError(f"{where}: the record's chunk checksum table is malformed (expected {n} entries)")
    return table


def check_positions(arr: zarr.Array, table: str | None, where: str, coords: Iterable[tuple[int, ...]] | None = None) -> None:
    """Each chunk at ``coords`` (default: all) must carry the CRC-32C the table records for its place.

    The chunk's own codec then checks its bytes against that trailer, so the
    bytes read are those written at this place of this array.
    """
    if table is None:
        return
    grid = [math.ceil(s / c) if s else 0 for s, c in zip(arr.shape, arr.chunks)]
    encode = arr.metadata.encode_chunk_key
    coords = list(itertools.product(*(range(g) for g in grid)) if coords is None else coords)
    found = _trailers(arr, [encode(c) for c in coords])
    for c, got in zip(coords, found):
        if got is None:
            continue  # a missing chunk is reported by the read itself
        i = int(np.ravel_multi_index(c, grid)) if c else 0
        if got.hex() != table[8 * i : 8 * i + 8]:
            raise IntegrityError(
                f"{where}: chunk {encode(c)!r} (chunk index {c}) is not the chunk its writer stored there: its "
                "checksum differs from the one recorded for this place (damaged, moved, swapped with another chunk, "
                "or copied from another array)"
            )


def _stored_sizes(arr: zarr.Array, keys: Iterable[str]) -> Iterator[int]:
    from zarr.core.sync import sync

    store, prefix = arr.store_path.store, _prefix(arr)
    for k in keys:
        yield sync(store.getsize(prefix + k))


def verify(
    arr: zarr.Array, expected: Mapping[str, Any] | None, where: str, *, exact_size: bool = False,
    max_chunk_bytes: int | None = None,
) -> None:
    """Check a stored array against its writer's record before reading it.

    Parameters
    ----------
    arr : zarr.Array
    expected : mapping or None
        :func:`describe` as the writer recorded it; None checks only the codec
        and the chunks.
    where : str
        The group's path and the array's name, for messages.
    exact_size : bool, default False
        For arrays stored without compression: every chunk's stored size must
        be its decoded size plus the checksum, so a small file cannot claim a
        large array and have it allocated before decoding fails.
    max_chunk_bytes : int, optional
        The most bytes one decoded chunk may take (see :func:`check_grid`).

    Raises
    ------
    IntegrityError
        The shape, dtype or chunk shape differ from the record, the grid is
        beyond the bounds, the array has no checksum codec, the record's
        checksum table is malformed, or a chunk is missing from the store.
    """
    if expected is not None:
        if not isinstance(expected, Mapping):
            raise IntegrityError(f"{where}: the group's record of this array is malformed: {expected!r}")
        got = describe(arr)
        for key in ("shape", "dtype", "chunks"):
            if got[key] != expected.get(key):
                raise IntegrityError(
                    f"{where}: stored {key} {got[key]} differs from the {key} {expected.get(key)} its writer recorded "
                    "(the array's metadata was changed)"
                )
    if "Crc32cCodec" not in _codec_names(arr):
        raise IntegrityError(f"{where}: the array has no crc32c checksum codec (codecs: {_codec_names(arr)})")
    n = check_grid(arr, where, max_chunk_bytes=max_chunk_bytes)
    if n == 0:
        return
    stored = _stored_keys(arr, 2 * n + 16, where)  # bounded by the grid: the metadata, a few leftovers
    for coords, key in _chunk_keys(arr):
        if key not in stored:
            present = sum(1 for _, k in _chunk_keys(arr) if k in stored)
            raise IntegrityError(
                f"{where}: chunk {key!r} (chunk index {coords}) is missing from the store; "
                f"{n - present} of {n} chunks are missing"
            )
    if expected is not None:
        _check_table(expected.get("crc32c"), n, where)
    if exact_size:
        if _codec_names(arr) != ["Crc32cCodec"]:
            raise IntegrityError(f"{where}: expected an uncompressed array with a crc32c checksum, got codecs {_codec_names(arr)}")
        want = math.prod(arr.chunks) * arr.dtype.itemsize + 4  # edge chunks are stored whole
        for (coords, key), size in zip(_chunk_keys(arr), _stored_sizes(arr, (k for _, k in _chunk_keys(arr)))):
            if size != want:
                region = [min(c, s - i * c) for i, c, s in zip(coords, arr.chunks, arr.shape)]
                raise IntegrityError(
                    f"{where}: chunk {key!r} holds {size} bytes; a chunk of shape {tuple(arr.chunks)} "
                    f"(data {tuple(region)}) takes {want}"
                )


def read_failure(exc: BaseException) -> str:
    """Why a chunk could not be read, in words that never repeat the stored bytes.

    Codecs put the stored checksum or the undecodable bytes into their
    messages; a hostile file could thus have its content echoed into logs.
    dxrf's own refusals (links, pipes, positions) are kept as they are.
    """
    if isinstance(exc, ValueError) and type(exc).__module__.startswith("dxrf."):
        return str(exc)
    if "checksum" in str(exc).lower():
        return "its bytes do not match its stored CRC-32C checksum (the chunk was changed or replaced)"
    return f"it cannot be decoded ({type(exc).__name__})"


def metadata_failure(exc: BaseException) -> str:
    """Why a metadata document could not be parsed, without repeating its bytes (bounded, one line)."""
    import json

    for e in (exc, exc.__cause__, exc.__context__):
        if isinstance(e, UnicodeDecodeError):
            return "it is not UTF-8 text"
        if isinstance(e, json.JSONDecodeError):
            return f"it is not valid JSON (line {e.lineno}, column {e.colno})"
    if isinstance(exc, ValueError) and type(exc).__module__.startswith("dxrf."):
        return str(exc)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = text if text.isascii() and text.isprintable() else ""
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def _chunk_range(key: Any, shape: tuple[int, ...], chunks: tuple[int, ...]) -> list[range]:
    """The chunk indices along each axis that an indexing key touches (all of them for keys other than slices)."""
    key = key if isinstance(key, tuple) else (key,)
    out = []
    for axis, (s, c) in enumerate(zip(shape, chunks)):
        k = key[axis] if axis < len(key) else slice(None)
        n = math.ceil(s / c) if s else 0
        if isinstance(k, slice) and k.step in (None, 1):
            start, stop, _ = k.indices(s)
            out.append(range(start // c, math.ceil(stop / c)) if stop > start else range(0))
        elif isinstance(k, (int, np.integer)) and 0 <= int(k) < s:
            out.append(range(int(k) // c, int(k) // c + 1))
        else:
            out.append(range(n))
    return out


class checked_reader:  # noqa: N801 - used like a function: wraps one array for dask.array.from_array
    """An array-like over a zarr array whose read errors name the array and the chunk.

    A chunk that fails its checksum, or cannot be decoded, raises
    :class:`IntegrityError` with the group, the array and the rows read,
    instead of a codec's bare message inside a dask traceback (and never the
    stored bytes). With the writer's checksum ``table``, each chunk read must
    also be the one written at its place (:func:`check_positions`).
    """

    def __init__(self, arr: zarr.Array, where: str, table: str | None = None) -> None:
        self.arr = arr
        self.where = where
        self.table = table
        self.shape = arr.shape
        self.dtype = arr.dtype
        self.ndim = arr.ndim
        self.chunks = arr.chunks

    def __getitem__(self, key: Any) -> np.ndarray:
        what = _describe_key(key, self.chunks)
        try:
            if self.table is not None:
                check_positions(self.arr, self.table, self.where, itertools.product(*_chunk_range(key, self.shape, self.chunks)))
            out = self.arr[key]
        except IntegrityError:
            raise
        except Exception as exc:  # codec and store errors come in many types
            raise IntegrityError(f"{self.where}: cannot read {what}: {read_failure(exc)}") from None
        # zarr reads a chunk absent from the store as the fill value: one deleted
        # after the group was opened would become rows of NaN or zeros. Checked
        # after the read, so a chunk removed during it is caught too.
        _check_present(self.arr, key, self.where)
        return out

    def __reduce__(self) -> tuple:
        return (checked_reader, (self.arr, self.where, self.table))


def _covered_chunks(key: Any, arr: zarr.Array) -> list[tuple[int, ...]] | None:
    """The chunk coordinates a tuple of slices reads (None for any other selection)."""
    key = key if isinstance(key, tuple) else (key,)
    if len(key) > arr.ndim or not all(isinstance(k, slice) and k.step in (None, 1) for k in key):
        return None
    key = key + (slice(None),) * (arr.ndim - len(key))
    ranges = []
    for k, c, n in zip(key, arr.chunks, arr.shape):
        start, stop, _ = k.indices(n)
        if stop <= start:
            return []
        ranges.append(range(start // c, (stop - 1) // c + 1))
    return list(itertools.product(*ranges))


def _check_present(arr: zarr.Array, key: Any, where: str) -> None:
    """Raise :class:`IntegrityError` if a chunk that ``arr[key]`` read is not in the store."""
    from zarr.core.sync import sync

    coords = _covered_chunks(key, arr)
    if coords is None:
        coords = [c for c, _ in _chunk_keys(arr)]
    if not coords:
        return
    store_path = arr.store_path
    prefix = store_path.path.rstrip("/") + "/" if store_path.path else ""
    encode = arr.metadata.encode_chunk_key

    async def missing() -> list[tuple[int, ...]]:
        return [c for c in coords if not await store_path.store.exists(prefix + encode(c))]

    gone = sync(missing())
    if gone:
        raise IntegrityError(
            f"{where}: chunk {encode(gone[0])!r} (chunk index {gone[0]}) is missing from the store "
            "(removed after the group was opened); it would read as fill values"
        )


def _describe_key(key: Any, chunks: tuple[int, ...]) -> str:
    """'rows a:b (chunk i)' for the first axis of an indexing key."""
    first = key[0] if isinstance(key, tuple) and key else key
    if isinstance(first, slice) and first.start is not None and chunks:
        stop = "" if first.stop is None else first.stop
        return f"rows {first.start}:{stop} (chunk {first.start // chunks[0]})"
    if isinstance(first, slice) and first == slice(None):
        return "the whole array"
    return "a selection"
