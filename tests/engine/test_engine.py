"""The pass engine: multi-map statistics from one read, scoring many models in one pass,
the reduction's limits, and results independent of chunking, workers and NumPy input."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from distributed import Client

import dxrf
from dxrf.engine import Pass, Rows, cut_tiles, fan_in, row_starts, run_pass, tree_reduce
from dxrf.stats.scoring import LinearModels, score_models
from dxrf.stats.accumulation import accumulate, hashed_split

N, D = 2400, 5
FIELDS = ("gram", "sum", "cross", "ysum", "yy")


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(N, D))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=N)
    return X, y


def _maps(X, dtype):
    return [
        dxrf.RandomFourierFeatures(60, bandwidth=1.0, dtype=dtype, random_state=0).fit(X),
        dxrf.RandomFourierFeatures(90, bandwidth=3.0, dtype=dtype, random_state=1).fit(X),
        dxrf.RandomReLUFeatures(40, dtype=dtype, random_state=2).fit(X),
        dxrf.RandomMaxoutFeatures(30, pieces=3, dtype=dtype, random_state=3).fit(X),
    ]


def _equal(a, b):
    for part in (0, 1):
        for field in FIELDS:
            np.testing.assert_array_equal(getattr(a[part], field), getattr(b[part], field))
        assert a[part].n == b[part].n


@pytest.fixture(scope="module")
def zarr_paths(tmp_path_factory, data):
    X, y = data
    root = tmp_path_factory.mktemp("engine")
    paths = {}
    for rows in (300, 1000, 1777):
        arr = zarr.create_array(str(root / f"X-{rows}.zarr"), shape=X.shape, chunks=(rows, D), dtype="float64")
        arr[:] = X
        paths[rows] = str(root / f"X-{rows}.zarr")
    yarr = zarr.create_array(str(root / "y.zarr"), shape=y.shape, chunks=(500,), dtype="float64")
    yarr[:] = y
    return paths, str(root / "y.zarr")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_many_maps_in_one_read_equal_single_map_passes(data, zarr_paths, dtype, cluster2, make_cluster):
    """Each map's statistics from one multi-map pass are bitwise those of a pass with that
    map alone, over three chunkings of real zarr data, on 1 and 2 worker processes."""
    X, y = data
    maps = _maps(X, dtype)
    paths, ypath = zarr_paths
    # small tiles of different sizes per map: many tiles cut by chunk boundaries, fix-ups per grid
    with dxrf.options(tile_bytes=250 * 90 * np.dtype(dtype).itemsize, min_tile_rows=16):
        singles = [accumulate(X, y, m, split=0.25) for m in maps]
        assert len({dxrf.stats.tiles.default_tile_rows(m.kernel_, dxrf.get_options()) for m in maps}) > 1
        for cluster in (cluster2, make_cluster(1)):
            with Client(cluster):
                for path in paths.values():
                    many = accumulate(da.from_zarr(path), da.from_zarr(ypath), maps, split=0.25)
                    assert len(many) == len(maps)
                    for got, want in zip(many, singles):
                        _equal(got, want)
        in_process = accumulate(X, y, maps, split=0.25)
    for got, want in zip(in_process, singles):
        _equal(got, want)
    Z = maps[1].transform(X).astype(np.float64)
    mask = hashed_split(0, N, 0.25)
    tol = 1e-12 if dtype == "float64" else 1e-5
    np.testing.assert_allclose(singles[1][1].gram, Z[mask].T @ Z[mask], rtol=tol, atol=tol)


def test_many_maps_read_each_chunk_once(data, tmp_path, client):
    """The multi-map pass reads X once: one read per chunk, whatever the number of maps."""
    from dxrf.workflows.bench_fig2_grid import counted, take_reads

    X, y = data
    path = str(tmp_path / "X.zarr")
    arr = zarr.create_array(path, shape=X.shape, chunks=(400, D), dtype="float64")
    arr[:] = X
    maps = _maps(X, "float64")
    Xd = counted(da.from_zarr(path), "X")
    take_reads(client)
    accumulate(Xd, y, maps[0])
    one = take_reads(client).get("X", 0)
    accumulate(Xd, y, maps)
    four = take_reads(client).get("X", 0)
    assert one == four == Xd.numblocks[0]


def test_many_maps_bad_input(data):
    X, y = data
    maps = _maps(X, "float64")
    with pytest.raises(ValueError, match="empty list"):
        accumulate(X, y, [])
    narrow = dxrf.RandomFourierFeatures(10, bandwidth=1.0, random_state=0).fit(X[:, :3])
    with pytest.raises(ValueError, match="different numbers of input columns"):
        accumulate(X, y, [maps[0], narrow])
    for bad in (0, -5, 2.5, True):
        with pytest.raises(ValueError, match="tile_rows"):
            accumulate(X, y, maps[0], tile_rows=bad)
    for bad in (1, 0, -1):
        with pytest.raises(ValueError, match="split_every"):
            accumulate(da.from_array(X, chunks=500), y, maps[0], split_every=bad)


# -- scoring many models in one pass ------------------------------------------------------


def _dense_scores(Z, coef, icpt, y, task, link):
    S = np.einsum("nm,pmk->npk", Z, coef) + icpt[None]
    if task == "regression":
        return {"mse": ((S - y.reshape(len(y), 1, -1)) ** 2).mean(axis=(0, 2))}
    codes = y.astype(int)
    k = coef.shape[2]
    if k == 1:
        t = np.where(codes == 1, 1.0, -1.0)
        out = {"mse": ((S[:, :, 0] - t[:, None]) ** 2).mean(axis=0), "error": ((S[:, :, 0] > 0) != (codes[:, None] == 1)).mean(axis=0)}
        if link == "logistic":
            out["log_loss"] = np.log1p(np.exp(-t[:, None] * S[:, :, 0])).mean(axis=0)
        return out
    onehot = -np.ones((len(codes), 1, k))
    onehot[np.arange(len(codes)), 0, codes] = 1
    out = {"mse": ((S - onehot) ** 2).mean(axis=(0, 2)), "error": (S.argmax(axis=2) != codes[:, None]).mean(axis=0)}
    if link == "softmax":
        P = np.exp(S) / np.exp(S).sum(axis=2, keepdims=True)
        out["log_loss"] = -np.log(P[np.arange(len(codes)), :, codes]).mean(axis=0)
    return out


def _model_sets(X, rng):
    maps = _maps(X, "float64")
    idx = rng.integers(0, 90, size=25)
    idx[:3] = 7  # repeated candidates
    return [
        ("regression", LinearModels(maps[0], rng.normal(size=(4, 60, 1)), rng.normal(size=(4, 1)))),
        ("regression", LinearModels(maps[1], rng.normal(size=(3, 25, 1)), 0.3, index=idx, scales=rng.uniform(0.5, 2, 25))),
        ("binary", LinearModels(maps[2], rng.normal(size=(2, 40, 1)), rng.normal(size=(2, 1)), task="classification", link="logistic")),
        ("multi", LinearModels(maps[3], rng.normal(size=(3, 30, 4)), rng.normal(size=(3, 4)), task="classification", link="softmax")),
    ]


def _dense_for(model, X):
    from dxrf.stats.accumulation import resolve_kernel

    Z = resolve_kernel(model.features).__call__(X).astype(np.float64)
    coef = np.asarray(model.coef, dtype=np.float64)
    if model.index is not None:
        Z = Z[:, model.index] * model.scales
    icpt = np.broadcast_to(np.asarray(model.intercept, dtype=np.float64).reshape(-1, coef.shape[2]) if np.ndim(model.intercept)
                           else np.full((1, coef.shape[2]), model.intercept), (coef.shape[0], coef.shape[2]))
    return Z, coef, icpt


def test_scoring_pass_equals_dense_numpy_and_is_chunking_invariant(data, zarr_paths, client):
    X, y = data
    rng = np.random.default_rng(5)
    sets = _model_sets(X, rng)
    targets = {"regression": y, "binary": (y > np.median(y)).astype(np.int64),
               "multi": np.digitize(y, np.quantile(y, [0.25, 0.5, 0.75]))}
    mask = hashed_split(0, N, 0.3)
    paths, _ = zarr_paths
    for kind in ("regression", "binary", "multi"):
        models = [m for k, m in sets if k == kind]
        t = targets[kind]
        ref_train, ref_valid = score_models(X, t, models, split=0.3)
        for model, tr, va in zip(models, ref_train, ref_valid):
            Z, coef, icpt = _dense_for(model, X)
            for rows, got in ((~mask, tr), (mask, va)):
                want = _dense_scores(Z[rows], coef, icpt, t[rows], model.task, model.link)
                assert got.n == rows.sum()
                for name, w in want.items():
                    np.testing.assert_allclose(getattr(got, name), w, rtol=1e-10, atol=0)
        for path in paths.values():
            Xd = da.from_zarr(path)
            tr, va = score_models(Xd, t, models, split=0.3)
            for a, b in zip((*tr, *va), (*ref_train, *ref_valid)):
                for name in ("mse", "error", "log_loss"):
                    if getattr(b, name) is not None:
                        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    # the mask form of the split and no split at all
    (all_rows,) = [score_models(X, y, [sets[0][1]])]
    Z, coef, icpt = _dense_for(sets[0][1], X)
    np.testing.assert_allclose(all_rows[0].mse, _dense_scores(Z, coef, icpt, y, "regression", "identity")["mse"], rtol=1e-10)
    tr, va = score_models(da.from_array(X, chunks=700), y, [sets[0][1]], split=da.from_array(mask, chunks=500))
    np.testing.assert_array_equal(va[0].mse, ref_valid_mse(sets[0][1], X, y, mask))


def ref_valid_mse(model, X, y, mask):
    return score_models(X, y, [model], split=mask)[1][0].mse


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(task="ranking"), "task must be one of"),
        (dict(link="probit"), "link must be one of"),
        (dict(coef=np.ones((2, 59, 1))), "coef has 59 rows"),
        (dict(coef=np.full((1, 60, 1), np.nan)), "NaN"),
        (dict(coef=np.ones((1, 60, 2)), link="logistic"), "one output"),
        (dict(index=np.array([0, 99]), coef=np.ones((1, 2, 1))), "index out of range"),
        (dict(intercept=np.ones(3)), "intercept"),
    ],
)
def test_scoring_bad_models(data, change, message):
    X, y = data
    fmap = dxrf.RandomFourierFeatures(60, bandwidth=1.0, random_state=0).fit(X)
    kw = dict(features=fmap, coef=np.ones((1, 60, 1)), intercept=0.0)
    kw.update(change)
    with pytest.raises(ValueError, match=message):
        score_models(X, y, [LinearModels(**kw)])


def test_scoring_bad_targets(data):
    X, y = data
    fmap = dxrf.RandomFourierFeatures(60, bandwidth=1.0, random_state=0).fit(X)
    clf = LinearModels(fmap, np.ones((1, 60, 3)), task="classification")
    with pytest.raises(ValueError, match="class codes must lie in 0..2"):
        score_models(X, np.full(N, 5), [clf])
    with pytest.raises(ValueError, match="integer class codes"):
        score_models(X, np.full(N, 0.5), [clf])
    with pytest.raises(ValueError, match="empty"):
        score_models(X, y, [])
    with pytest.raises(ValueError, match="rows but X has"):
        score_models(X, y[:10], [clf])


# -- the engine's own pieces ----------------------------------------------------------------


def test_row_starts_tiles_and_cut_tiles():
    chunks = (250, 250, 600, 100)
    assert row_starts(chunks) == [0, 250, 500, 1100]
    tiles = list(Rows(250, 500, 1200).tiles(300))
    assert tiles == [(250, 300, 0, False), (300, 500, 1, False)]
    assert list(Rows(900, 1200, 1200).tiles(300)) == [(900, 1200, 3, True)]
    assert cut_tiles(chunks, 300) == {0: [0, 1], 1: [1, 2], 3: [2, 3]}
    assert cut_tiles((300, 300), 300) == {}


def test_fan_in_is_capped_by_partial_size():
    assert fan_in(0, 8) == 8
    assert fan_in(1, 8) == 8
    assert fan_in(16 * 2**20, 8) == 2
    assert fan_in(10**12, 8) == 2
    with pytest.raises(ValueError, match="at least 2"):
        tree_reduce([1, 2], lambda *a: sum(a), 1)
    with pytest.raises(ValueError, match="at least one"):
        tree_reduce([], lambda *a: sum(a), 2)
    assert dask.compute(tree_reduce(list(range(10)), lambda *a: sum(a), 3))[0] == 45


def _sum_block(X, columns, rows, offset, running):
    return float(np.asarray(X).sum()) + offset * (rows.stop - rows.start)


def test_run_pass_in_process_and_on_dask_agree(data):
    X, _ = data
    spec = Pass(block=_sum_block, merge=lambda *p: sum(p))
    want = X.sum() + 2.0 * N
    opts = dxrf.get_options()
    assert run_pass(spec, X, (), (2.0,), options=opts) == pytest.approx(want)
    assert run_pass(spec, da.from_array(X, chunks=333), (), (2.0,), options=opts) == pytest.approx(want)


def test_bench_multimap_smoke(tmp_path):
    """The benchmark runs as the command would, and counts one read of X against K."""
    from dxrf.workflows import bench_multimap
    from dxrf.workflows._common import bench_args

    args = bench_args(bench_multimap, ["--n-rows", "4e4", "--n-features", "6", "--m0", "40", "--chunk-rows", "10000",
                                       "--repeats", "1", "--warm", "--out", str(tmp_path)])
    res = bench_multimap.run(args)
    assert res["bytes_read_multi"] == 4 * 10_000 * 6 * 4
    assert res["bytes_read_singles"] == 4 * res["bytes_read_multi"]
    assert res["multi_s"] > 0 and res["single_passes_s"] > 0
    assert (tmp_path / "bench-multimap.json").exists()


def test_bench_tile_smoke(tmp_path):
    from dxrf.workflows import bench_tile
    from dxrf.workflows._common import bench_args

    res = bench_tile.run(bench_args(bench_tile, ["--m0", "64", "--rows", "500", "--n-features", "5", "--repeats", "1",
                                                 "--out", str(tmp_path)]))
    (run,) = res["runs"]
    assert 0.0 < run["outside_syrk"] < 1.0 and run["seconds"]["syrk"] > 0
    assert (tmp_path / "bench-tile.json").exists()


def test_folds_are_groups_of_both_passes_and_chunking_invariant(data, zarr_paths, client):
    """k hashed folds, summed apart in one read: each fold equals a pass with that fold as its validation
    mask (statistics bitwise, scores to rounding), whatever the chunking, from zarr on a cluster."""
    from dxrf.engine import hashed_folds

    X, y = data
    paths, _ = zarr_paths
    fmap = dxrf.RandomFourierFeatures(40, bandwidth=1.0, dtype="float64", random_state=0).fit(X)
    labels = hashed_folds(0, N, 3, 9)
    assert sorted(np.unique(labels)) == [0, 1, 2]
    coef = np.random.default_rng(0).normal(size=(4, 40, 1))
    models = [LinearModels(fmap, coef)]
    results = []
    for rows in (300, 1777):
        Xz = da.from_zarr(paths[rows])
        folds = accumulate(Xz, y, fmap, folds=3, split_seed=9)
        scores = score_models(Xz, y, models, folds=3, split_seed=9)
        for j in range(3):
            _, valid = accumulate(Xz, y, fmap, split=labels == j)
            for field in FIELDS:
                np.testing.assert_array_equal(getattr(folds[j], field), getattr(valid, field))
            _, ref = score_models(Xz, y, models, split=labels == j)
            np.testing.assert_allclose(scores[j][0].mse, ref[0].mse, rtol=1e-12)
            assert scores[j][0].n == ref[0].n == int((labels == j).sum())
        results.append((folds, scores))
    for a, b in zip(results[0][0], results[1][0]):
        np.testing.assert_array_equal(a.gram, b.gram)
    with pytest.raises(ValueError, match="either split .* or folds"):
        accumulate(X, y, fmap, split=0.2, folds=3)
    with pytest.raises(ValueError, match="folds must be an integer of at least 2"):
        score_models(X, y, models, folds=1)
