"""Pieces of a table file for a parallel ingest: runs of whole read chunks that workers read alone.

A piece starts at a data row that is a multiple of ``chunk_rows``, so a worker
reading it sees exactly the read chunks of a serial ingest (the user's
transform, the checks and the per-chunk statistics are applied to the same
rows). A CSV piece is a byte range found by one pass over the bytes that
records where every ``chunk_rows``-th line starts (a compressed file is
first decompressed once, streaming, into a local temporary file that the
workers read); a Parquet piece is a range of rows read from the row groups
that hold it.

Lines are records only for simple CSV: a quoted field that holds a line
break, or a line pandas skips, makes a piece's row count differ from its
line count, and the worker reports it (:class:`NotSplittable`) so that the
ingest runs serially instead.
"""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import io
import lzma
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pandas as pd

from dxrf.io.readers.parquet import arrow_frame

#: bytes read at a time by the line pass (its newline positions take up to 8x this)
_BLOCK = 4 << 20

_OPENERS: dict[str, Callable[[Path], BinaryIO]] = {
    ".gz": lambda p: gzip.open(p, "rb"),
    ".bz2": lambda p: bz2.open(p, "rb"),
    ".xz": lambda p: lzma.open(p, "rb"),
}


class NotSplittable(Exception):
    """A piece's lines are not its records (quoted line breaks, skipped lines): ingest serially."""


@dataclasses.dataclass(frozen=True)
class Piece:
    """Rows ``start_row .. start_row + n_rows`` of the source; for CSV also their bytes."""

    index: int
    start_row: int
    n_rows: int
    byte_start: int = 0
    byte_stop: int = 0

    @property
    def nbytes(self) -> int:
        return self.byte_stop - self.byte_start


def compression_of(path: Path) -> str | None:
    """The suffix of a compression the line pass can undo, '' for none, None for another one."""
    suffix = path.suffix.lower()
    if suffix in _OPENERS:
        return suffix
    return None if suffix in (".zip", ".zst", ".tar") else ""


def iter_csv_chunks(
    path: Path, *, header: bool, chunk_rows: int, n_rows: int | None, copy_to: Path | None = None
) -> Iterator[tuple[int, int, int]]:
    """``(byte_start, byte_stop, rows)`` of each read chunk of a CSV file, as the pass over its bytes finds them.

    One streaming pass over the (decompressed) bytes; with ``copy_to`` the
    decompressed bytes are written (and flushed) there first, so a chunk is on
    disk when it is yielded and workers can read it while the pass goes on.
    Empty lines (``""`` or ``"\\r"``) are not data lines: pandas skips them.
    """
    compression = compression_of(path)
    src = _OPENERS[compression](path) if compression else open(path, "rb")
    out = open(copy_to, "wb") if copy_to is not None else None
    count = 0  # data lines seen
    header_left = bool(header)
    base = 0  # offset of the current block
    line_start = 0  # offset where the current (unfinished) line starts
    last_byte = -1  # the byte before the current block
    stop = None
    start = None  # where the current chunk starts
    try:
        while stop is None:
            buf = src.read(_BLOCK)
            if out is not None and buf:
                out.write(buf)
                out.flush()
            arr = np.frombuffer(buf, dtype=np.uint8)
            ends = np.flatnonzero(arr == 10) + base
            if not buf:  # a last line without a newline
                ends = np.array([base], dtype=np.int64) if base > line_start else np.empty(0, np.int64)
            begins = np.concatenate(([line_start], ends[:-1] + 1)) if ends.size else ends
            lengths = ends - begins
            # the first byte of each line (only a one-byte line needs it: "\\r" alone is blank)
            inside = begins >= base
            first = np.full(begins.shape, last_byte)
            first[inside] = arr[begins[inside] - base]
            data = (lengths > 1) | ((lengths == 1) & (first != 13))
            idx = np.flatnonzero(data)
            if header_left and idx.size:
                header_left = False
                idx = idx[1:]
            numbers = count + np.arange(idx.size)  # data line numbers of these lines
            if n_rows is not None and numbers.size and numbers[-1] >= n_rows:
                keep = numbers < n_rows
                stop = int(begins[idx[keep.sum()]])  # where the first line past n_rows starts
                idx, numbers = idx[keep], numbers[keep]
            for b in begins[idx[numbers % chunk_rows == 0]]:
                if start is not None:
                    yield start, int(b), chunk_rows
                start = int(b)
            count += idx.size
            if ends.size:
                line_start = int(ends[-1]) + 1
            if arr.size:
                last_byte = int(arr[-1])
            base += arr.size
            if not buf:
                stop = base if stop is None else stop
            elif n_rows is not None and count >= n_rows and stop is None:
                stop = line_start
        if start is not None:
            yield start, stop, count - (count - 1) // chunk_rows * chunk_rows
    finally:
        src.close()
        if out is not None:
            out.close()


def csv_chunk_starts(
    path: Path, *, header: bool, chunk_rows: int, n_rows: int | None
) -> tuple[list[int], list[int], int]:
    """Byte starts and rows of every read chunk of a CSV file, and where the last one ends."""
    chunks = list(iter_csv_chunks(path, header=header, chunk_rows=chunk_rows, n_rows=n_rows))
    return [c[0] for c in chunks], [c[2] for c in chunks], chunks[-1][1] if chunks else 0


def group_pieces(chunks: Iterable[tuple[int, int, int]], piece_bytes: int) -> Iterator[Piece]:
    """Runs of whole read chunks of about ``piece_bytes`` bytes (at least one chunk each), as chunks come."""
    index = row = 0
    current: list[int] | None = None  # byte start, byte stop, rows
    for start, stop, rows in chunks:
        if current is not None and stop - current[0] <= piece_bytes:
            current[1], current[2] = stop, current[2] + rows
            continue
        if current is not None:
            yield Piece(index, row, current[2], current[0], current[1])
            index, row = index + 1, row + current[2]
        current = [start, stop, rows]
    if current is not None:
        yield Piece(index, row, current[2], current[0], current[1])


def source_bytes(path: Path) -> int:
    """The (estimated) bytes of a source once decompressed: a gzip file's own record, else 5x."""
    size = path.stat().st_size
    if compression_of(path) == ".gz" and size >= 18:
        with open(path, "rb") as f:
            f.seek(-4, 2)
            isize = int.from_bytes(f.read(4), "little")  # modulo 2**32: a lower bound at most
        return max(isize, size)
    return size * 5 if compression_of(path) else size


class _ByteRange(io.RawIOBase):
    """The bytes ``start:stop`` of a file, read as a stream."""

    def __init__(self, path: str | Path, start: int, stop: int) -> None:
        self._f = open(path, "rb")
        self._f.seek(start)
        self._left = stop - start

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = min(len(b), self._left)
        if n <= 0:
            return 0
        got = self._f.readinto(memoryview(b)[:n])
        self._left -= got
        return got

    def close(self) -> None:
        self._f.close()
        super().close()


def csv_piece_frames(
    path: str | Path, piece: Piece, *, chunk_rows: int, columns: Sequence[str], read_kw: Mapping[str, Any]
) -> Callable[[set[str]], Iterator[pd.DataFrame]]:
    """The read chunks of one CSV piece, indexed by their rows in the whole file (like ``_csv_frames``)."""

    def frames(str_columns: set[str]) -> Iterator[pd.DataFrame]:
        kw = {k: v for k, v in read_kw.items() if k not in ("header", "names")}
        if str_columns:
            user = kw.get("dtype")
            if user is None or isinstance(user, Mapping):
                kw["dtype"] = {**(user or {}), **{c: str for c in str_columns}}
        offset = piece.start_row
        raw = io.BufferedReader(_ByteRange(path, piece.byte_start, piece.byte_stop), buffer_size=1 << 20)
        try:
            with pd.read_csv(raw, header=None, names=list(columns), chunksize=chunk_rows, compression=None,
                             **kw) as reader:
                for df in reader:
                    if isinstance(df.index, pd.RangeIndex):  # else pandas took the first column as the index
                        df.index = pd.RangeIndex(offset, offset + len(df))
                    offset += len(df)
                    if offset - piece.start_row > piece.n_rows:
                        raise NotSplittable(f"piece {piece.index} has more records than lines")
                    yield df
        except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
            # a piece cut inside a quoted field, or a malformed line: the serial reader says which
            raise NotSplittable(str(exc)) from None
        finally:
            raw.close()
        if offset - piece.start_row != piece.n_rows:
            raise NotSplittable(f"piece {piece.index} has {offset - piece.start_row} records in {piece.n_rows} lines")

    return frames


def parquet_pieces(path: Path, *, chunk_rows: int, n_rows: int | None, piece_rows: int) -> list[Piece]:
    """Ranges of ``piece_rows`` rows (a multiple of ``chunk_rows``) of a Parquet file."""
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as pf:
        total = pf.metadata.num_rows
    if n_rows is not None:
        total = min(total, n_rows)
    step = max(chunk_rows, piece_rows // chunk_rows * chunk_rows)
    return [Piece(i, a, min(step, total - a)) for i, a in enumerate(range(0, total, step))]


def parquet_piece_frames(path: str | Path, piece: Piece, *, chunk_rows: int) -> Callable[[set[str]], Iterator[pd.DataFrame]]:
    """The read chunks of rows ``piece.start_row ...`` of a Parquet file, as ``_parquet_frames`` cuts them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def frames(str_columns: set[str]) -> Iterator[pd.DataFrame]:
        a, b = piece.start_row, piece.start_row + piece.n_rows
        with pq.ParquetFile(path) as pf:
            meta = pf.metadata
            groups, first, r = [], None, 0
            for g in range(meta.num_row_groups):
                n = meta.row_group(g).num_rows
                if r + n > a and r < b:
                    groups.append(g)
                    first = r if first is None else first
                r += n
            pending: list[pa.RecordBatch] = []
            have, pos, skip = 0, a, a - first
            for batch in pf.iter_batches(batch_size=chunk_rows, row_groups=groups):
                if skip >= len(batch):
                    skip -= len(batch)
                    continue
                batch = batch.slice(skip)
                skip = 0
                pending.append(batch)
                have += len(batch)
                while have >= chunk_rows or (have and pos + have >= b):
                    n = min(chunk_rows, b - pos)
                    table = pa.Table.from_batches(pending).slice(0, n).combine_chunks()
                    rest = pa.Table.from_batches(pending).slice(n)
                    pending = rest.to_batches() if rest.num_rows else []
                    have -= n
                    df = arrow_frame(table.to_batches()[0] if table.num_rows else table)
                    df.index = pd.RangeIndex(pos, pos + len(df))
                    pos += len(df)
                    yield df
                    if pos >= b:
                        return

    return frames
