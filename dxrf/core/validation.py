"""Input checks shared by the estimators and the pass."""

from __future__ import annotations

import dataclasses
import numbers
import warnings
from collections.abc import Callable, Mapping

import dask.array as da
import numpy as np
from sklearn.utils.validation import validate_data

from dxrf.core.device import array_module, to_host

__all__ = [
    "ParameterTypeError",
    "is_dask",
    "is_integer",
    "make_rng",
    "check_X",
    "check_bool",
    "check_choice",
    "check_dask_matrix",
    "check_finite_rows",
    "check_float_dtype",
    "check_fraction",
    "check_int",
    "check_nonnegative",
    "check_positive_float",
    "check_pass_options",
    "check_not_sparse",
    "check_positive_int",
    "check_progress",
    "check_seed",
    "check_subset",
    "Rule",
    "rule",
    "check_parameters",
]


class ParameterTypeError(TypeError, ValueError):
    """A parameter of the wrong type.

    A ``TypeError``, and also a ``ValueError`` (as scikit-learn's own
    ``InvalidParameterError`` is): scikit-learn's convention is a
    ``ValueError`` for any bad estimator parameter, so callers catching
    either keep working.
    """


def is_dask(X: object) -> bool:
    return isinstance(X, da.Array)


def is_integer(value: object) -> bool:
    """True for a Python or NumPy integer, False for ``bool`` (which is one to Python)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


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


def check_not_sparse(X: object, name: str = "X") -> None:
    """Refuse a SciPy sparse matrix (or a dask array of them) with how to convert it.

    ``np.asarray`` would wrap it in a 0-d object array, reported later as
    "got shape ()".
    """
    import scipy.sparse as sp

    meta = getattr(X, "_meta", None) if is_dask(X) else None
    if sp.issparse(X) or sp.issparse(meta):
        raise TypeError(
            f"{name} is a SciPy sparse matrix; dxrf's passes need dense rows: convert it with {name}.toarray() "
            f"when it fits in memory, or per block (dask.array.from_array({name}, chunks=(rows, -1))"
            f".map_blocks(lambda b: b.toarray())), or ingest a LibSVM file with dxrf.io.ingest"
        )


def make_rng(random_state: object) -> np.random.Generator:
    """A ``numpy.random.Generator`` from a scikit-learn style ``random_state``.

    An int always gives the same stream; a ``RandomState`` is consumed once to
    seed the generator; a ``Generator`` is used as it is.
    """
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, (bool, np.bool_)):
        raise ParameterTypeError(f"random_state must be None, an int, a RandomState or a Generator, got {random_state!r}")
    if random_state is None or isinstance(random_state, numbers.Integral):
        if random_state is not None and random_state < 0:
            raise ValueError(f"random_state must be a non-negative integer (or None, a RandomState, a Generator), got {random_state}")
        return np.random.default_rng(None if random_state is None else int(random_state))
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1, size=4))
    raise TypeError(f"random_state must be None, an int, a RandomState or a Generator, got {type(random_state).__name__}")


def check_float_dtype(dtype: object, name: str = "dtype") -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise ParameterTypeError(f"{name} must be float32 or float64, got {dtype!r}") from exc
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"{name} must be float32 or float64, got {dt}")
    return dt


def check_int(
    value: object, name: str, *, low: int = 1, high: int | None = None, allow_none: bool = False, what: str | None = None
) -> int | None:
    """``value`` as an ``int`` in ``[low, high]`` (``high=None``: no upper bound).

    Raises :class:`ParameterTypeError` for a non-integer (``bool`` included)
    and ``ValueError`` for one out of range, both reading
    ``"{name} must be {what}, got ..."``. ``what`` defaults to a phrase made
    from the bounds; ``allow_none`` passes ``None`` through.
    """
    if what is None:
        if high is not None:
            what = f"an integer in {low}..{high}"
        else:
            what = "a positive integer" if low == 1 else f"an integer >= {low}"
        if allow_none:
            what += " or None"
    if value is None and allow_none:
        return None
    if not is_integer(value):
        raise ParameterTypeError(f"{name} must be {what}, got {value!r}")
    if value < low or (high is not None and value > high):
        raise ValueError(f"{name} must be {what}, got {value}")
    return int(value)


#: seeds of the hashed splits and folds: they are hashed as unsigned 64-bit integers
SEED_MAX = 2**64 - 1


def check_seed(value: object, name: str) -> int:
    """``value`` as a seed of a hashed split: an ``int`` in ``0 .. 2**64 - 1`` (see :func:`check_int`)."""
    return check_int(value, name, low=0, high=SEED_MAX, what="an integer in 0..2**64-1")


def check_progress(value: object, name: str = "progress") -> bool | None:
    """``value`` as a progress switch: True, False or None (NumPy booleans pass)."""
    if value is None:
        return None
    if not isinstance(value, (bool, np.bool_)):
        raise ParameterTypeError(f"{name} must be True, False or None, got {value!r}")
    return bool(value)


def check_pass_options(
    *, split_every: object = None, lanes: object = None, progress: object = None, tile_rows: object = None
) -> tuple[int | None, int | None, bool | None, int | None]:
    """The runtime knobs of a pass, checked before any work: ``(split_every, lanes, progress, tile_rows)``.

    ``split_every`` (the fan-in of the reduction) must be at least 2, since a
    fan-in of 1 never shrinks the reduction; ``lanes`` and ``tile_rows`` are
    positive; each may be None (its default).
    """
    return (
        check_int(split_every, "split_every", low=2, allow_none=True, what="an integer of at least 2 or None"),
        check_int(lanes, "lanes", allow_none=True),
        check_progress(progress),
        check_int(tile_rows, "tile_rows", allow_none=True),
    )


def check_positive_int(value: object, name: str, *, allow_none: bool = False, what: str | None = None) -> int | None:
    """``value`` as a positive ``int`` (see :func:`check_int`)."""
    return check_int(value, name, low=1, allow_none=allow_none, what=what)


def _check_real(value: object, name: str, what: str, ok: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterTypeError(f"{name} must be {what}, got {value!r}")
    if not ok:
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return float(value)


def check_positive_float(value: object, name: str, *, what: str = "a positive finite number") -> float:
    """``value`` as a finite ``float > 0``.

    Raises :class:`ParameterTypeError` for a non-number (``bool`` included)
    and ``ValueError`` otherwise, both reading ``"{name} must be {what}, got ..."``.
    """
    ok = isinstance(value, numbers.Real) and bool(np.isfinite(value)) and value > 0
    return _check_real(value, name, what, ok)


def check_nonnegative(
    value: object, name: str, *, finite: bool = True, what: str = "a non-negative number"
) -> float:
    """``value`` as a ``float >= 0``, finite unless ``finite=False`` (see :func:`check_positive_float`)."""
    ok = isinstance(value, numbers.Real) and value >= 0 and (not finite or bool(np.isfinite(value)))
    return _check_real(value, name, what, ok)


def check_fraction(value: object, name: str, *, what: str = "a fraction in (0, 1)") -> float:
    """``value`` as a ``float`` strictly between 0 and 1 (see :func:`check_positive_float`)."""
    ok = isinstance(value, numbers.Real) and 0 < value < 1
    return _check_real(value, name, what, ok)


def check_bool(value: object, name: str) -> bool:
    """``value`` as a ``bool``; NumPy booleans pass, and nothing else (not 0 or 1)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ParameterTypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_choice(value: object, name: str, choices: tuple) -> object:
    """``value`` if it is one of ``choices``, else ``ValueError`` listing them."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def check_subset(index: object, scales: object, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A selection of columns ``index`` (repetitions allowed) of ``n``, and its scales.

    Returns ``index`` as a 1-d ``intp`` array and ``scales`` as float64 of the
    same shape (ones when ``scales`` is None), the checks of every ``subset``
    of features (kernels, statistics).
    """
    index = np.asarray(index, dtype=np.intp)
    if index.ndim != 1 or index.size == 0:
        raise ValueError("index must be a non-empty 1-d array of feature indices")
    if index.min() < 0 or index.max() >= n:
        raise ValueError(f"index out of range for {n} features")
    s = np.ones(index.size) if scales is None else np.asarray(scales, dtype=np.float64)
    if s.shape != index.shape:
        raise ValueError(f"scales has shape {s.shape}; expected {index.shape}")
    return index, s


def check_X(estimator: object, X: object, *, reset: bool) -> np.ndarray | da.Array:
    """``X`` checked for ``estimator``: a dask matrix lazily, anything else by scikit-learn.

    Dask input goes through :func:`check_dask_matrix` (nothing computed) and
    sets or checks ``estimator.n_features_in_`` as scikit-learn's
    ``validate_data`` does for NumPy input, which becomes float64 or float32.
    """
    check_not_sparse(X)
    if is_dask(X):
        X = check_dask_matrix(X, n_features=None if reset else estimator.n_features_in_)
        if reset:
            estimator.n_features_in_ = X.shape[1]
        return X
    # finiteness is checked here rather than by scikit-learn, so that NumPy and
    # dask input (checked per task by the engine) get the same message
    X = validate_data(estimator, X, reset=reset, dtype=[np.float64, np.float32], accept_sparse=False,
                      ensure_all_finite=False)
    check_finite_rows(X, "X")
    return X


def check_dask_matrix(X: da.Array, name: str = "X", n_features: int | None = None) -> da.Array:
    """Check a lazy 2-d dask array and give it one chunk along the columns.

    Nothing is computed. A matrix split along its columns is rechunked with a
    warning: the feature kernels need whole rows, and silently rechunking inside
    every pass would hide a costly shuffle.
    """
    check_not_sparse(X, name)
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


@dataclasses.dataclass(frozen=True)
class Rule:
    """How one estimator parameter is checked: ``check(value, name, **options)``.

    ``passes`` holds values accepted as they are (e.g. ``"auto"``); ``named=False``
    calls ``check(value)`` for checks that name their parameter themselves.
    """

    check: Callable[..., object]
    options: Mapping[str, object] = dataclasses.field(default_factory=dict)
    passes: tuple = ()
    named: bool = True

    def __call__(self, value: object, name: str) -> object:
        if any(value is p or (isinstance(value, str) and value == p) for p in self.passes):
            return value
        return self.check(value, name, **self.options) if self.named else self.check(value)


def rule(check: Callable[..., object], *, passes: tuple = (), named: bool = True, **options: object) -> Rule:
    """A :class:`Rule`: ``rule(check_choice, choices=("a", "b"))`` checks ``check_choice(value, name, choices=...)``."""
    return Rule(check, options, passes, named)


def check_parameters(estimator: object, rules: Mapping[str, Rule]) -> dict[str, object]:
    """Check each parameter of ``estimator`` named in ``rules`` once, in the table's order.

    The estimators declare one table per class (the role of scikit-learn's
    ``_parameter_constraints``), so a parameter is checked in one place, with
    one message, whichever method needs it. Returns the checked values by name.
    """
    return {name: check(getattr(estimator, name), name) for name, check in rules.items()}
