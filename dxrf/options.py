"""Runtime knobs gathered in one place.

Numeric results never depend on these settings (up to float rounding of sums);
they only trade speed against memory.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

from ._validation import check_int

__all__ = ["Options", "get_options", "options"]


@dataclasses.dataclass
class Options:
    """Runtime options of dxrf.

    Attributes
    ----------
    tile_bytes : int
        Size of the feature buffer one task fills at a time. A row chunk is cut
        into tiles of ``tile_bytes // (M * itemsize)`` rows (at most
        ``max_tile_rows``) so that a task's memory stays bounded whatever the
        chunk size. Each tile's Gram costs one compensated add of ``M^2 / 2``
        sums, so tiles of fewer rows spend more of the pass on adds: at
        ``M = 4000`` the default keeps 10 000 rows (4.5% of a 5 000-row tile
        went to the add).
    min_tile_rows : int
        Lower bound on rows per tile, so that the rank-k update stays BLAS-3
        efficient even for very wide feature maps.
    max_tile_rows : int
        Upper bound on rows per tile. Tiles follow a global grid of row
        indices; a tile cut by a chunk boundary travels as rows of X to a
        fix-up task, so tiles must stay well below the chunk size.
    blas_threads : int or None
        BLAS threads inside one task of a pass. Dask already runs tasks in
        parallel, and two levels of threads oversubscribe the cores (measured
        about 1.5x slower), so the default is 1. ``None`` leaves BLAS alone.
    split_every : int
        Fan-in of the tree reduction of partial statistics.
    progress : bool or None
        Show a progress bar on every pass. ``None`` shows one only when
        attached to a terminal.
    """

    tile_bytes: int = 160 * 2**20
    min_tile_rows: int = 256
    max_tile_rows: int = 10_000
    blas_threads: int | None = 1
    split_every: int = 8
    progress: bool | None = False


def _check_int(name: str, value: object, low: int) -> None:
    check_int(value, f"option {name}", low=low)


def _validated(opts: Options) -> Options:
    """``opts`` after checking every field; raise TypeError/ValueError naming the option."""
    _check_int("tile_bytes", opts.tile_bytes, 1)
    _check_int("min_tile_rows", opts.min_tile_rows, 1)
    _check_int("max_tile_rows", opts.max_tile_rows, 1)
    if opts.min_tile_rows > opts.max_tile_rows:
        raise ValueError(f"option min_tile_rows ({opts.min_tile_rows}) exceeds max_tile_rows ({opts.max_tile_rows})")
    if opts.blas_threads is not None:
        _check_int("blas_threads", opts.blas_threads, 1)
    # a fan-in below 2 never shrinks the reduction
    _check_int("split_every", opts.split_every, 2)
    if opts.progress is not None and not isinstance(opts.progress, bool):
        raise TypeError(f"option progress must be True, False or None, got {opts.progress!r}")
    return opts


def _changed(base: Options, changes: dict) -> Options:
    unknown = set(changes) - {f.name for f in dataclasses.fields(Options)}
    if unknown:
        raise ValueError(f"unknown dxrf option(s): {sorted(unknown)}")
    return _validated(dataclasses.replace(base, **changes))


_OPTIONS = Options()


def get_options() -> Options:
    """Return the current options (a live object; use :func:`options` to change)."""
    return _OPTIONS


@contextlib.contextmanager
def options(**changes: Any) -> Iterator[Options]:
    """Temporarily change runtime options.

    Examples
    --------
    >>> import dxrf
    >>> with dxrf.options(tile_bytes=2**24):
    ...     pass
    """
    global _OPTIONS
    previous = _OPTIONS
    _OPTIONS = _changed(previous, changes)
    try:
        yield _OPTIONS
    finally:
        _OPTIONS = previous


def set_options(**changes: Any) -> None:
    """Change runtime options for the rest of the process."""
    global _OPTIONS
    _OPTIONS = _changed(_OPTIONS, changes)
