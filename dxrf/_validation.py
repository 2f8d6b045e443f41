"""Input checks shared by the estimators and the pass."""

from __future__ import annotations

import numbers
import warnings

import dask.array as da
import numpy as np

from ._device import array_module, to_host

__all__ = [
    "is_dask",
    "make_rng",
    "check_dask_matrix",
    "check_finite_rows",
    "check_float_dtype",
    "check_positive_int",
]


def is_dask(X: object) -> bool:
    return isinstance(X, da.Array)


def check_finite_rows(A: np.ndarray, name: str, row_offset: int = 0) -> None:
    """Raise ``ValueError`` naming the first row of ``A`` with a NaN or infinity.

    Every pass checks every block, so the common case costs one sum over the
    block and no temporary: a NaN or infinity makes the sum non-finite. Only a
    non-finite sum (or one that overflowed from finite values) pays for the
    element-wise test that finds the row. ``row_offset`` is the block's first
    row in the whole array. ``A`` may be a CuPy array: the checks then run on
    the device and only the answer comes back.
    """
    xp = array_module(A)
    if A.dtype.kind not in "fc" or A.size == 0 or bool(xp.isfinite(A.sum())):
        return
    bad = ~xp.isfinite(A.reshape(A.shape[0], -1)).all(axis=1)
    if bool(bad.any()):
        first = int(to_host(xp.flatnonzero(bad))[0]) + row_offset
        raise ValueError(f"{name} contains NaN or infinity (first at row {first})")


def make_rng(random_state: object) -> np.random.Generator:
    """A ``numpy.random.Generator`` from a scikit-learn style ``random_state``.

    An int always gives the same stream; a ``RandomState`` is consumed once to
    seed the generator; a ``Generator`` is used as it is.
    """
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None or isinstance(random_state, numbers.Integral):
        return np.random.default_rng(None if random_state is None else int(random_state))
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1, size=4))
    raise TypeError(f"random_state must be None, an int, a RandomState or a Generator, got {type(random_state).__name__}")


def check_float_dtype(dtype: object, name: str = "dtype") -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"{name} must be float32 or float64, got {dtype!r}") from exc
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"{name} must be float32 or float64, got {dt}")
    return dt


def check_positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a positive integer, got {value!r}")
    if value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    return int(value)


def check_dask_matrix(X: da.Array, name: str = "X", n_features: int | None = None) -> da.Array:
    """Check a lazy 2-d dask array and give it one chunk along the columns.

    Nothing is computed. A matrix split along its columns is rechunked with a
    warning: the feature kernels need whole rows, and silently rechunking inside
    every pass would hide a costly shuffle.
    """
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-dimensional, got {X.ndim} dimension(s) with shape {X.shape}")
    if not (np.issubdtype(X.dtype, np.floating) or np.issubdtype(X.dtype, np.integer) or X.dtype == bool):
        raise TypeError(f"{name} must hold numbers, got dtype {X.dtype}")
    if any(np.isnan(s) for s in X.shape):
        raise ValueError(f"{name} has unknown chunk sizes; call {name}.compute_chunk_sizes() first")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {X.shape})")
    if n_features is not None and X.shape[1] != n_features:
        raise ValueError(f"{name} has {X.shape[1]} features, but the model was fitted with {n_features}")
    if len(X.chunks[1]) > 1:
        warnings.warn(
            f"{name} is chunked along its columns ({len(X.chunks[1])} column chunks); rechunking to one "
            f"column chunk per row block. Store the data with all columns in one chunk "
            f"(e.g. X.rechunk({{1: -1}}) once, or dxrf.io.ingest) to avoid this.",
            stacklevel=3,
        )
        X = X.rechunk({1: -1})
    return X
