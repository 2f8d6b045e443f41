"""Row-block reading of ``.npy`` files and of the members of ``.npz`` archives.

Rows are read with plain file reads (or through the zip stream), so only one
block of rows is in memory at a time.
"""

from __future__ import annotations

import contextlib
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from dxrf.core.memory import check_allocation


class _NpzMember:
    """Row-block reader for one ``.npy`` member of an ``.npz`` archive.

    Reads through the zip stream (decompressing on the fly), so only one block
    of rows is in memory at a time; ``np.load`` would decompress the whole
    member.
    """

    def __init__(self, path: Path, key: str) -> None:
        self.path = path
        self.key = key
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
        if key + ".npy" not in names:
            keys = [n[:-4] for n in names if n.endswith(".npy")]
            raise ValueError(f"{str(path)!r} has no array {key!r}; its arrays are {keys}")
        with self._open() as (shape, _, dtype):
            self.shape = shape
            self.dtype = dtype

    @contextlib.contextmanager
    def _open(self) -> Iterator[tuple[tuple[int, ...], bool, np.dtype]]:
        with zipfile.ZipFile(self.path) as zf, zf.open(self.key + ".npy") as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f"unsupported .npy version {version} for {self.key!r} in {str(self.path)!r}")
            self._f = f
            yield shape, fortran, dtype

    def blocks(self, chunk_rows: int, n_rows: int) -> Iterator[np.ndarray]:
        with self._open() as (shape, fortran, dtype):
            if dtype.hasobject:
                raise TypeError(f"array {self.key!r} holds Python objects; only numeric arrays can be ingested")
            if fortran and len(shape) > 1 and int(np.prod(shape[1:])) > 1:
                # Column-major data cannot be read by rows: load it (documented), if it fits.
                check_allocation(
                    int(np.prod(shape, dtype=np.float64)) * dtype.itemsize,
                    f"the Fortran-ordered array {self.key!r} of shape {shape} in {str(self.path)!r} (read whole)",
                    "save it in C order (np.ascontiguousarray) or as .npy",
                )
                arr = np.lib.format.read_array(self._f)
                for i in range(0, n_rows, chunk_rows):
                    yield np.ascontiguousarray(arr[i : i + chunk_rows])
                return
            what = f"{self.key!r} in {str(self.path)!r}"
            yield from _read_row_blocks(self._f, dtype, shape[1:], chunk_rows, n_rows, what)


def _read_row_blocks(
    f: Any, dtype: np.dtype, row_shape: tuple[int, ...], chunk_rows: int, n_rows: int, what: str
) -> Iterator[np.ndarray]:
    """Blocks of C-ordered rows read from a file positioned at the first row."""
    row_bytes = dtype.itemsize * int(np.prod(row_shape, dtype=np.int64))
    for i in range(0, n_rows, chunk_rows):
        k = min(chunk_rows, n_rows - i)
        buf = f.read(k * row_bytes)
        if len(buf) != k * row_bytes:
            raise ValueError(f"array {what} is truncated")
        yield np.frombuffer(buf, dtype=dtype).reshape((k, *row_shape))
