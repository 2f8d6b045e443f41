"""The one-pass statistics: dense references, chunking, workers, splits, errors."""

from __future__ import annotations


import dask.array as da
import numpy as np
import pytest
import zarr
from distributed import Client

import dxrf
from dxrf.stats.feature_stats import FeatureStats
from dxrf.stats.accumulation import accumulate, block_stats, hashed_split

N, D, K = 3000, 7, 2


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(42)
    X = rng.normal(size=(N, D))
    y = np.column_stack([np.sin(X[:, 0]) + 0.1 * rng.normal(size=N), X[:, 1] ** 2])
    return X, y


def dense_stats(Z: np.ndarray, Y: np.ndarray | None) -> dict:
    """Independent reference: statistics of an explicit float64 feature matrix."""
    Z = Z.astype(np.float64)
    ref = {"gram": Z.T @ Z, "sum": Z.sum(axis=0), "n": Z.shape[0]}
    if Y is not None:
        Y = Y.reshape(Z.shape[0], -1).astype(np.float64)
        ref.update(cross=Z.T @ Y, ysum=Y.sum(axis=0), yy=Y.T @ Y)
    return ref


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def assert_stats_close(stats: FeatureStats, ref: dict, tol: float) -> None:
    assert stats.n == ref["n"]
    for field in ("gram", "sum", "cross", "ysum", "yy"):
        if field in ref:
            assert rel(getattr(stats, field), ref[field]) <= tol, field


MAPS = {
    "fourier-iid": lambda dt: dxrf.RandomFourierFeatures(150, bandwidth=2.5, dtype=dt, random_state=1),
    "fourier-structured": lambda dt: dxrf.RandomFourierFeatures(150, bandwidth=2.5, sampling="structured", dtype=dt, random_state=1),
    "fourier-laplacian-qmc": lambda dt: dxrf.RandomFourierFeatures(150, kernel="laplacian", bandwidth=4.0, sampling="qmc", dtype=dt, random_state=1),
    "relu": lambda dt: dxrf.RandomReLUFeatures(150, dtype=dt, random_state=1),
    "linear": lambda dt: dxrf.RandomLinearSketch(40, dtype=dt, random_state=1),
    "maxout": lambda dt: dxrf.RandomMaxoutFeatures(150, pieces=3, dtype=dt, random_state=1),
}


@pytest.mark.parametrize("name", sorted(MAPS))
@pytest.mark.parametrize("dtype,tol", [("float64", 1e-10), ("float32", 1e-5)])
def test_accumulate_equals_dense_numpy(data, name, dtype, tol):
    X, y = data
    fmap = MAPS[name](dtype).fit(X)
    ref = dense_stats(fmap.transform(X), y)
    # NumPy path, and dask path with tiles that straddle chunk boundaries
    assert_stats_close(accumulate(X, y, fmap), ref, tol)
    Xd = da.from_array(X, chunks=(701, D))
    assert_stats_close(accumulate(Xd, da.from_array(y, chunks=(500, K)), fmap, tile_rows=256), ref, tol)


def test_accumulate_without_targets(data):
    X, _ = data
    fmap = dxrf.RandomFourierFeatures(50, bandwidth=2.0, dtype="float64", random_state=0).fit(X)
    stats = accumulate(da.from_array(X, chunks=(1000, D)), features=fmap)
    assert stats.cross is None and stats.n_targets is None
    assert_stats_close(stats, dense_stats(fmap.transform(X), None), 1e-12)


def test_normalised_gram_has_unit_trace_for_fourier(data):
    X, _ = data
    stats = accumulate(X, features=dxrf.RandomFourierFeatures(400, bandwidth=2.0, dtype="float64", random_state=0))
    # E[z(x)^T z(x)] = k(x, x) = 1 for a shift-invariant kernel
    assert abs(np.trace(stats.normalized_gram()) - 1.0) < 0.05


def test_unfitted_map_is_fitted_on_X(data):
    X, y = data
    fmap = dxrf.RandomFourierFeatures(30, bandwidth="median", dtype="float64", random_state=3)
    stats = accumulate(X, y, fmap)
    assert hasattr(fmap, "kernel_")
    assert_stats_close(stats, dense_stats(fmap.transform(X), y), 1e-12)


def test_kernel_object_is_accepted(data):
    X, y = data
    fmap = dxrf.RandomReLUFeatures(20, dtype="float64", random_state=0).fit(X)
    a = accumulate(X, y, fmap.kernel_)
    b = accumulate(X, y, fmap)
    np.testing.assert_array_equal(a.gram, b.gram)


# -- splits ------------------------------------------------------------------------


def test_hashed_split_is_chunking_invariant_and_has_the_right_fraction():
    whole = hashed_split(0, 100_000, 0.2, seed=7)
    pieces = np.concatenate([hashed_split(a, b, 0.2, seed=7) for a, b in [(0, 333), (333, 5000), (5000, 100_000)]])
    np.testing.assert_array_equal(whole, pieces)
    assert abs(whole.mean() - 0.2) < 0.01
    assert not np.array_equal(whole, hashed_split(0, 100_000, 0.2, seed=8))


@pytest.mark.parametrize("kind", ["fraction", "dask-mask", "numpy-mask"])
def test_train_plus_validation_equals_unsplit(data, kind):
    X, y = data
    fmap = dxrf.RandomFourierFeatures(80, bandwidth=2.0, dtype="float64", random_state=0).fit(X)
    Xd = da.from_array(X, chunks=(900, D))
    mask = np.random.default_rng(0).random(N) < 0.3
    split = {"fraction": 0.25, "dask-mask": da.from_array(mask, chunks=400), "numpy-mask": mask}[kind]
    train, valid = accumulate(Xd, y, fmap, split=split)
    whole = accumulate(Xd, y, fmap)
    assert train.n + valid.n == N
    assert_stats_close(train + valid, dense_stats(fmap.transform(X), y), 1e-12)
    assert rel((train + valid).gram, whole.gram) <= 1e-12
    if kind != "fraction":
        assert valid.n == mask.sum()
        Z = fmap.transform(X)
        assert_stats_close(valid, dense_stats(Z[mask], y[mask]), 1e-12)
    else:
        m = hashed_split(0, N, 0.25, seed=0)
        assert_stats_close(valid, dense_stats(fmap.transform(X)[m], y[m]), 1e-12)


def test_numpy_and_dask_hashed_splits_agree(data):
    X, y = data
    fmap = dxrf.RandomFourierFeatures(30, bandwidth=2.0, dtype="float64", random_state=0).fit(X)
    a = accumulate(X, y, fmap, split=0.4, split_seed=5)
    b = accumulate(da.from_array(X, chunks=(333, D)), y, fmap, split=0.4, split_seed=5)
    assert a[1].n == b[1].n
    assert rel(a[1].gram, b[1].gram) <= 1e-12


# -- FeatureStats algebra -------------------------------------------------------------


def test_feature_stats_monoid_and_subset(data):
    X, y = data
    fmap = dxrf.RandomFourierFeatures(60, bandwidth=2.0, dtype="float64", random_state=0).fit(X)
    a = accumulate(X[:1000], y[:1000], fmap)
    b = accumulate(X[1000:], y[1000:], fmap)
    whole = accumulate(X, y, fmap)
    assert rel((a + b).gram, whole.gram) < 1e-13
    assert rel(sum([a, b]).cross, whole.cross) < 1e-13
    assert rel((FeatureStats.zeros(60, 2) + whole).yy, whole.yy) == 0
    idx = np.array([3, 3, 10, 59, 0])
    scales = np.array([0.5, 2.0, 1.0, -1.5, 3.0])
    Z = fmap.transform(X)[:, idx] * scales
    assert_stats_close(whole.subset(idx, scales), dense_stats(Z, y), 1e-12)
    Zfull = fmap.transform(X)
    np.testing.assert_allclose(whole.normalized_gram(), Zfull.T @ Zfull / N, rtol=1e-12)
    with pytest.raises(ValueError, match="cannot add"):
        a + FeatureStats.zeros(5)
    with pytest.raises(ValueError, match="index out of range"):
        whole.subset([60])


# -- input handling ---------------------------------------------------------------


def test_column_chunked_X_is_rechunked_with_a_warning(data):
    X, y = data
    fmap = dxrf.RandomFourierFeatures(40, bandwidth=2.0, dtype="float64", random_state=0).fit(X)
    Xd = da.from_array(X, chunks=(1000, 3))
    with pytest.warns(UserWarning, match="chunked along its columns"):
        stats = accumulate(Xd, y, fmap)
    assert_stats_close(stats, dense_stats(fmap.transform(X), y), 1e-12)


def test_bad_inputs_raise_clear_errors(data):
    X, y = data
    fmap = dxrf.RandomFourierFeatures(10, bandwidth=2.0, random_state=0).fit(X)
    Xd = da.from_array(X, chunks=(1000, D))
    with pytest.raises(ValueError, match="features is required"):
        accumulate(X, y)
    with pytest.raises(ValueError, match="y has 10 rows"):
        accumulate(Xd, y[:10], fmap)
    with pytest.raises(ValueError, match="y has 10 rows"):
        accumulate(X, y[:10], fmap)
    with pytest.raises(ValueError, match="split must be a fraction"):
        accumulate(Xd, y, fmap, split=1.5)
    with pytest.raises(TypeError, match="boolean"):
        accumulate(Xd, y, fmap, split=np.zeros(N))
    with pytest.raises(ValueError, match="expects 7 columns|has 3 features"):
        accumulate(da.from_array(X[:, :3], chunks=(1000, 3)), features=fmap)
    bad = X.copy()
    bad[1234, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or infinity .*row 1234"):
        accumulate(da.from_array(bad, chunks=(1000, D)), features=fmap)
    with pytest.raises(TypeError, match="feature map"):
        accumulate(X, features=object())


def test_block_stats_is_a_pure_numpy_function(data):
    X, y = data
    fmap = dxrf.RandomFourierFeatures(30, bandwidth=2.0, dtype="float64", random_state=0).fit(X)
    mask = np.arange(N) % 3 == 0
    train, valid = block_stats(X, y, fmap.kernel_, mask, tile_rows=100)
    Z = fmap.transform(X)
    assert_stats_close(train, dense_stats(Z[~mask], y[~mask]), 1e-12)
    assert_stats_close(valid, dense_stats(Z[mask], y[mask]), 1e-12)


@pytest.mark.parametrize("name", ["fourier-iid", "fourier-structured", "maxout"])
def test_feature_slabs_do_not_change_the_statistics(data, name, monkeypatch):
    """Tiles are computed in cache-sized slabs of rows; their size must not matter."""
    import dxrf.stats.tiles as stats_module

    X, y = data
    fmap = MAPS[name]("float64").fit(X)
    ref = dense_stats(fmap.transform(X), y)
    results = []
    for slab_bytes in (1, 150 * 8 * 37, 2**30):  # 16-row slabs, 37 rows (cuts the tiles unevenly), one slab
        monkeypatch.setattr(stats_module, "_SLAB_BYTES", slab_bytes)
        results.append(block_stats(X, y, fmap.kernel_, tile_rows=1000))
        assert_stats_close(results[-1], ref, 1e-12)
    for other in results[1:]:
        np.testing.assert_allclose(other.sum, results[0].sum, rtol=1e-13, atol=1e-10)
        np.testing.assert_allclose(other.gram, results[0].gram, rtol=1e-13, atol=1e-10)


def test_packed_compensated_sums_match_dense_and_merge_exactly():
    """The Gram's sums keep its upper triangle in packed row bands; merges are exact."""
    from dxrf.stats.compensated import packed_size as _packed_size, CompensatedSums as _Sums

    m = 150  # three bands of 64, 64 and 22 rows
    rng = np.random.default_rng(3)
    tiles = []
    for _ in range(5):
        Z = rng.normal(size=(40, m)).astype(np.float32)
        tiles.append(Z.T @ Z)
    one, left, right = _Sums(m, None), _Sums(m, None), _Sums(m, None)
    for i, g in enumerate(tiles):
        one.add("gram", g)
        (left if i < 2 else right).add("gram", g)
    assert one.hi["gram"].size == _packed_size(m) < m * m * 0.75
    scale = rng.uniform(0.5, 2.0, size=m)
    dense = sum(g.astype(np.float64) for g in tiles) * np.outer(scale, scale)
    merged = left.merge(right).finish(scale).gram
    np.testing.assert_allclose(one.finish(scale).gram, dense, rtol=1e-12)
    np.testing.assert_array_equal(merged, one.finish(scale).gram)
    np.testing.assert_array_equal(merged, merged.T)


# -- on real clusters, from zarr on disk ---------------------------------------------------


@pytest.fixture(scope="module")
def zarr_data(tmp_path_factory, data):
    X, y = data
    root = tmp_path_factory.mktemp("zarr")
    paths = {}
    for rows in (250, 1000, 1777):
        path = root / f"X-{rows}.zarr"
        arr = zarr.create_array(str(path), shape=X.shape, chunks=(rows, D), dtype="float64")
        arr[:] = X
        paths[rows] = str(path)
    ypath = root / "y.zarr"
    yarr = zarr.create_array(str(ypath), shape=y.shape, chunks=(500, K), dtype="float64")
    yarr[:] = y
    return paths, str(ypath)


def _cluster_stats(cluster, zarr_data, fmap, dtype_tol_fields=None):
    paths, ypath = zarr_data
    out = {}
    with Client(cluster):
        for rows, path in paths.items():
            X = da.from_zarr(path)
            y = da.from_zarr(ypath)
            out[rows] = accumulate(X, y, fmap, split=0.2)
    return out


@pytest.mark.parametrize("dtype", ["float64", "float32", "float32-tiles"])
def test_bitwise_identical_across_chunkings_worker_counts_and_numpy(data, zarr_data, dtype, cluster2, make_cluster,
                                                                     monkeypatch):
    """Tiles follow a global grid of row indices (tiles cut by chunk boundaries are
    joined by fix-up tasks) and are summed with compensated arithmetic, so the
    statistics are bitwise identical for every chunking, worker count and for NumPy
    input, in float32 as in float64. This pass is small, so its float32 products run
    in float64; "float32-tiles" lowers the bound so that they run in float32 tiles."""
    if dtype == "float32-tiles":
        # the client decides and ships the choice with the pass: the workers need no patch
        monkeypatch.setattr(dxrf.stats.tiles, "WIDE_WORK", 0)
        dtype = "float32"
    X, y = data
    fmap = dxrf.RandomFourierFeatures(120, bandwidth=2.0, dtype=dtype, random_state=0).fit(X)
    with dxrf.options(tile_bytes=300 * 120 * np.dtype(dtype).itemsize):  # 300-row tiles: many cut by chunks
        two = _cluster_stats(cluster2, zarr_data, fmap)
        one = _cluster_stats(make_cluster(1), zarr_data, fmap)
        ref = accumulate(X, y, fmap, split=0.2)
        threaded = accumulate(da.from_array(X, chunks=(433, D)), y, fmap, split=0.2)
    Z = fmap.transform(X).astype(np.float64)
    mask = hashed_split(0, N, 0.2)
    assert rel(ref[0].gram, Z[~mask].T @ Z[~mask]) <= (1e-12 if dtype == "float64" else 1e-6)
    for candidate in [*two.values(), *one.values(), threaded]:
        for part in (0, 1):
            for field in ("gram", "sum", "cross", "ysum", "yy"):
                np.testing.assert_array_equal(getattr(candidate[part], field), getattr(ref[part], field))
            assert candidate[part].n == ref[part].n


def test_small_float32_passes_multiply_in_float64(data, monkeypatch):
    """DESIGN.md, "Precision of the pass": below N M (M + d) = WIDE_WORK the products of
    float32 features are float64, and the features are transform's row-independent ones."""
    from dxrf.stats import tiles as stats_tiles

    X, y = data
    fmap = dxrf.RandomFourierFeatures(120, bandwidth=2.0, random_state=0).fit(X)
    kernel = fmap.kernel_
    Z = kernel.raw_rowwise(X).astype(np.float64) * kernel.scale  # transform's features before its float32 scaling
    np.testing.assert_array_equal(kernel.raw_rowwise(X[:7]), kernel.raw_rowwise(X)[:7])
    wide = accumulate(X, y, fmap)
    assert rel(wide.gram, Z.T @ Z) <= 1e-14 and rel(wide.cross, Z.T @ y) <= 1e-14
    # the bound: N M (M + d) multiply-adds, all of X's rows, and M at most WIDE_MAX_FEATURES
    limit = stats_tiles.WIDE_WORK // (120 * (120 + D))
    assert stats_tiles.wide_products(kernel, limit) and not stats_tiles.wide_products(kernel, limit + 1)
    assert not stats_tiles.wide_products(kernel.astype("float64"), 1)
    big = dxrf.RandomFourierFeatures(stats_tiles.WIDE_MAX_FEATURES + 1, bandwidth=2.0, random_state=0).fit(X[:1])
    assert not stats_tiles.wide_products(big.kernel_, 1)
    # a block of a larger pass makes the larger pass's choice
    assert rel(block_stats(X, y, kernel, total_rows=limit).gram, wide.gram) <= 1e-15
    tiles = block_stats(X, y, kernel, total_rows=limit + 1, blas_threads=1)  # one BLAS thread, as in a pass
    assert 1e-10 < rel(tiles.gram, Z.T @ Z) <= 1e-5  # float32 tiles: float32 rounding
    monkeypatch.setattr(stats_tiles, "WIDE_WORK", 0)
    narrow = accumulate(X, y, fmap)
    for field in ("gram", "sum", "cross"):
        np.testing.assert_array_equal(getattr(narrow, field), getattr(tiles, field))
