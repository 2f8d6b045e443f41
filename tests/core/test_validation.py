"""The shared validators: one message naming the parameter, TypeError for types, ValueError for values."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

from dxrf.core.validation import (
    ParameterTypeError,
    check_bool,
    check_choice,
    check_fraction,
    check_int,
    check_nonnegative,
    check_positive_float,
    check_positive_int,
    check_subset,
    check_X,
    is_integer,
)


def test_parameter_type_error_is_both_type_and_value_error():
    assert issubclass(ParameterTypeError, TypeError) and issubclass(ParameterTypeError, ValueError)


def test_is_integer():
    assert is_integer(3) and is_integer(np.int32(3))
    assert not is_integer(True) and not is_integer(3.0) and not is_integer("3")


@pytest.mark.parametrize("bad", [1.5, "2", True, None])
def test_int_checks_reject_other_types(bad):
    with pytest.raises(ParameterTypeError, match=r"^n must be a positive integer, got "):
        check_positive_int(bad, "n")


def test_int_checks_values_and_bounds():
    assert check_positive_int(np.int64(4), "n") == 4 and type(check_positive_int(np.int64(4), "n")) is int
    assert check_positive_int(None, "n", allow_none=True) is None
    with pytest.raises(ValueError, match=r"^n must be a positive integer, got 0$") as info:
        check_positive_int(0, "n")
    assert not isinstance(info.value, TypeError)
    with pytest.raises(ValueError, match=r"^n must be a positive integer or None, got -1$"):
        check_positive_int(-1, "n", allow_none=True)
    with pytest.raises(ValueError, match=r"^k must be an integer >= 2, got 1$"):
        check_int(1, "k", low=2)
    with pytest.raises(ValueError, match=r"^k must be an integer in 0\.\.9, got 10$"):
        check_int(10, "k", low=0, high=9)
    assert check_int(0, "k", low=0, high=9) == 0


def test_real_checks():
    assert check_positive_float(np.float32(0.5), "rho") == 0.5
    for bad in (0, -1.0, np.inf, np.nan):
        with pytest.raises(ValueError, match=r"^rho must be a positive finite number, got "):
            check_positive_float(bad, "rho")
    for bad in ("1", True, None):
        with pytest.raises(ParameterTypeError, match="rho"):
            check_positive_float(bad, "rho")
    assert check_nonnegative(0, "alpha") == 0.0
    with pytest.raises(ValueError, match=r"^alpha must be a non-negative number, got -1e-09$"):
        check_nonnegative(-1e-9, "alpha")
    with pytest.raises(ValueError, match="alpha"):
        check_nonnegative(np.inf, "alpha")
    assert check_nonnegative(np.inf, "tol", finite=False) == np.inf
    assert check_fraction(0.25, "validation") == 0.25
    for bad in (0, 1, 1.5):
        with pytest.raises(ValueError, match=r"^validation must be a fraction in \(0, 1\), got "):
            check_fraction(bad, "validation")


def test_bool_and_choice():
    assert check_bool(np.bool_(True), "shuffle") is True
    for bad in (1, "yes", None):
        with pytest.raises(ParameterTypeError, match=r"^shuffle must be True or False, got "):
            check_bool(bad, "shuffle")
    assert check_choice("top", "method", ("sample", "top")) == "top"
    with pytest.raises(ValueError, match=r"^method must be one of \('sample', 'top'\), got 'best'$"):
        check_choice("best", "method", ("sample", "top"))


def test_check_subset():
    index, scales = check_subset([2, 0, 2], None, 3)
    assert index.dtype == np.intp and np.array_equal(scales, np.ones(3))
    with pytest.raises(ValueError, match="index out of range for 3 features"):
        check_subset([3], None, 3)
    with pytest.raises(ValueError, match="index out of range"):
        check_subset([-1], None, 3)
    with pytest.raises(ValueError, match="non-empty 1-d"):
        check_subset([], None, 3)
    with pytest.raises(ValueError, match="scales has shape"):
        check_subset([0, 1], [1.0], 3)


class _Estimator:
    """The least an object needs for check_X: scikit-learn's n_features_in_ bookkeeping."""

    def __sklearn_tags__(self):
        from sklearn.base import BaseEstimator

        return BaseEstimator().__sklearn_tags__()


def test_check_X_numpy_and_dask_agree_on_n_features():
    X = np.arange(12.0).reshape(4, 3)
    for Xi in (X, da.from_array(X, chunks=(2, 3))):
        est = _Estimator()
        out = check_X(est, Xi, reset=True)
        assert est.n_features_in_ == 3 and out.shape == (4, 3)
        with pytest.raises(ValueError, match="features"):
            check_X(est, Xi[:, :2], reset=False)
