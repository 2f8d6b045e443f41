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
  any chunk is read.

Failed checks raise :class:`IntegrityError` (a ``ValueError``) naming the
array and, where it is one chunk, the chunk.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import zarr

__all__ = ["IntegrityError", "array_options", "checked_reader", "describe", "verify"]


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


def _chunk_keys(arr: zarr.Array) -> list[tuple[tuple[int, ...], str]]:
    grid = [math.ceil(s / c) if s else 0 for s, c in zip(arr.shape, arr.chunks)]
    encode = arr.metadata.encode_chunk_key
    return [(coords, encode(coords)) for coords in itertools.product(*(range(g) for g in grid))]


def _stored_keys(arr: zarr.Array) -> set[str]:
    """Keys of the chunks in the store, relative to the array (one listing, no chunk read)."""
    from zarr.core.sync import sync

    store_path = arr.store_path
    prefix = store_path.path.rstrip("/") + "/" if store_path.path else ""

    async def listing() -> list[str]:
        return [k async for k in store_path.store.list_prefix(prefix)]

    return {k[len(prefix):] for k in sync(listing())}


def _stored_sizes(arr: zarr.Array, keys: list[str]) -> list[int]:
    from zarr.core.sync import sync

    store_path = arr.store_path
    prefix = store_path.path.rstrip("/") + "/" if store_path.path else ""

    async def sizes() -> list[int]:
        return [await store_path.store.getsize(prefix + k) for k in keys]

    return sync(sizes())


def verify(arr: zarr.Array, expected: Mapping[str, Any] | None, where: str, *, exact_size: bool = False) -> None:
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

    Raises
    ------
    IntegrityError
        The shape, dtype or chunk shape differ from the record, the array has
        no checksum codec, or a chunk is missing from the store.
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
    keys = _chunk_keys(arr)
    if not keys:
        return
    stored = _stored_keys(arr)
    for coords, key in keys:
        if key not in stored:
            missing = sum(k not in stored for _, k in keys)
            raise IntegrityError(
                f"{where}: chunk {key!r} (chunk index {coords}) is missing from the store; "
                f"{missing} of {len(keys)} chunks are missing"
            )
    if exact_size:
        if _codec_names(arr) != ["Crc32cCodec"]:
            raise IntegrityError(f"{where}: expected an uncompressed array with a crc32c checksum, got codecs {_codec_names(arr)}")
        sizes = _stored_sizes(arr, [k for _, k in keys])
        for (coords, key), size in zip(keys, sizes):
            region = [min(c, s - i * c) for i, c, s in zip(coords, arr.chunks, arr.shape)]
            want = math.prod(arr.chunks) * arr.dtype.itemsize + 4  # edge chunks are stored whole
            if size != want:
                raise IntegrityError(
                    f"{where}: chunk {key!r} holds {size} bytes; a chunk of shape {tuple(arr.chunks)} "
                    f"(data {tuple(region)}) takes {want}"
                )


class checked_reader:  # noqa: N801 - used like a function: wraps one array for dask.array.from_array
    """An array-like over a zarr array whose read errors name the array and the chunk.

    A chunk that fails its checksum, or cannot be decoded, raises
    :class:`IntegrityError` with the group, the array and the rows read,
    instead of a codec's bare message inside a dask traceback.
    """

    def __init__(self, arr: zarr.Array, where: str) -> None:
        self.arr = arr
        self.where = where
        self.shape = arr.shape
        self.dtype = arr.dtype
        self.ndim = arr.ndim
        self.chunks = arr.chunks

    def __getitem__(self, key: Any) -> np.ndarray:
        try:
            out = self.arr[key]
        except Exception as exc:  # codec and store errors come in many types
            raise IntegrityError(f"{self.where}: cannot read {_describe_key(key, self.chunks)}: {exc}") from exc
        # zarr reads a chunk absent from the store as the fill value: one deleted
        # after the group was opened would become rows of NaN or zeros. Checked
        # after the read, so a chunk removed during it is caught too.
        _check_present(self.arr, key, self.where)
        return out

    def __reduce__(self) -> tuple:
        return (checked_reader, (self.arr, self.where))


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
    return f"the selection {key!r}"
