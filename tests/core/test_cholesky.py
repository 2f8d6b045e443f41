"""The blocked Cholesky factorisation against LAPACK, and its bits on any number of BLAS threads."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from threadpoolctl import threadpool_limits

from dxrf.core.cholesky import cholesky, cholesky_lower, lauum_lower


def _spd(m: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((m, m // 2 + 3))
    return A @ A.T + 1e-3 * m * np.eye(m)


@pytest.mark.parametrize("m, block", [(700, 64), (701, 100), (300, 512), (5, 1)])
def test_blocked_factor_equals_lapack(m, block):
    K = _spd(m)
    L, info = cholesky_lower(np.array(K, order="F"), block=block)
    assert info == 0
    ref = scipy.linalg.cholesky(K, lower=True)
    np.testing.assert_allclose(np.tril(L), ref, rtol=0, atol=1e-12 * np.abs(ref).max())


def test_the_factor_is_the_same_to_the_bit_on_one_and_two_blas_threads():
    K = _spd(900, 1)
    with threadpool_limits(1, user_api="blas"):
        one, _ = cholesky_lower(np.array(K, order="F"), block=128)
    with threadpool_limits(2, user_api="blas"):
        two, _ = cholesky_lower(np.array(K, order="F"), block=128)
    assert np.array_equal(np.tril(one), np.tril(two))


def test_a_matrix_that_is_not_positive_definite_stops_where_lapack_does():
    K = _spd(600, 2)
    K[400, 400] = -1.0  # the leading minor of order 401 is indefinite
    _, info = cholesky_lower(np.array(K, order="F"), block=64)
    _, ref = scipy.linalg.lapack.dpotrf(K, lower=1)
    assert info == ref == 401
    with pytest.raises(np.linalg.LinAlgError, match="order 401"):
        cholesky(K)


def test_clean_lower_and_upper_factors_like_scipy(monkeypatch):
    import dxrf.core.cholesky as module

    monkeypatch.setattr(module, "BLOCK", 64)  # several blocks, and the cleaning band by band
    K = _spd(400, 3)
    for lower in (True, False):
        got = cholesky(K, lower=lower)
        ref = scipy.linalg.cholesky(K, lower=lower)
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12 * np.abs(ref).max())
        assert not np.any(np.triu(got, 1) if lower else np.tril(got, -1))
    kept = np.array(K, order="F")
    cholesky(kept)  # not overwritten without overwrite_a
    assert np.array_equal(kept, K)


def test_only_the_named_triangle_is_read_as_in_scipy(monkeypatch):
    # LAPACK's lauum leaves T T^T in the upper triangle only (the PCG preconditioner)
    import dxrf.core.cholesky as module

    monkeypatch.setattr(module, "BLOCK", 64)
    K = _spd(300, 6)
    for lower, half in ((True, np.tril(K)), (False, np.triu(K))):
        ref = scipy.linalg.cholesky(K, lower=lower)
        np.testing.assert_allclose(cholesky(half, lower=lower), ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    upper_only = np.ascontiguousarray(np.triu(K))  # row-major: factored in place with overwrite_a
    got = cholesky(upper_only, lower=False, overwrite_a=True)
    np.testing.assert_allclose(got, scipy.linalg.cholesky(K), rtol=0, atol=1e-12 * np.abs(K).max())


@pytest.mark.parametrize("m, block", [(100, 64), (700, 64)])
def test_the_strict_upper_triangle_is_left_as_it_was(m, block):
    # the CG preconditioner keeps one factor's transpose there while the other is factored below
    K = _spd(m, 7)
    A = np.array(K, order="F")
    marker = np.random.default_rng(8).standard_normal((m, m))
    upper = np.triu_indices(m, 1)
    A[upper] = marker[upper]
    L, info = cholesky_lower(A, block=block)
    assert info == 0 and L is A
    assert np.array_equal(A[upper], marker[upper])
    np.testing.assert_allclose(np.tril(A), scipy.linalg.cholesky(K, lower=True), rtol=0, atol=1e-12 * np.abs(K).max())


@pytest.mark.parametrize("m, block", [(700, 64), (701, 100), (300, 512)])
def test_blocked_lauum_equals_lapack_and_keeps_the_upper_triangle(m, block):
    L = np.asfortranarray(np.tril(scipy.linalg.cholesky(_spd(m, 9), lower=True)))
    A = L.copy(order="F")
    marker = np.random.default_rng(10).standard_normal((m, m))
    upper = np.triu_indices(m, 1)
    A[upper] = marker[upper]
    assert lauum_lower(A, block=block) is A
    ref, info = scipy.linalg.lapack.dlauum(L.copy(order="F"), lower=1)
    assert info == 0
    np.testing.assert_allclose(np.tril(A), np.tril(ref), rtol=0, atol=1e-12 * np.abs(ref).max())
    np.testing.assert_allclose(np.tril(A), np.tril(L.T @ L), rtol=0, atol=1e-12 * np.abs(ref).max())
    assert np.array_equal(A[upper], marker[upper])


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="column-major"):
        cholesky_lower(np.ones((3, 3)))  # row-major
    with pytest.raises(ValueError, match="square"):
        cholesky(np.ones((3, 2)))
    with pytest.raises(ValueError, match="block"):
        cholesky_lower(np.asfortranarray(np.eye(3)), block=0)
    with pytest.raises(ValueError, match="column-major"):
        lauum_lower(np.ones((3, 3)))
    with pytest.raises(ValueError, match="block"):
        lauum_lower(np.asfortranarray(np.eye(3)), block=0)


def test_cholesky_solve_equals_a_dense_solve_and_declines_indefinite_matrices():
    from dxrf.core.cholesky import cholesky_solve

    K = _spd(1200, 4)
    B = np.random.default_rng(5).standard_normal((1200, 3))
    X = cholesky_solve(np.array(K, order="F"), B)
    np.testing.assert_allclose(X, np.linalg.solve(K, B), rtol=1e-9, atol=1e-12)
    K[10, 10] = -1.0
    assert cholesky_solve(np.array(K, order="F"), B) is None
