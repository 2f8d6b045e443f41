"""Runtime knobs gathered in one place.

Numeric results never depend on these settings (up to float rounding of sums);
they only trade speed against memory.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np

from dxrf.core.validation import check_int, check_progress

__all__ = ["Options", "get_options", "options", "resolve_options", "set_options"]


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
    ingest_piece_bytes : int or None
        Bytes of source per task of a parallel ingest (rounded to whole read
        chunks, at least one). ``None``: about eight pieces per worker thread,
        each under 1/16 of a worker's memory limit.
    ingest_cache_bytes : int or None
        Bytes of parsed source a worker keeps from a parallel ingest's scan
        for its write pass (a piece beyond it is parsed again; 0: none kept).
        ``None``: 1/8 of the worker's memory limit.
    cache_features : {"auto", True, False}
        Whether an iterative fit (logistic, multinomial, SGD epochs, RF-PCA
        power iterations) keeps its features between passes
        (:mod:`dxrf.engine.cache`): ``"auto"`` keeps them when the whole
        feature matrix fits within ``cache_fraction`` of the memory that
        would hold it (the workers' memory limits, or this machine's).
        Results are bitwise the same either way.
    cache_fraction : float
        The share of that memory the feature cache may take under ``"auto"``.
    """

    tile_bytes: int = 160 * 2**20
    min_tile_rows: int = 256
    max_tile_rows: int = 10_000
    blas_threads: int | None = 1
    split_every: int = 8
    progress: bool | None = False
    ingest_piece_bytes: int | None = None
    ingest_cache_bytes: int | None = None
    cache_features: str | bool = "auto"
    cache_fraction: float = 1 / 3

    def __setattr__(self, name: str, value: Any) -> None:
        # also an assignment to the live object of get_options() is checked:
        # split_every=1 would loop forever, tile_bytes=0 divide by zero
        check = _CHECKS.get(name)
        if check is None:
            raise AttributeError(f"unknown dxrf option {name!r}; the options are {sorted(_CHECKS)}")
        value = check(value)
        bounds = {k: vars(self).get(k) for k in ("min_tile_rows", "max_tile_rows")} | {name: value}
        if None not in bounds.values() and name in bounds:
            _check_tile_bounds(bounds["min_tile_rows"], bounds["max_tile_rows"])
        object.__setattr__(self, name, value)

    def replace(self, **overrides: Any) -> Options:
        """A checked copy with ``overrides`` applied; an override of None keeps the current value.

        None means "not given" here, as for the per-call keywords of the
        public functions (``progress=None`` is the default of ``accumulate``),
        so an option cannot be reset to None this way: use :func:`options`.

        Raises
        ------
        ValueError
            An unknown option, or values that fail the checks of :func:`options`.
        TypeError
            A value of the wrong type.
        """
        return _changed(self, {k: v for k, v in overrides.items() if v is not None})


def _option_int(name: str, low: int, allow_none: bool = False) -> Any:
    def check(value: object) -> int | None:
        return check_int(value, f"option {name}", low=low, allow_none=allow_none)

    return check


#: the values of ``cache_features`` (the option and the estimators' parameter)
CACHE_SETTINGS = ("auto", True, False)


def _check_cache_features(value: object) -> str | bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if value == "auto":
        return "auto"
    raise ValueError(f"option cache_features must be 'auto', True or False, got {value!r}")


def _check_fraction(value: object) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"option cache_fraction must be a number in (0, 1], got {value!r}")
    value = float(value)
    if not 0.0 < value <= 1.0:
        raise ValueError(f"option cache_fraction must be in (0, 1], got {value!r}")
    return value


_CHECKS = {
    "tile_bytes": _option_int("tile_bytes", 1),
    "min_tile_rows": _option_int("min_tile_rows", 1),
    "max_tile_rows": _option_int("max_tile_rows", 1),
    "blas_threads": _option_int("blas_threads", 1, allow_none=True),
    # a fan-in below 2 never shrinks the reduction
    "split_every": _option_int("split_every", 2),
    "progress": lambda value: check_progress(value, "option progress"),
    "ingest_piece_bytes": _option_int("ingest_piece_bytes", 1, allow_none=True),
    "ingest_cache_bytes": _option_int("ingest_cache_bytes", 0, allow_none=True),
    "cache_features": _check_cache_features,
    "cache_fraction": _check_fraction,
}


def _check_tile_bounds(low: int, high: int) -> None:
    if low > high:
        raise ValueError(f"option min_tile_rows ({low}) exceeds max_tile_rows ({high})")


def _validated(opts: Options) -> Options:
    """``opts`` after checking the fields together (each is checked when it is set)."""
    _check_tile_bounds(opts.min_tile_rows, opts.max_tile_rows)
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


def resolve_options(options: Options | None = None, **overrides: Any) -> Options:
    """The options of one call of a public function, resolved once at its top.

    Internal functions take the result as an explicit argument and never read
    the global options, so a pass runs with the options its caller resolved,
    whatever happens to the global ones meanwhile.

    Parameters
    ----------
    options : Options, optional
        Options resolved by a caller (an estimator's ``fit`` handing them to
        ``accumulate``); default: :func:`get_options`, the global options with
        any :func:`options` context active now.
    **overrides
        The call's keywords that are options (``progress=``,
        ``split_every=`` ...); None keeps the resolved value.

    Returns
    -------
    Options
        A new object: later changes of the global options do not reach it.
    """
    base = get_options() if options is None else options
    if not isinstance(base, Options):
        raise TypeError(f"options must be a dxrf Options object or None, got {type(base).__name__}")
    return base.replace(**overrides)


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
