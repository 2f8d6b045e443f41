"""Falkon's preconditioner factors in one array against dense NumPy factorisations of the same matrices."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg

from dxrf.features.nystroem import landmark_gram
from dxrf.solvers.falkon import falkon_factors, jitter_scale


def _gram(m: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    L = rng.normal(size=(m, 8))  # well conditioned (about 1e5 at M = 300): factors comparable entry by entry
    return landmark_gram(np.ascontiguousarray(L.T), "gaussian", 2.0)


def _dense(K: np.ndarray, alpha: float, delta: float) -> tuple[np.ndarray, np.ndarray]:
    m = K.shape[0]
    T = scipy.linalg.cholesky(K + delta * np.eye(m))
    A = scipy.linalg.cholesky(T @ T.T / m + (alpha + delta) * np.eye(m))
    return T, A


@pytest.mark.parametrize("m", [300, 1100], ids=["one-block", "blocked"])
def test_one_array_holds_both_factors_and_every_operation_matches_dense(m):
    # 1100 > 2 blocks of 512: the blocked Cholesky and lauum, and several bands of the mirror
    alphas = [1e-2, 1e-4, 1e-6]
    K = _gram(m)
    f = falkon_factors(K.copy(), alphas, overwrite_k=True)
    # one M x M array for the last penalty, one more per further penalty
    assert f.nbytes == 8 * m * m * len(alphas)
    T_dense, As = f.dense()
    rng = np.random.default_rng(1)
    V = rng.normal(size=(m, 4))
    scale = np.abs(K).max()
    for j, alpha in enumerate(alphas):
        T, A = _dense(K, alpha, f.delta)
        np.testing.assert_allclose(T_dense, T, rtol=0, atol=1e-12 * scale)
        np.testing.assert_allclose(As[j], A, rtol=0, atol=1e-10 * np.abs(A).max())
        # interleaved: the shared array's diagonal is swapped in for each factor
        for trans in (False, True):
            op = "T" if trans else "N"
            np.testing.assert_allclose(f.solve_A(j, V, trans=trans), scipy.linalg.solve_triangular(A, V, trans=op),
                                       rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(f.solve_T(V, trans=trans), scipy.linalg.solve_triangular(T, V, trans=op),
                                       rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(f.T_times(V, trans=trans), (T.T if trans else T) @ V, rtol=0, atol=1e-12 * m)
    # the conjugate gradient's penalty: K + delta I = T^T T
    np.testing.assert_allclose(f.K_times(V), K @ V + f.delta * V, rtol=0, atol=1e-12 * m)


def test_a_row_major_gram_is_factored_in_its_own_memory():
    K = _gram(200, 2)
    f = falkon_factors(K, [1e-3], overwrite_k=True)
    assert np.shares_memory(f.W, K) and len(f.extra) == 0


@pytest.mark.parametrize("m", [300, 1100], ids=["one-block", "blocked"])
def test_the_lower_factor_is_handed_over_in_place(m):
    K = _gram(m, 6)
    ref = K.copy()
    f = falkon_factors(K, [1e-4], overwrite_k=True)
    T, _ = _dense(ref, 1e-4, f.delta)
    L = f.lower_factor()
    assert np.shares_memory(L, K) and L.flags.f_contiguous and f.W is None
    np.testing.assert_array_equal(np.triu(L, 1), 0.0)
    np.testing.assert_allclose(L, T.T, rtol=0, atol=1e-12 * np.abs(T).max())


def test_identity_factors_give_plain_cg():
    K = _gram(50, 3)
    f = falkon_factors(K, [1e-3, 1e-4], identity=True)
    V = np.random.default_rng(4).normal(size=(50, 2))
    assert f.nbytes == 0
    np.testing.assert_array_equal(f.solve_T(V), V)
    np.testing.assert_array_equal(f.solve_A(1, V, trans=True), V)
    np.testing.assert_allclose(f.K_times(V), K @ V)


def test_an_indefinite_kernel_matrix_is_refused_by_name():
    K = _gram(40, 5)
    K[0, 0] = -1.0
    with pytest.raises(ValueError, match="landmarks' kernel matrix is not positive definite"):
        falkon_factors(K, [1e-3])


def test_the_jitter_follows_the_kernel_values_precision_and_the_smallest_penalty():
    eps32, eps64 = float(np.finfo(np.float32).eps), float(np.finfo(np.float64).eps)
    assert jitter_scale(eps32, [1e-3, 1e-5]) == eps32  # float32 kernel values: their rounding
    assert jitter_scale(eps32, [1e-3, 1e-8]) == pytest.approx(1e-9)  # not above a tenth of the smallest penalty
    assert jitter_scale(eps64, [1e-3]) == eps64 and jitter_scale(eps32, [0.0]) == eps64  # nor below float64's
    K = _gram(120, 3)
    f = falkon_factors(K, [1e-4], eps=eps32)
    assert f.delta == pytest.approx(120 * eps32 * np.max(np.diag(K)))
    with pytest.raises(ValueError, match="eps"):
        falkon_factors(K, [1e-4], eps=0.0)
