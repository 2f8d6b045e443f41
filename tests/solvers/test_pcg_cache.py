"""The conjugate gradient's kernel values kept between its passes: the same model to the bit, nothing left behind.

Real zarr on disk, the shared two-process ``LocalCluster``, two chunkings; each
fit is made with ``cache_features`` True and False.
"""

from __future__ import annotations


import numpy as np
import pytest

import dxrf
from _worker_memory import empty, wait_until_empty
import dxrf.io
from dxrf.solvers.pcg import pcg_ridge
from dxrf.features.nystroem import landmark_kernel

N, D, M = 6000, 5, 120


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(N, D))
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=N)
    w = rng.uniform(0.5, 2.0, size=N)
    L = X[rng.choice(N, M, replace=False)]
    stored = {}
    for rows in (1500, 2600):  # 2600: blocks off the 2048-row sub-block grid
        path = tmp_path_factory.mktemp("pcgcache") / f"c{rows}.zarr"
        dxrf.io.write_zarr(X, path, y=y, chunk_rows=rows)
        stored[rows] = dxrf.io.open_zarr(path)
    return X, y, w, L, stored


def _fit(X, y, L, cache, **kw):
    feats = dxrf.NystroemFeatures(landmarks=L, bandwidth=2.0, whitening="cholesky")
    with dxrf.options(cache_features=cache):
        return dxrf.RandomFeatureRidge(feats, solver="pcg", tol=1e-9, max_iter=200, **kw).fit(X, y)


def test_numpy_cached_fit_is_bitwise_the_uncached_one(data):
    X, y, w, L, _ = data
    kw = {"alphas": [1e-2, 1e-4], "validation": 0.25}
    ref = _fit(X, y, L, False, **kw)
    got = _fit(X, y, L, True, **kw)
    assert ref.feature_cache_ == "recomputed" and got.feature_cache_ == "cached"
    assert got.feature_cache_bytes_ == N * M * 8  # NystroemFeatures' default dtype: float64 kernel values
    assert got.n_iter_ == ref.n_iter_ and got.alpha_ == ref.alpha_
    np.testing.assert_array_equal(got.coef_, ref.coef_)
    np.testing.assert_array_equal(got.validation_errors_, ref.validation_errors_)
    assert got.intercept_ == ref.intercept_


@pytest.mark.parametrize("rows", [1500, 2600])
def test_dask_cached_fit_is_bitwise_the_uncached_one_and_frees_its_blocks(client, data, rows):
    X, y, w, L, stored = data
    Xd = stored[rows].X
    ref = _fit(Xd, y, L, False, alphas=[1e-1, 1e-2])
    got = _fit(Xd, y, L, True, alphas=[1e-1, 1e-2])
    assert got.feature_cache_ == "cached" and ref.feature_cache_ == "recomputed"
    np.testing.assert_array_equal(got.coef_, ref.coef_)
    np.testing.assert_array_equal(got.validation_errors_, ref.validation_errors_)
    assert wait_until_empty(client) == empty(client)
    # and it is the NumPy fit's model, to the CG's tolerance
    local = _fit(X, y, L, True, alphas=[1e-1, 1e-2])
    np.testing.assert_allclose(got.predict(X), local.predict(X), rtol=1e-6, atol=1e-8)


def test_auto_declines_beyond_the_budget_and_an_error_leaves_nothing(client, data):
    X, y, w, L, stored = data
    kernel = landmark_kernel(np.ascontiguousarray(L.T), "gaussian", 2.0, whiten=False)
    with dxrf.options(cache_fraction=1e-9):
        res = pcg_ridge(stored[1500].X, y, kernel, 1e-3, tol=1e-6)
    assert not res.cache.cached and res.cache.budget is not None and "recomputed" in res.cache.describe()
    with dxrf.options(cache_features=True):
        with pytest.raises(ValueError, match="sample weights sum to zero"):
            pcg_ridge(stored[1500].X, y, kernel, 1e-3, sample_weight=np.zeros(N), tol=1e-6)
    assert wait_until_empty(client) == empty(client)
