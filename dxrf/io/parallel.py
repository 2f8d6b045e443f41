"""The table ingest (CSV, Parquet) on the workers of a Dask cluster, byte-identical to the serial one.

The source is cut into pieces of whole read chunks (:mod:`.readers.pieces`),
one task per piece, each streaming its piece one read chunk at a time:

1. scan: each piece's column kinds, levels, rows and first bad values (the
   serial scan's :class:`_Scan` of its chunks); merged on the client in
   source order, then the schema is decided as in the serial ingest. A
   column that is text in some pieces and numbers in others is scanned again
   as text, as serially;
2. count (only with ``nan_policy="drop"``): the rows each piece keeps;
3. write: each piece encodes and checks its chunks, writes the zarr chunks
   that lie wholly in its output rows straight into the store, and returns
   the per-chunk statistics and the rows of the (at most two) zarr chunks it
   shares with its neighbours. The client merges the statistics in source
   order (Chan's update, block by block: bitwise the serial result) and writes
   the shared chunks when both halves have arrived.

So every chunk file, the statistics and the attributes equal the serial
ingest's. Errors are those of the first piece (in source order) that fails,
with row numbers in the whole file. A CSV whose lines are not its records
(a quoted line break, a skipped line) is found in the scan, before anything
is written, and ingested serially instead.
"""

from __future__ import annotations

import dataclasses
import functools
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import zarr

from dxrf.core.memory import worker_memory_limit
from dxrf.core.options import Options
from dxrf.io.storage import zarr_target
from dxrf.io.readers.pieces import (
    NotSplittable,
    Piece,
    compression_of,
    csv_piece_frames,
    group_pieces,
    iter_csv_chunks,
    parquet_piece_frames,
    parquet_pieces,
    source_bytes,
)
from dxrf.io.table_scan import _add_levels, _FramePrep, _Scan, _scan_table, _TableOptions
from dxrf.io.tables import _build_schema, _check_nan_policy_table, _check_table_memory, _TableSchema, table_str_columns
from dxrf.io.writer import _BlockCheck, _BlockStats, _Progress, _Totals, create_arrays, no_rows_message, owned

#: Sources smaller than this are ingested serially by default: the tasks and
#: the extra passes cost more than they save (see BENCHMARKS.md).
PARALLEL_MIN_BYTES = 16 << 20

#: ``dxrf ingest`` starts a cluster (seconds) only for sources of this size or more.
CLUSTER_MIN_BYTES = 64 << 20

#: ``read_options`` a CSV piece can honour (they act on each line alone).
_SPLITTABLE_READ_OPTIONS = frozenset(
    {"dtype", "na_values", "keep_default_na", "na_filter", "true_values", "false_values", "decimal", "thousands",
     "quotechar", "doublequote", "escapechar", "converters"}
)

Frames = Callable[[set[str]], Iterator[pd.DataFrame]]


def csv_splittable(read_kw: Mapping[str, Any], path: Path) -> bool:
    """Whether a CSV read with ``read_kw`` can be cut at line starts (else it is ingested serially)."""
    extra = set(read_kw) - {"sep", "skipinitialspace", "header", "names"} - _SPLITTABLE_READ_OPTIONS
    sep = read_kw.get("sep", ",")
    return not extra and isinstance(sep, str) and len(sep) == 1 and compression_of(path) is not None


def _fingerprint(path: str) -> tuple[int, bytes, bytes] | None:
    """Size, first and last bytes of a file (None where it cannot be read): the same file on another machine?"""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            size = f.seek(0, 2)
            f.seek(max(0, size - 64))
            return size, head, f.read(64)
    except OSError:
        return None


def _workers_see(client: Any, path: Path) -> bool:
    """Whether every worker reads ``path`` as this process does (a shared or the same file system)."""
    mine = _fingerprint(str(path))
    return mine is not None and all(v == mine for v in client.run(_fingerprint, str(path)).values())


def _piece_bytes(client: Any, total: int, options: Options) -> int:
    """Bytes per piece: about eight pieces per worker thread, each under 1/16 of a worker's memory.

    A task streams its piece one read chunk at a time, so the piece size sets
    the balance between workers, not a task's memory: a piece's write runs
    where it was scanned (its parsed frames are there), so the last write of
    a worker with one piece more than the others is the pass's tail.
    ``options.ingest_piece_bytes``, when set, is the size instead.
    """
    fixed = options.ingest_piece_bytes
    if fixed is not None:
        return fixed
    threads = sum(client.nthreads().values()) or 1
    limit = worker_memory_limit()
    cap = limit.nbytes // 16 if limit is not None else 1 << 30
    return max(1, min(-(-total // (8 * threads)), cap))


def _ordered(client: Any, fn: Callable[..., Any], pieces: Iterable[Piece], args: tuple,
             per_piece: Callable[[int], tuple] = lambda i: (), submitted: list[Piece] | None = None,
             where: Sequence[str | None] | None = None) -> Iterator[Any]:
    """``fn(piece, *args, *per_piece(i))`` for every piece on the workers, results in source order.

    Each piece is submitted as ``pieces`` yields it (and appended to
    ``submitted``), so workers start while a CSV's line pass goes on. The first
    failure in source order is raised (its message names rows of the whole
    file); the remaining tasks are cancelled. ``where[i]``: the worker piece
    ``i`` should run on (where its parsed frames are), others allowed.
    """
    name = f"dxrf-ingest-{fn.__name__.strip('_')}-{uuid.uuid4().hex[:8]}"
    futures = []
    try:
        for i, p in enumerate(pieces):
            place = {} if where is None or where[i] is None else {"workers": [where[i]], "allow_other_workers": True}
            futures.append(client.submit(fn, p, *args, *per_piece(i), key=f"{name}-{p.index}", pure=False, **place))
            if submitted is not None:
                submitted.append(p)
        for fut in futures:
            yield fut.result()
            fut.release()
    finally:
        client.cancel(futures)


# ---- the tasks (run on the workers) ----

#: A worker's parsed read chunks of the pieces it scanned, kept for the write pass so that a piece is
#: parsed once: ``{(run, piece index, text columns): frames}``, within :func:`_cache_budget` bytes.
_PARSED: dict[tuple, list[pd.DataFrame]] = {}
#: the bytes of each entry of ``_PARSED`` (counted once, when it is cached)
_PARSED_BYTES: dict[tuple, int] = {}


@dataclasses.dataclass(frozen=True)
class _Run:
    """One parallel ingest, as its tasks see it: its id and the bytes of parsed frames a worker may keep."""

    id: str
    cache_bytes: int | None = None

    def budget(self) -> int:
        """``cache_bytes``, by default 1/8 of the worker's memory limit (256 MiB without one)."""
        if self.cache_bytes is not None:
            return self.cache_bytes
        limit = worker_memory_limit()
        return limit.nbytes // 8 if limit is not None else 256 << 20


def _cached_frames(piece: Piece, frames_of: Callable[[Piece], Frames], run: _Run, keep: bool) -> Frames:
    """``frames_of(piece)``, from this worker's cache when it scanned the piece; ``keep`` caches a first parse."""

    def frames(str_columns: set[str]) -> Iterator[pd.DataFrame]:
        # each pass gets shallow copies: preparing a frame replaces some of its columns
        key = (run.id, piece.index, frozenset(str_columns))
        if key in _PARSED:
            if not keep:
                _PARSED_BYTES.pop(key, None)
            for df in _PARSED[key] if keep else _PARSED.pop(key):
                yield df.copy(deep=False)
            return
        kept: list[pd.DataFrame] | None = [] if keep else None
        budget = run.budget() - sum(_PARSED_BYTES.values())
        used = 0
        for df in frames_of(piece)(str_columns):
            if kept is not None:
                used += _frame_bytes(df)
                if used <= budget:
                    kept.append(df)
                else:  # over the budget: this piece is parsed again in the write pass
                    kept = None
            yield df.copy(deep=False)
        if kept is not None:
            _PARSED[key] = kept
            _PARSED_BYTES[key] = used

    return frames


def _frame_bytes(df: pd.DataFrame) -> int:
    return int(df.memory_usage(deep=True).sum())


def _forget_parsed(run: _Run) -> None:
    """Drop what a run left in this worker's cache (a failed or cancelled ingest)."""
    for key in [k for k in _PARSED if k[0] == run.id]:
        del _PARSED[key]
        _PARSED_BYTES.pop(key, None)


def _scan_piece(piece: Piece, frames_of: Callable[[Piece], Frames], opts: _TableOptions, str_columns: set[str],
                run: _Run) -> tuple[_Scan | None, str | None]:
    """The piece's scan, and the worker that now holds its parsed frames (where its write should run)."""
    from distributed import get_worker

    # a user's transform may change a frame in place: then every pass parses its own
    frames = _cached_frames(piece, frames_of, run, keep=opts.transform is None)
    scan = _scan_table(frames, _FramePrep(opts), opts, str_columns, False, allow_empty=True)
    try:
        here = get_worker().address
    except ValueError:  # not on a worker
        here = None
    return scan, here


def _encoded(piece: Piece, frames_of: Callable[[Piece], Frames], opts: _TableOptions, str_columns: set[str],
             schema: _TableSchema, check: _BlockCheck, run: _Run,
             last: bool = True) -> Iterator[tuple[np.ndarray, np.ndarray | None, int]]:
    """The checked blocks of a piece, one read chunk at a time (as the serial ingest makes them).

    ``last``: the last pass over the piece, which releases its cached frames.
    """
    prep = _FramePrep(opts)
    for raw in _cached_frames(piece, frames_of, run, keep=not last and opts.transform is None)(str_columns):
        df = prep(raw, str_columns)
        yield check.check(schema.encode_X(df, scratch=True), schema.encode_y(df), df.index.to_numpy())


def _count_piece(piece: Piece, *args: Any) -> tuple[int, int]:
    kept = dropped = 0
    for X, _, n_dropped in _encoded(piece, *args, last=False):
        kept += X.shape[0]
        dropped += n_dropped
    return kept, dropped


class _Sink:
    """Writes rows ``start:stop`` of the output: whole zarr chunks in place, shared chunks as fragments."""

    def __init__(self, X: zarr.Array, y: zarr.Array | None, start: int, stop: int, n_total: int) -> None:
        self.X, self.y = X, y
        self.rows = X.chunks[0]
        self.start, self.stop, self.n_total = start, stop, n_total
        self.pos = start
        self.buf: list[tuple[np.ndarray, np.ndarray | None]] = []
        self.n = 0
        self.fragments: list[tuple[int, np.ndarray, np.ndarray | None]] = []

    def append(self, X: np.ndarray, y: np.ndarray | None) -> None:
        if X.shape[0]:
            self.buf.append((X, y))
            self.n += X.shape[0]
        while self.n:
            c0 = self.pos // self.rows * self.rows
            c1 = min(c0 + self.rows, self.n_total)
            end = min(c1, self.stop)
            if self.pos + self.n < end:
                return  # the rest of this chunk is still to come
            Xb = np.concatenate([b[0] for b in self.buf]) if len(self.buf) > 1 else self.buf[0][0]
            yb = None
            if self.y is not None:
                yb = np.concatenate([b[1] for b in self.buf]) if len(self.buf) > 1 else self.buf[0][1]
            k = end - self.pos
            if self.pos == c0 and end == c1:
                self.X[c0:c1] = Xb[:k]
                if yb is not None:
                    self.y[c0:c1] = yb[:k]
            else:  # a chunk shared with the neighbouring piece: its rows go to the client
                self.fragments.append((self.pos, Xb[:k].copy(), None if yb is None else yb[:k].copy()))
            self.pos += k
            self.n -= k
            self.buf = [(Xb[k:], None if yb is None else yb[k:])] if self.n else []
        self.buf = [(owned(b), owned(c)) for b, c in self.buf]  # the caller's block may be a reused buffer


def _write_piece(piece: Piece, frames_of: Callable[[Piece], Frames], opts: _TableOptions, str_columns: set[str],
                 schema: _TableSchema, check: _BlockCheck, run: _Run, X: zarr.Array, y: zarr.Array | None,
                 start: int, stop: int, n_total: int) -> tuple[list[_BlockStats], list]:
    sink = _Sink(X, y, start, stop, n_total)
    stats = []
    for Xb, yb, dropped in _encoded(piece, frames_of, opts, str_columns, schema, check, run):
        stats.append(check.stats(Xb, yb, dropped))
        sink.append(Xb, yb)
    if sink.pos != stop:
        raise RuntimeError(f"piece {piece.index} wrote rows {start}:{sink.pos}, expected {start}:{stop}")
    return stats, sink.fragments


# ---- the client's side ----


def _merge_scans(scans: Iterator[_Scan | None], opts: _TableOptions, progress: _Progress) -> _Scan:
    """The scan of the whole source from its pieces' scans, in source order (as one serial scan)."""
    total: _Scan | None = None
    for s in scans:
        if s is None:
            continue
        progress.update(s.n_rows)
        if total is None:
            total = _Scan(columns=s.columns, target=s.target)
        elif s.columns != total.columns:
            raise ValueError(f"columns changed between chunks: {s.columns} != {total.columns}")
        total.n_rows += s.n_rows
        total.numeric_seen |= s.numeric_seen
        total.text_seen |= s.text_seen
        total.bool_seen |= s.bool_seen
        for c, k in s.n_missing.items():
            total.n_missing[c] = total.n_missing.get(c, 0) + k
        for mine, theirs in ((total.first_bad, s.first_bad), (total.first_text, s.first_text)):
            for c, v in theirs.items():
                mine.setdefault(c, v)
        if total.target_first_missing is None:
            total.target_first_missing = s.target_first_missing
        for c, lv in s.levels.items():
            _add_levels(total, c, lv, opts.max_levels, "classes" if c == total.target else "levels")
    progress.close()
    if total is None or total.n_rows == 0:
        raise ValueError("the source has no data rows")
    return total


def _write_fragments(pending: dict[int, list], X: zarr.Array, y: zarr.Array | None, n_total: int, final: bool) -> None:
    """Write every shared chunk whose rows have all arrived (all of them when ``final``)."""
    rows = X.chunks[0]
    for c in sorted(pending):
        parts = sorted(pending[c], key=lambda f: f[0])
        c0, c1 = c * rows, min((c + 1) * rows, n_total)
        if sum(f[1].shape[0] for f in parts) < c1 - c0:
            if final:
                raise RuntimeError(f"rows of zarr chunk {c} are missing after the write pass")
            continue
        X[c0:c1] = np.concatenate([f[1] for f in parts])
        if y is not None:
            y[c0:c1] = np.concatenate([f[2] for f in parts])
        del pending[c]


def ingest_table_parallel(
    client: Any,
    path: Path,
    fmt: str,
    tmp: Any,
    opts: _TableOptions,
    *,
    chunk_rows: int,
    n_rows: int | None,
    read_kw: Mapping[str, Any] | None,
    progress: bool | Callable[[str, int], Any],
    attrs: dict[str, Any],
    options: Options,
) -> dict[str, Any] | None:
    """Ingest a CSV or Parquet table on the workers into ``tmp``; None where it must run serially.

    ``options`` are the runtime options :func:`dxrf.ingest` resolved (sizes of
    pieces and of the workers' cache of parsed pieces).

    None is returned before anything is written: the workers cannot read the
    file, or its lines are not its records (CSV).
    """
    with tempfile.TemporaryDirectory(prefix="dxrf-ingest-") as work:
        if fmt == "csv":
            kw = dict(read_kw or {})
            header = kw.get("header") == 0
            if "names" in kw:
                columns = list(kw["names"])
            else:
                probe = {k: v for k, v in kw.items() if k not in ("dtype", "converters")}
                columns = [str(c) for c in pd.read_csv(path, nrows=0, **probe).columns]
            if compression_of(path):
                data = Path(work) / "source.csv"
                probe = Path(work) / "probe"
                probe.write_text(uuid.uuid4().hex)  # the workers must see this folder
            else:
                data = probe = path
            if not _workers_see(client, probe):
                return None
            chunks = iter_csv_chunks(path, header=header, chunk_rows=chunk_rows, n_rows=n_rows,
                                     copy_to=None if data == path else data)
            pieces = group_pieces(chunks, _piece_bytes(client, source_bytes(path), options))
            frames_of = functools.partial(_csv_frames_of, str(data), chunk_rows, tuple(columns), kw)
        else:
            data = path
            total_bytes = path.stat().st_size
            per_row = total_bytes / max(1, _parquet_rows(path))
            piece_rows = int(_piece_bytes(client, total_bytes, options) / max(per_row, 1e-9))
            pieces = parquet_pieces(path, chunk_rows=chunk_rows, n_rows=n_rows, piece_rows=piece_rows)
            if not pieces:
                return None
            frames_of = functools.partial(_parquet_frames_of, str(data), chunk_rows)
            if not _workers_see(client, data):
                return None
        try:
            return _run(client, pieces, frames_of, tmp, opts, chunk_rows=chunk_rows, progress=progress, attrs=attrs,
                        options=options)
        except NotSplittable:
            return None


def _csv_frames_of(path: str, chunk_rows: int, columns: tuple[str, ...], kw: Mapping[str, Any], piece: Piece) -> Frames:
    return csv_piece_frames(path, piece, chunk_rows=chunk_rows, columns=columns, read_kw=kw)


def _parquet_frames_of(path: str, chunk_rows: int, piece: Piece) -> Frames:
    return parquet_piece_frames(path, piece, chunk_rows=chunk_rows)


def _parquet_rows(path: Path) -> int:
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as pf:
        return pf.metadata.num_rows


def _run(client: Any, pieces: Iterable[Piece], frames_of: Callable[[Piece], Frames], tmp: Any, opts: _TableOptions, *,
         chunk_rows: int, progress: bool | Callable[[str, int], Any], attrs: dict[str, Any],
         options: Options) -> dict[str, Any]:
    run = _Run(uuid.uuid4().hex, options.ingest_cache_bytes)
    try:
        return _run_cached(client, pieces, frames_of, tmp, opts, run, chunk_rows=chunk_rows, progress=progress,
                           attrs=attrs)
    finally:
        client.run(_forget_parsed, run)


def _run_cached(client: Any, pieces: Iterable[Piece], frames_of: Callable[[Piece], Frames], tmp: Any,
                opts: _TableOptions, run: _Run, *, chunk_rows: int, progress: bool | Callable[[str, int], Any],
                attrs: dict[str, Any]) -> dict[str, Any]:
    str_columns = table_str_columns(opts)
    submitted: list[Piece] = []
    scanned = list(_ordered(client, _scan_piece, pieces, (frames_of, opts, str_columns, run), submitted=submitted))
    pieces = submitted
    if not pieces:
        raise NotSplittable("no data rows")  # the serial ingest says so
    scans, where = [s for s, _ in scanned], [w for _, w in scanned]
    scan = _merge_scans(iter(scans), opts, _Progress(progress, "scanning"))
    mixed = (scan.text_seen & (scan.numeric_seen | scan.bool_seen)) - str_columns
    if mixed:  # as serially: such columns are read again as text
        client.run(_forget_parsed, run)
        str_columns |= mixed
        scanned = list(_ordered(client, _scan_piece, pieces, (frames_of, opts, str_columns, run)))
        scans, where = [s for s, _ in scanned], [w for _, w in scanned]
        scan = _merge_scans(iter(scans), opts, _Progress(progress, "scanning"))
    schema = _build_schema(scan, opts, str_columns)
    _check_nan_policy_table(scan, schema, opts)
    d = len(schema.columns)
    _check_table_memory(schema, chunk_rows)  # the client writes the shared chunks
    _check_table_memory(schema, chunk_rows, worker_memory_limit())  # a task encodes one read chunk
    check = _BlockCheck(tuple(schema.columns), schema.task, len(schema.classes or ()), schema.target, opts.nan_policy)
    args = (frames_of, opts, str_columns, schema, check, run)
    if opts.nan_policy == "error":  # every row is kept, or the ingest fails
        kept = [0 if s is None else s.n_rows for s in scans]
    else:
        counts = list(_ordered(client, _count_piece, pieces, args, where=where))
        kept = [k for k, _ in counts]
        if sum(kept) == 0:
            raise ValueError(no_rows_message(sum(dropped for _, dropped in counts)))
    n_total = int(sum(kept))
    group = zarr.open_group(zarr_target(tmp), mode="w", zarr_format=3)
    X, y = create_arrays(group, d, chunk_rows=chunk_rows, task=schema.task, n_rows=n_total)
    starts = np.concatenate(([0], np.cumsum(kept))).astype(int)
    totals = _Totals(check)
    pending: dict[int, list] = {}
    bar = _Progress(progress, "writing")
    def place(i: int) -> tuple:
        return X, y, int(starts[i]), int(starts[i + 1]), n_total

    for stats, fragments in _ordered(client, _write_piece, pieces, args, place, where=where):
        for b in stats:
            totals.add(b)
            bar.update(b.n)
        for frag in fragments:
            pending.setdefault(frag[0] // chunk_rows, []).append(frag)
        _write_fragments(pending, X, y, n_total, final=False)
    _write_fragments(pending, X, y, n_total, final=True)
    bar.close()
    attrs = dict(attrs)
    attrs["levels"] = schema.levels
    attrs["missing_level"] = opts.missing_level
    if schema.classes is not None:
        attrs["classes"] = schema.classes
    return totals.finish(group, check, chunk_rows, attrs)
