"""Behaviour of the random feature maps: types, laziness, reproducibility,
block kernels against dense NumPy references, errors and scikit-learn API."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.linalg

import dxrf
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import Ridge
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

from dxrf.features import (
    FeatureKernel,
    RandomFourierFeatures,
    RandomLinearSketch,
    RandomMaxoutFeatures,
    RandomReLUFeatures,
    blocks,
    samplers,
)

# name -> factory(**overrides); every kind of map the package offers
MAPS = {
    "fourier-gaussian": lambda **kw: RandomFourierFeatures(kernel="gaussian", bandwidth=2.0, **kw),
    "fourier-laplacian": lambda **kw: RandomFourierFeatures(kernel="laplacian", bandwidth=3.0, **kw),
    "fourier-cauchy": lambda **kw: RandomFourierFeatures(kernel="cauchy", bandwidth=2.0, **kw),
    "fourier-orthogonal": lambda **kw: RandomFourierFeatures(sampling="orthogonal", bandwidth=2.0, **kw),
    "fourier-qmc": lambda **kw: RandomFourierFeatures(sampling="qmc", bandwidth=2.0, **kw),
    "fourier-structured": lambda **kw: RandomFourierFeatures(sampling="structured", bandwidth=2.0, **kw),
    "relu": lambda **kw: RandomReLUFeatures(bandwidth=1.5, **kw),
    "linear-sketch": lambda **kw: RandomLinearSketch(**kw),
    "maxout-3": lambda **kw: RandomMaxoutFeatures(pieces=3, **kw),
}
MAP_NAMES = tuple(MAPS)


def make(name: str, n_components: int = 40, random_state=0, **kw):
    return MAPS[name](n_components=n_components, random_state=random_state, **kw)


def data(n: int = 60, d: int = 5, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d))


# -- independent dense references -----------------------------------------------


def dense_sorf_matrix(signs, n_components, bandwidth, d, norms=None):
    """``W`` (d x M) of structured features, from an explicit product of matrices.

    Block k has rows ``(sqrt(p)/sigma) (H/sqrt p) D1 (H/sqrt p) D2 (H/sqrt p) D3``;
    inputs are zero-padded from d to p, so only the first d columns matter.
    """
    _, n_blocks, p = signs.shape
    H = scipy.linalg.hadamard(p) / np.sqrt(p)
    rows = []
    for k in range(n_blocks):
        D1, D2, D3 = (np.diag(signs[i, k].astype(np.float64)) for i in range(3))
        rows.append(np.sqrt(p) / bandwidth * H @ D1 @ H @ D2 @ H @ D3)
    F = np.vstack(rows)[:n_components, :d]
    if norms is not None:
        F = F * np.asarray(norms, dtype=np.float64)[:, None]
    return F.T


def reference_features(est, X):
    """``z(X)`` from the fitted parameters and the formulas of DESIGN.md, in float64."""
    k = est.kernel_
    X = np.asarray(X, dtype=np.float64)
    m = k.n_components
    if k.signs is not None:
        W = dense_sorf_matrix(k.signs, m, k.bandwidth, k.n_features_in, k.norms)
    else:
        W = k.W.astype(np.float64)
    P = X @ W
    if isinstance(est, RandomFourierFeatures):
        return np.sqrt(2.0 / m) * np.cos(P + k.b.astype(np.float64))
    if isinstance(est, RandomReLUFeatures):
        return np.sqrt(2.0 / m) * np.maximum(P, 0)
    if isinstance(est, RandomMaxoutFeatures):
        q = est.pieces
        return np.stack([P[:, j * q : (j + 1) * q].max(axis=1) for j in range(m)], axis=1) / np.sqrt(m)
    return P / np.sqrt(m)


def counting_dask(X: np.ndarray, rows: int):
    """A dask array over X whose block loads are counted."""
    calls = []

    def load(block):
        calls.append(block.shape[0])
        return block

    Xd = da.from_array(X, chunks=(rows, X.shape[1])).map_blocks(load, dtype=X.dtype, meta=np.empty((0, 0), X.dtype))
    calls.clear()
    return Xd, calls


# -- formulas and output types ------------------------------------------------------


@pytest.mark.parametrize("name", MAP_NAMES)
def test_transform_matches_the_formula(name):
    X = data()
    est = make(name, dtype="float64").fit(X)
    np.testing.assert_allclose(est.transform(X), reference_features(est, X), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", MAP_NAMES)
def test_numpy_in_numpy_out_float32_by_default(name):
    X = data()
    est = make(name).fit(X)
    Z = est.transform(X)
    assert type(Z) is np.ndarray
    assert Z.shape == (60, 40)
    assert Z.dtype == np.float32
    np.testing.assert_allclose(Z, reference_features(est, X), rtol=1e-4, atol=2e-5)
    # fit_transform is fit then transform
    np.testing.assert_array_equal(clone(est).fit_transform(X), Z)


@pytest.mark.parametrize("name", MAP_NAMES)
def test_float64_when_asked(name):
    X = data().astype(np.float32)
    Z = make(name, dtype="float64").fit(X).transform(X)
    assert Z.dtype == np.float64
    Z = make(name, dtype=np.float64).fit(X).transform(X)
    assert Z.dtype == np.float64


@pytest.mark.parametrize("name", MAP_NAMES)
def test_dask_in_gives_lazy_dask_out(name):
    X = data(n=100)
    est = make(name).fit(X)
    Xd, calls = counting_dask(X, rows=30)
    Z = est.transform(Xd)
    assert isinstance(Z, da.Array)
    assert calls == []  # nothing was computed
    assert Z.shape == (100, 40)
    assert Z.dtype == np.float32
    assert Z.chunks == ((30, 30, 30, 10), (40,))
    block = Z.blocks[1].compute()
    assert calls == [30]  # one block, read once
    assert type(block) is np.ndarray and block.shape == (30, 40) and block.dtype == np.float32
    np.testing.assert_allclose(block, est.transform(X[30:60]), rtol=0, atol=1e-6)


def test_fit_on_dask_with_numeric_bandwidth_reads_nothing():
    X = data(n=100)
    Xd, calls = counting_dask(X, rows=30)
    for est in (make("fourier-gaussian"), make("fourier-structured"), make("relu"), make("maxout-3")):
        est.fit(Xd)
        assert est.n_features_in_ == 5
    assert calls == []


@pytest.mark.parametrize("name", MAP_NAMES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dask_path_matches_numpy_path(name, dtype):
    X = data(n=103)
    est = make(name, dtype=dtype).fit(X)
    Z = est.transform(X)
    Zd = est.transform(da.from_array(X, chunks=(25, 5)))
    assert Zd.dtype == np.dtype(dtype)
    Zd = Zd.compute(scheduler="sync")
    assert Zd.dtype == np.dtype(dtype)
    if dtype == "float32":
        np.testing.assert_allclose(Zd, Z, rtol=0, atol=1e-6)
    else:
        # BLAS may round a row differently depending on where it sits in the
        # block (measured: 1-2 ulp), so "exact" means to float64 rounding
        np.testing.assert_allclose(Zd, Z, rtol=1e-13, atol=1e-15)


def test_dask_path_is_the_same_for_fit_on_dask():
    X = data(n=90)
    Xd = da.from_array(X, chunks=(20, 5))
    for name in MAP_NAMES:
        a = make(name, dtype="float64").fit(X)
        b = make(name, dtype="float64").fit(Xd)
        np.testing.assert_array_equal(a.components_, b.components_)


@pytest.mark.parametrize("name", MAP_NAMES)
def test_float32_transform_is_row_order_invariant_to_rounding(name):
    # scikit-learn's check asks for rtol=1e-7, below float32 resolution; the
    # property itself holds to float32 rounding
    X = data(n=80)
    est = make(name).fit(X)
    perm = np.random.default_rng(3).permutation(80)
    np.testing.assert_allclose(est.transform(X[perm]), est.transform(X)[perm], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(est.transform(X[10:17]), est.transform(X)[10:17], rtol=1e-5, atol=1e-6)


# -- reproducibility --------------------------------------------------------------------


def kernel_arrays(kernel: FeatureKernel) -> dict:
    names = ("scale", "W", "b", "signs", "norms")
    return {n: getattr(kernel, n) for n in names if getattr(kernel, n) is not None}


@pytest.mark.parametrize("name", MAP_NAMES)
def test_same_seed_same_parameters_and_features(name):
    X = data()
    a = make(name, random_state=7).fit(X)
    b = make(name, random_state=7).fit(X)
    arrays_a, arrays_b = kernel_arrays(a.kernel_), kernel_arrays(b.kernel_)
    assert arrays_a.keys() == arrays_b.keys()
    for key in arrays_a:
        np.testing.assert_array_equal(arrays_a[key], arrays_b[key], err_msg=key)
    np.testing.assert_array_equal(a.transform(X), b.transform(X))
    # refitting the same estimator with an int seed draws the same again
    np.testing.assert_array_equal(a.fit(X).transform(X), b.transform(X))


@pytest.mark.parametrize("name", MAP_NAMES)
def test_different_seeds_differ(name):
    X = data()
    Z1 = make(name, random_state=1).fit_transform(X)
    Z2 = make(name, random_state=2).fit_transform(X)
    assert not np.allclose(Z1, Z2)


@pytest.mark.parametrize("name", MAP_NAMES)
@pytest.mark.parametrize("rng_type", [np.random.RandomState, np.random.default_rng])
def test_random_state_and_generator_instances(name, rng_type):
    X = data()
    Z1 = make(name, random_state=rng_type(11)).fit_transform(X)
    Z2 = make(name, random_state=rng_type(11)).fit_transform(X)
    Z3 = make(name, random_state=rng_type(12)).fit_transform(X)
    np.testing.assert_array_equal(Z1, Z2)
    assert not np.allclose(Z1, Z3)


def test_none_random_state_gives_fresh_draws():
    X = data()
    assert not np.allclose(make("fourier-gaussian", random_state=None).fit_transform(X), make("fourier-gaussian", random_state=None).fit_transform(X))


# -- median bandwidth ---------------------------------------------------------------------


def median_pairwise(X, metric):
    diff = X[:, None, :] - X[None, :, :]
    dist = np.sqrt(np.sum(diff**2, axis=2)) if metric == "euclidean" else np.sum(np.abs(diff), axis=2)
    return float(np.median(dist[np.triu_indices(X.shape[0], k=1)]))


@pytest.mark.parametrize(
    "est,metric",
    [
        (RandomFourierFeatures(10, kernel="gaussian", bandwidth="median", random_state=0), "euclidean"),
        (RandomFourierFeatures(10, kernel="cauchy", bandwidth="median", random_state=0), "euclidean"),
        (RandomFourierFeatures(10, kernel="laplacian", bandwidth="median", random_state=0), "cityblock"),
        (RandomFourierFeatures(10, sampling="structured", bandwidth="median", random_state=0), "euclidean"),
        (RandomReLUFeatures(10, bandwidth="median", random_state=0), "euclidean"),
    ],
)
def test_median_bandwidth_is_the_median_pairwise_distance(est, metric):
    X = data(n=51, d=4) * np.array([1.0, 2.0, 0.5, 3.0])
    est.fit(X)
    assert est.bandwidth_ == pytest.approx(median_pairwise(X, metric), rel=1e-12)
    # it is the bandwidth actually used
    if isinstance(est, RandomFourierFeatures) and est.kernel == "gaussian":
        sq = np.sum((X[:, None] - X[None]) ** 2, axis=2)
        np.testing.assert_allclose(est.kernel_matrix(X), np.exp(-sq / (2 * est.bandwidth_**2)), rtol=1e-12)


def test_median_bandwidth_differs_between_metrics():
    X = data(n=40, d=6)
    l2 = RandomFourierFeatures(10, kernel="gaussian", bandwidth="median").fit(X).bandwidth_
    l1 = RandomFourierFeatures(10, kernel="laplacian", bandwidth="median").fit(X).bandwidth_
    assert l1 > 1.5 * l2


@pytest.mark.parametrize("n,median_samples", [(50, 1000), (300, 64)])
@pytest.mark.parametrize("kernel", ["gaussian", "laplacian"])
def test_median_bandwidth_dask_matches_numpy(n, median_samples, kernel):
    X = data(n=n, d=3)
    kw = dict(kernel=kernel, bandwidth="median", median_samples=median_samples, dtype="float64", random_state=5)
    a = RandomFourierFeatures(30, **kw).fit(X)
    b = RandomFourierFeatures(30, **kw).fit(da.from_array(X, chunks=(37, 3)))
    assert a.bandwidth_ == b.bandwidth_
    np.testing.assert_array_equal(a.kernel_.W, b.kernel_.W)
    if n > median_samples:
        # a sample of the rows: close to, but not the full-data median
        full = median_pairwise(X, "euclidean" if kernel == "gaussian" else "cityblock")
        assert a.bandwidth_ == pytest.approx(full, rel=0.15)


def test_median_bandwidth_rejects_degenerate_data():
    with pytest.raises(ValueError, match="n_samples=1"):
        RandomFourierFeatures(5, bandwidth="median").fit(np.ones((1, 3)))
    with pytest.raises(ValueError, match="median pairwise distance"):
        RandomFourierFeatures(5, bandwidth="median").fit(np.ones((10, 3)))


# -- block kernels --------------------------------------------------------------------------


@pytest.mark.parametrize("p", [1, 2, 4, 8, 16, 32, 64])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fwht_matches_hadamard_matrix(p, dtype):
    X = np.random.default_rng(p).standard_normal((7, p)).astype(dtype)
    expected = (scipy.linalg.hadamard(p) @ X.astype(np.float64).T).T
    A = X.copy()
    out = blocks.fwht(A)
    assert out is A  # in place
    tol = 1e-12 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(out, expected, rtol=tol, atol=tol * np.sqrt(p))


@pytest.mark.parametrize("p", [3, 6, 12])
def test_fwht_rejects_non_power_of_two(p):
    with pytest.raises(ValueError, match="power-of-two"):
        blocks.fwht(np.zeros((2, p)))


@pytest.mark.parametrize("d,n_components", [(8, 24), (5, 20), (1, 3), (9, 40)])
@pytest.mark.parametrize("with_norms", [False, True])
def test_sorf_project_matches_dense_product(d, n_components, with_norms):
    rng = np.random.default_rng(d)
    p = 1 << (d - 1).bit_length()
    n_blocks = -(-n_components // p)
    signs = rng.choice([-1.0, 1.0], size=(3, n_blocks, p))
    norms = rng.uniform(0.5, 1.5, n_components) if with_norms else None
    X = rng.standard_normal((11, d))
    W = dense_sorf_matrix(signs, n_components, 1.7, d, norms)
    got = blocks.sorf_project(X, signs, n_components, 1.7, norms)
    np.testing.assert_allclose(got, X @ W, rtol=1e-12, atol=1e-12)


def test_sorf_rows_have_the_scaled_hadamard_norm():
    # without norm factors and with d = p every frequency has norm sqrt(p)/sigma
    rng = np.random.default_rng(0)
    signs = rng.choice([-1.0, 1.0], size=(3, 2, 16))
    W = blocks.sorf_project(np.eye(16), signs, 32, 2.0)
    np.testing.assert_allclose(np.linalg.norm(W, axis=0), np.full(32, 4.0 / 2.0), rtol=1e-12)
    # and the frequencies of one block are orthogonal
    G = W[:, :16].T @ W[:, :16]
    np.testing.assert_allclose(G, 4.0 * np.eye(16), atol=1e-12)


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-12), ("float32", 2e-5)])
def test_dense_kernel_gives_the_structured_features(dtype, tol):
    X = data(n=40, d=6)
    est = make("fourier-structured", n_components=50, dtype=dtype).fit(X)
    structured = est.kernel_
    dense = structured.dense()
    assert dense.signs is None and dense.W.shape == (6, 50) and dense.W.dtype == np.dtype(dtype)
    np.testing.assert_allclose(dense(X), structured(X), rtol=0, atol=tol)
    np.testing.assert_allclose(est.components_, dense.W)
    # a dense kernel is its own dense form
    assert dense.dense() is dense


@pytest.mark.parametrize("name", MAP_NAMES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_subset_selects_and_scales_columns(name, dtype):
    X = data(n=30)
    est = make(name, n_components=12, dtype=dtype).fit(X)
    Z = est.transform(X).astype(np.float64)
    idx = np.array([3, 0, 3, 11, 7, 7, 7])
    scales = np.array([0.5, 2.0, -1.0, 1.0, 3.0, 0.25, 1.5])
    sub = est.kernel_.subset(idx, scales)
    assert sub.n_components == idx.size and sub.dtype == np.dtype(dtype)
    tol = 1e-12 if dtype == "float64" else 1e-5
    np.testing.assert_allclose(sub(X), Z[:, idx] * scales, rtol=tol, atol=tol)
    # without scales: plain column selection; nested subsets compose
    np.testing.assert_allclose(est.kernel_.subset(idx)(X), Z[:, idx], rtol=tol, atol=tol)
    nested = sub.subset(np.array([1, 4]), np.array([10.0, 1.0]))
    np.testing.assert_allclose(nested(X), Z[:, [0, 7]] * np.array([20.0, 3.0]), rtol=tol, atol=tol)


def test_subset_rejects_bad_indices():
    kernel = make("fourier-gaussian", n_components=5).fit(data()).kernel_
    for index in ([], [5], [-1], [[0, 1]]):
        with pytest.raises(ValueError):
            kernel.subset(np.array(index, dtype=int))
    with pytest.raises(ValueError):
        kernel.subset(np.array([0, 1]), np.array([1.0]))


@pytest.mark.parametrize("name", MAP_NAMES)
def test_kernel_writes_into_out_buffer(name):
    X = data(n=20)
    est = make(name, n_components=16).fit(X)
    expected = est.kernel_(X)  # transform rounds each row on its own (kernel.rowwise): within an ulp of this
    np.testing.assert_allclose(est.transform(X), expected, rtol=1e-5, atol=1e-6)
    buf = np.full((20, 16), np.nan, dtype=np.float32)
    got = est.kernel_(X, out=buf)
    assert got is buf
    np.testing.assert_array_equal(buf, expected)
    with pytest.raises(ValueError, match="out has shape"):
        est.kernel_(X, out=np.empty((20, 15), dtype=np.float32))
    with pytest.raises(ValueError, match="out has shape"):
        est.kernel_(X, out=np.empty((20, 16), dtype=np.float64))


def test_block_functions_write_in_place_and_match_dense_formulas():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((9, 4))
    W = rng.standard_normal((4, 12))
    b = rng.uniform(0, 2 * np.pi, 12)
    P = X @ W
    cases = [
        (lambda out: blocks.project(X, W, out), P, 12),
        (lambda out: blocks.linear_block(X, W, out), P, 12),
        (lambda out: blocks.fourier_block(X, W, b, out), np.cos(P + b), 12),
        (lambda out: blocks.relu_block(X, W, out), np.maximum(P, 0), 12),
        # feature-major pieces: columns 3j, 3j+1, 3j+2 make feature j
        (lambda out: blocks.maxout_block(X, W, 3, out), P.reshape(9, 4, 3).max(axis=2), 4),
        (lambda out: blocks.maxout_block(X, W, 1, out), P, 12),
    ]
    for fn, expected, m in cases:
        buf = np.full((9, m), np.nan)
        assert fn(buf) is buf
        np.testing.assert_allclose(buf, expected, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(fn(None), expected, rtol=1e-12, atol=1e-12)
    signs = rng.choice([-1.0, 1.0], size=(3, 2, 4))
    buf = np.full((9, 7), np.nan)
    assert blocks.sorf_project(X, signs, 7, 1.0, out=buf) is buf
    np.testing.assert_allclose(buf, X @ dense_sorf_matrix(signs, 7, 1.0, 4), rtol=1e-12, atol=1e-12)


def test_maxout_pieces_are_feature_major():
    X = data(n=10, d=3)
    est = RandomMaxoutFeatures(6, pieces=4, dtype="float64", random_state=0).fit(X)
    assert est.components_.shape == (3, 24)
    P = X @ est.components_
    np.testing.assert_allclose(est.transform(X), P.reshape(10, 6, 4).max(axis=2) / np.sqrt(6), rtol=1e-12)


# -- samplers -------------------------------------------------------------------------------


def test_orthogonal_blocks_have_orthogonal_columns():
    d, m, sigma = 6, 20, 2.5
    W = samplers.orthogonal_frequencies(np.random.default_rng(0), d, m, sigma)
    assert W.shape == (d, m)
    for lo in range(0, m, d):
        block = W[:, lo : lo + d]
        G = block.T @ block
        np.testing.assert_allclose(G, np.diag(np.diag(G)), atol=1e-12 * np.abs(G).max())
    # blocks are independent, so columns of different blocks are not orthogonal
    assert abs(W[:, 0] @ W[:, d]) > 1e-6
    # the estimator uses them
    est = RandomFourierFeatures(20, sampling="orthogonal", bandwidth=sigma, dtype="float64", random_state=0).fit(data(d=d))
    block = est.kernel_.W[:, :d]
    G = block.T @ block
    np.testing.assert_allclose(G, np.diag(np.diag(G)), atol=1e-10)


def test_orthogonal_frequency_norms_are_gaussian_like():
    d, sigma = 5, 2.0
    W = samplers.orthogonal_frequencies(np.random.default_rng(1), d, 20000, sigma)
    sq = np.sum((W * sigma) ** 2, axis=0)  # chi-square with d degrees of freedom
    assert sq.mean() == pytest.approx(d, rel=0.03)
    assert sq.var() == pytest.approx(2 * d, rel=0.08)
    # every coordinate is N(0, 1/sigma^2)
    np.testing.assert_allclose(W.std(axis=1), 1 / sigma, rtol=0.03)


def test_qmc_sampling_is_deterministic_for_a_seed():
    X = data(d=4)
    a = RandomFourierFeatures(50, sampling="qmc", random_state=3).fit(X)
    b = RandomFourierFeatures(50, sampling="qmc", random_state=3).fit(X)
    c = RandomFourierFeatures(50, sampling="qmc", random_state=4).fit(X)
    np.testing.assert_array_equal(a.kernel_.W, b.kernel_.W)
    np.testing.assert_array_equal(a.offsets_, b.offsets_)
    assert not np.allclose(a.kernel_.W, c.kernel_.W)
    W1, b1 = samplers.qmc_frequencies(np.random.default_rng(9), "cauchy", 4, 64, 1.0)
    W2, b2 = samplers.qmc_frequencies(np.random.default_rng(9), "cauchy", 4, 64, 1.0)
    np.testing.assert_array_equal(W1, W2)
    np.testing.assert_array_equal(b1, b2)
    assert np.all((b1 >= 0) & (b1 < 2 * np.pi))
    assert np.all(np.isfinite(W1))


def test_qmc_points_are_stratified():
    # a scrambled Sobol prefix of 2^k points has exactly one point per 1/2^k interval
    # in each coordinate: the offsets fill [0, 2 pi) evenly
    _, b = samplers.qmc_frequencies(np.random.default_rng(0), "gaussian", 3, 64, 1.0)
    counts = np.histogram(b, bins=64, range=(0, 2 * np.pi))[0]
    np.testing.assert_array_equal(counts, np.ones(64))


@pytest.mark.parametrize(
    "kernel,statistic,target",
    [
        ("gaussian", lambda w: w.std(), 1.0),  # N(0, 1/sigma^2)
        ("laplacian", lambda w: np.median(np.abs(w)), 1.0),  # Cauchy(0, 1/sigma): median |w| is the scale
        ("cauchy", lambda w: np.mean(np.abs(w)), 1.0),  # Laplace(0, 1/sigma): mean |w| is the scale
    ],
)
@pytest.mark.parametrize("sigma", [0.5, 3.0])
def test_iid_frequencies_have_scale_one_over_sigma(kernel, statistic, target, sigma):
    W = RandomFourierFeatures(8000, kernel=kernel, bandwidth=sigma, dtype="float64", random_state=0).fit(data(d=6)).kernel_.W
    assert W.shape == (6, 8000)
    assert statistic(W.ravel()) * sigma == pytest.approx(target, rel=0.03)
    assert abs(np.median(W)) * sigma < 0.03


def test_offsets_are_uniform_on_the_circle():
    b = RandomFourierFeatures(20000, random_state=0).fit(data()).offsets_
    assert b.min() >= 0 and b.max() < 2 * np.pi
    assert b.mean() == pytest.approx(np.pi, rel=0.02)


@pytest.mark.parametrize("d,p", [(1, 32), (5, 32), (32, 32), (33, 64), (100, 128)])
def test_structured_order_is_a_padded_power_of_two(d, p):
    # small inputs are padded up to order 32: tiny Hadamard orders give biased kernels
    assert samplers.SORF_MIN_ORDER == 32
    signs, norms = samplers.structured_signs(np.random.default_rng(0), d, 100)
    assert signs.shape == (3, -(-100 // p), p)
    est = RandomFourierFeatures(100, sampling="structured", random_state=0).fit(data(n=3, d=d))
    assert est.kernel_.signs.shape == (3, -(-100 // p), p)
    assert est.transform(data(n=3, d=d)).shape == (3, 100)


def test_structured_signs_and_norms():
    signs, norms = samplers.structured_signs(np.random.default_rng(0), 5, 3000)
    assert signs.shape == (3, 94, 32)
    assert set(np.unique(signs)) == {-1.0, 1.0}
    assert norms.shape == (3000,)
    # chi_p / sqrt(p): mean square 1
    assert np.mean(norms**2) == pytest.approx(1.0, rel=0.03)


# -- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "est,error",
    [
        (RandomFourierFeatures(10, kernel="polynomial"), ValueError),
        (RandomFourierFeatures(10, sampling="sobol"), ValueError),
        (RandomFourierFeatures(10, kernel="laplacian", sampling="orthogonal"), ValueError),
        (RandomFourierFeatures(10, kernel="cauchy", sampling="structured"), ValueError),
        (RandomFourierFeatures(10, bandwidth=0.0), ValueError),
        (RandomFourierFeatures(10, bandwidth=-1.0), ValueError),
        (RandomFourierFeatures(10, bandwidth=float("nan")), ValueError),
        (RandomFourierFeatures(10, bandwidth=float("inf")), ValueError),
        (RandomFourierFeatures(10, bandwidth="mean"), ValueError),
        (RandomFourierFeatures(10, bandwidth=None), TypeError),
        (RandomFourierFeatures(10, bandwidth=True), TypeError),
        (RandomReLUFeatures(10, bandwidth=-2.0), ValueError),
        (RandomReLUFeatures(10, bandwidth="max"), ValueError),
        (RandomFourierFeatures(0), ValueError),
        (RandomFourierFeatures(-5), ValueError),
        (RandomFourierFeatures(10.5), TypeError),
        (RandomFourierFeatures("10"), TypeError),
        (RandomLinearSketch(0), ValueError),
        (RandomReLUFeatures(2.0), TypeError),
        (RandomFourierFeatures(10, dtype="int32"), ValueError),
        (RandomFourierFeatures(10, dtype="float16"), ValueError),
        (RandomFourierFeatures(10, dtype="banana"), TypeError),
        (RandomMaxoutFeatures(10, dtype="complex128"), ValueError),
        (RandomMaxoutFeatures(10, pieces=0), ValueError),
        (RandomMaxoutFeatures(10, pieces=-2), ValueError),
        (RandomMaxoutFeatures(10, pieces=2.0), TypeError),
        (RandomFourierFeatures(10, median_samples=0), ValueError),
        (RandomFourierFeatures(10, random_state="seed"), TypeError),
    ],
    ids=repr,
)
def test_invalid_parameters_raise_at_fit(est, error):
    X = data()
    with pytest.raises(error):
        est.fit(X)
    with pytest.raises(error):
        est.fit(da.from_array(X, chunks=(20, 5)))


def test_numpy_integer_parameters_are_accepted():
    est = RandomMaxoutFeatures(np.int64(7), pieces=np.int32(2), random_state=np.int64(1)).fit(data())
    assert est.transform(data()).shape == (60, 7)


@pytest.mark.parametrize("name", MAP_NAMES)
def test_transform_before_fit_raises_not_fitted(name):
    with pytest.raises(NotFittedError):
        make(name).transform(data())
    with pytest.raises(NotFittedError):
        make(name).transform(da.from_array(data(), chunks=(20, 5)))


@pytest.mark.parametrize("name", MAP_NAMES)
def test_wrong_number_of_columns_at_transform(name):
    est = make(name).fit(data(d=5))
    with pytest.raises(ValueError, match="features"):
        est.transform(data(d=4))
    with pytest.raises(ValueError, match="features"):
        est.transform(da.from_array(data(d=6), chunks=(20, 6)))
    with pytest.raises(ValueError):
        est.kernel_(data(d=4))


def test_bad_dask_inputs():
    est = make("fourier-gaussian").fit(data())
    with pytest.raises(ValueError, match="2-dimensional"):
        est.transform(da.zeros(10, chunks=5))
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        X = da.from_array(data(), chunks=(20, 5))
        est.transform(X[X[:, 0] > 0])


@pytest.mark.parametrize("name", ["fourier-gaussian", "fourier-structured", "maxout-3"])
def test_column_chunked_dask_is_rechunked_with_a_warning(name):
    X = data(n=64, d=6)
    Xd = da.from_array(X, chunks=(16, 2))
    with pytest.warns(UserWarning, match="chunked along its columns"):
        est = make(name).fit(Xd)
    with pytest.warns(UserWarning, match="chunked along its columns"):
        Z = est.transform(Xd)
    assert Z.chunks == ((16, 16, 16, 16), (40,))
    np.testing.assert_allclose(Z.compute(), est.transform(X), rtol=0, atol=1e-6)


# -- scikit-learn compatibility ------------------------------------------------------------------

SKLEARN_INSTANCES = [
    RandomFourierFeatures(),
    RandomFourierFeatures(kernel="laplacian", bandwidth="median", random_state=0),
    RandomFourierFeatures(kernel="cauchy", sampling="qmc", random_state=0),
    RandomFourierFeatures(sampling="orthogonal", random_state=0),
    RandomFourierFeatures(sampling="structured", bandwidth="median", random_state=0),
    RandomReLUFeatures(random_state=0),
    RandomLinearSketch(random_state=0),
    RandomMaxoutFeatures(random_state=0),
    RandomFourierFeatures(sampling="qmc", dtype="float64", random_state=0),
    RandomFourierFeatures(sampling="structured", dtype="float64", random_state=0),
    RandomReLUFeatures(bandwidth="median", dtype="float64", random_state=0),
    RandomLinearSketch(dtype="float64", random_state=0),
    RandomMaxoutFeatures(pieces=3, dtype="float64", random_state=0),
]

@parametrize_with_checks(SKLEARN_INSTANCES)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("name", MAP_NAMES)
def test_get_feature_names_out(name):
    est = make(name, n_components=7).fit(data())
    names = est.get_feature_names_out()
    prefix = type(est).__name__.lower()
    assert list(names) == [f"{prefix}{i}" for i in range(7)]


def test_get_params_and_clone_round_trip():
    est = RandomFourierFeatures(33, kernel="cauchy", bandwidth="median", sampling="qmc", dtype="float64", random_state=4)
    params = est.get_params()
    assert params == {
        "n_components": 33,
        "kernel": "cauchy",
        "bandwidth": "median",
        "sampling": "qmc",
        "dtype": "float64",
        "random_state": 4,
        "median_samples": 1000,
        "ard_rows": 3000,
        "ard_restarts": 1,
    }
    X = data()
    np.testing.assert_array_equal(clone(est).fit_transform(X), est.fit_transform(X))
    assert RandomMaxoutFeatures(pieces=5).get_params()["pieces"] == 5


def _regression_problem(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (n, 2))
    y = np.sin(2 * X[:, 0]) + np.cos(X[:, 1]) + 0.05 * rng.standard_normal(n)
    return X, y


@pytest.mark.parametrize(
    "features",
    [
        RandomFourierFeatures(300, bandwidth=1.0, random_state=0),
        RandomFourierFeatures(300, bandwidth=1.0, sampling="structured", random_state=0),
        RandomReLUFeatures(300, random_state=0),
        RandomMaxoutFeatures(300, pieces=3, random_state=0),
    ],
    ids=["fourier", "structured", "relu", "maxout"],
)
def test_pipeline_with_ridge_learns_a_nonlinear_function(features):
    X, y = _regression_problem()
    Xt, yt = _regression_problem(200, seed=1)
    if not isinstance(features, RandomFourierFeatures):
        # homogeneous maps need a constant column to express offsets
        X, Xt = np.c_[X, np.ones(len(X))], np.c_[Xt, np.ones(len(Xt))]
    model = Pipeline([("features", features), ("ridge", Ridge(alpha=1e-3))]).fit(X, y)
    linear = Ridge(alpha=1e-3).fit(X, y).score(Xt, yt)
    assert model.score(Xt, yt) > 0.8
    assert model.score(Xt, yt) > linear + 0.3


def test_grid_search_over_feature_parameters():
    X, y = _regression_problem(300)
    pipe = Pipeline([("rff", RandomFourierFeatures(random_state=0)), ("ridge", Ridge(alpha=1e-3))])
    grid = GridSearchCV(pipe, {"rff__bandwidth": [0.05, 1.0, 30.0], "rff__n_components": [20, 200]}, cv=3).fit(X, y)
    assert grid.best_params_ == {"rff__bandwidth": 1.0, "rff__n_components": 200}
    assert grid.best_score_ > 0.8
    assert grid.best_estimator_.named_steps["rff"].kernel_.n_components == 200


def test_dask_features_in_a_pipeline_transform():
    X, y = _regression_problem(200)
    pipe = Pipeline([("rff", RandomFourierFeatures(100, random_state=0, dtype="float64")), ("ridge", Ridge(alpha=1e-3))]).fit(X, y)
    Z = pipe.named_steps["rff"].transform(da.from_array(X, chunks=(50, 2)))
    assert isinstance(Z, da.Array)
    np.testing.assert_allclose(pipe.named_steps["ridge"].predict(Z.compute()), pipe.predict(X), rtol=1e-10, atol=1e-10)


def test_transform_under_a_forbidding_scheduler_stays_lazy():
    def forbid(*args, **kwargs):
        raise AssertionError("transform must not compute")

    X = da.from_array(data(n=50), chunks=(10, 5))
    est = make("fourier-gaussian").fit(X)
    with dask.config.set(scheduler=forbid):
        Z = est.transform(X)
    assert isinstance(Z, da.Array)
    np.testing.assert_allclose(Z.compute(), est.transform(data(n=50)), atol=1e-6)


# -- the float64 cosine of the feature blocks -------------------------------------------------


@pytest.mark.parametrize("scale", [1e-3, 1.0, 30.0, 1e3, 1e5])
def test_cos_inplace_float64_matches_numpy(scale):
    from dxrf.kernels.blocks import _COS_SLICE, cos_inplace

    rng = np.random.default_rng(int(scale * 1000) % 2**32)
    # more than one slice, the last one partial
    x = rng.standard_normal((3, _COS_SLICE // 2 + 7)) * scale + rng.uniform(0, 2 * np.pi, size=_COS_SLICE // 2 + 7)
    got = cos_inplace(x.copy())
    # absolute error of a few ulps of 1 (below what rounding x itself causes)
    assert np.abs(got - np.cos(x)).max() <= 1e-15
    # the points where the reduction switches quadrant, and exact multiples of pi/2
    edges = np.concatenate([np.arange(-40, 41) * (np.pi / 2), (np.arange(-40, 41) + 0.5) * np.pi, [0.0, -0.0]])
    assert np.abs(cos_inplace(edges.copy()) - np.cos(edges)).max() <= 1e-15


def test_cos_inplace_fallbacks():
    from dxrf.kernels.blocks import _COS_MAX_ARG, cos_inplace

    rng = np.random.default_rng(5)
    # a slice with an argument beyond the exact-reduction range goes to np.cos whole
    big = rng.uniform(-3, 3, size=1000)
    big[10] = 50 * _COS_MAX_ARG
    np.testing.assert_array_equal(cos_inplace(big.copy()), np.cos(big))
    with np.errstate(invalid="ignore"):
        nan = cos_inplace(np.array([0.5, np.nan, np.inf]))
    assert nan[0] == pytest.approx(np.cos(0.5), abs=1e-16) and np.isnan(nan[1:]).all()
    # float32 and non-contiguous arrays: NumPy's own cos, in place
    f32 = rng.standard_normal((50, 40)).astype(np.float32)
    np.testing.assert_array_equal(cos_inplace(f32.copy()), np.cos(f32))
    a = rng.standard_normal((50, 40))
    view = a[:, ::2]
    ref = np.cos(view)
    assert cos_inplace(view) is view
    np.testing.assert_array_equal(view, ref)


@pytest.mark.parametrize(
    "make",
    [
        lambda: RandomFourierFeatures(300, bandwidth=2.0, random_state=0),
        lambda: RandomFourierFeatures(256, bandwidth=2.0, sampling="structured", random_state=0),
        lambda: RandomFourierFeatures(300, bandwidth=np.linspace(1.0, 3.0, 6), random_state=0),
        lambda: RandomReLUFeatures(300, random_state=0),
        lambda: RandomMaxoutFeatures(300, random_state=0),
        lambda: dxrf.NystroemFeatures(200, bandwidth=2.0, dtype="float32", random_state=0),
    ],
)
def test_float32_rowwise_features_are_the_same_in_any_company(make):
    """What SGD's cache relies on: a row's ``rowwise`` features do not depend on the rows beside it, bit for bit."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5000, 6))
    kernel = make().fit(X[:500]).kernel_
    assert kernel.dtype == np.float32
    whole = kernel.rowwise(X)
    shuffled = np.empty_like(whole)
    order = rng.permutation(len(X))
    for lo in range(0, len(X), 777):  # tiles of shuffled rows, as SGD computes them
        rows = order[lo : lo + 777]
        out = np.full((rows.size, kernel.n_components), np.nan, dtype=np.float32)
        assert kernel.rowwise(X[rows], out=out) is out
        shuffled[rows] = out
    np.testing.assert_array_equal(shuffled, whole)
    np.testing.assert_array_equal(kernel.rowwise(X[7:8]), whole[7:8])
    np.testing.assert_allclose(whole, kernel(X), rtol=0, atol=1e-5)  # the float32 product, to its rounding
