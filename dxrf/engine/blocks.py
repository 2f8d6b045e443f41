"""Row blocks of a pass: their global starts, the columns aligned with them, and tile grids.

A pass sees its input as consecutive blocks of rows. Every per-block
function is told where its rows sit in the whole array (:class:`Rows`), so
anything that must not depend on chunking (tile grids, hashed splits,
Hessian row samples) is defined on global row indices.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Sequence

import dask.array as da
import numpy as np

from dxrf.core.validation import is_dask

__all__ = ["Rows", "row_starts", "aligned_blocks", "tile_grid", "cut_tiles", "in_process_starts"]


def row_starts(chunks: Sequence[int]) -> list[int]:
    """Global index of the first row of each chunk."""
    return [0] + [int(s) for s in np.cumsum(chunks)[:-1]]


@dataclasses.dataclass(frozen=True)
class Rows:
    """Where a block's rows sit: ``[start, stop)`` of ``total`` rows, and its place ``index`` among the blocks."""

    start: int
    stop: int
    total: int
    index: int = 0

    def tiles(self, tile_rows: int) -> Iterator[tuple[int, int, int, bool]]:
        """``(lo, hi, t, whole)`` for each global tile ``t`` meeting these rows.

        Tile ``t`` covers the global rows ``[t T, min((t+1) T, total))``;
        ``whole`` says whether this block holds all of it (otherwise its rows
        are a fragment, and the pass's fix-up joins the pieces).
        """
        for lo, hi in tile_grid(self.start, self.stop, tile_rows):
            t = lo // tile_rows
            yield lo, hi, t, lo == t * tile_rows and hi == min((t + 1) * tile_rows, self.total)


def tile_grid(start: int, stop: int, tile_rows: int) -> list[tuple[int, int]]:
    """The global tiles ``[t T, (t+1) T)`` intersected with the rows ``[start, stop)``."""
    if tile_rows < 1:  # the loop below would never end (or divide by zero)
        raise ValueError(f"tile_rows must be a positive integer, got {tile_rows}")
    out = []
    t = start // tile_rows
    while t * tile_rows < stop:
        out.append((max(start, t * tile_rows), min(stop, (t + 1) * tile_rows)))
        t += 1
    return out


def cut_tiles(chunks: Sequence[int], tile_rows: int) -> dict[int, list[int]]:
    """Tiles of the global grid cut by chunk boundaries, and the chunks holding their pieces."""
    total = int(sum(chunks))
    holders: dict[int, list[int]] = {}
    for i, (s, c) in enumerate(zip(row_starts(chunks), chunks)):
        for _, _, t, whole in Rows(s, s + int(c), total).tiles(tile_rows):
            if not whole:
                holders.setdefault(t, []).append(i)
    return holders


def in_process_starts(n: int, unit_rows: int, threads: int) -> tuple[list[int], int]:
    """Starts and size of at most ``threads`` blocks of whole units of rows covering ``n`` rows."""
    unit = max(1, int(unit_rows))
    threads = max(1, min(threads, -(-n // unit)))
    block = unit * -(-n // (unit * threads))
    return list(range(0, n, block)), block


def lcm_rows(grids: Sequence[int]) -> int:
    """Rows of the smallest block made of whole tiles of every grid."""
    return math.lcm(*grids) if grids else 1


def aligned_blocks(a: object, chunks: tuple[int, ...], name: str) -> list | None:
    """Delayed blocks of a per-row array aligned with X's row chunks (None passes through)."""
    if a is None:
        return None
    n = int(sum(chunks))
    if not is_dask(a):
        a = np.asarray(a)
        if a.ndim == 0 or a.shape[0] != n:
            raise ValueError(f"{name} has {a.shape[0] if a.ndim else 0} rows but X has {n}")
        a = da.from_array(a, chunks=(chunks,) + a.shape[1:], name=False)
    if a.shape[0] != n:
        raise ValueError(f"{name} has {a.shape[0]} rows but X has {n}")
    if a.ndim > 2:
        raise ValueError(f"{name} must be 1- or 2-dimensional, got shape {a.shape}")
    a = a.rechunk((chunks,) + tuple(-1 for _ in a.shape[1:]))
    return list(a.to_delayed().ravel())
