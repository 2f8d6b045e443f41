"""The device (CuPy) path of the statistics pass.

Without a GPU the device branches still run: a stand-in array module that
forwards to NumPy is reported as "the device", so every line of the dispatch
(device checks, device sums copied to the host, lanes, fragments, splits) is
exercised and compared with the host pass. With CuPy and a GPU the real thing
runs too.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest

import dxrf
from dxrf.core import device as _device
from dxrf.stats import compensated
from dxrf.stats import tiles as stats_tiles
from dxrf.kernels import blocks

N, D, M = 2600, 6, 64


class _StandIn:
    """Forwards everything to NumPy under another name, so ``xp is not np``."""

    __name__ = "standin"

    def __getattr__(self, name):
        return getattr(np, name)


@pytest.fixture
def standin(monkeypatch):
    """Make the pass treat every block as a device block; count device checks."""
    xp = _StandIn()
    xp.checked = 0
    check = stats_tiles.check_stats_block

    def counted(X, *args):
        xp.checked += stats_tiles.array_module(X) is xp
        return check(X, *args)

    monkeypatch.setattr(stats_tiles, "array_module", lambda a: xp)
    monkeypatch.setattr(stats_tiles, "check_stats_block", counted)
    return xp


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(N, D))
    y = np.column_stack([np.sin(X[:, 0]), X[:, 1] ** 2])
    return X, y


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-12), ("float32", 1e-5)])
@pytest.mark.parametrize("split", [None, 0.3])
def test_device_branch_matches_host_pass(data, request, dtype, tol, split):
    X, y = data
    fmap = dxrf.RandomFourierFeatures(M, bandwidth=2.0, dtype=dtype, random_state=0).fit(X)
    want = dxrf.accumulate(X.astype(dtype), y, features=fmap, split=split, tile_rows=500)  # host pass
    xp = request.getfixturevalue("standin")
    # 700-row chunks cut the 500-row tiles: fragments and fix-up tasks are exercised
    Xd = da.from_array(X.astype(dtype), chunks=(700, D))
    yd = da.from_array(y, chunks=(700, 2))
    with dask.config.set(scheduler="sync"):
        got = dxrf.accumulate(Xd, yd, features=fmap, split=split, tile_rows=500, lanes=2)
    assert xp.checked >= 4  # every chunk (and fix-up) went through the device branch
    got, want = (got, want) if split else ((got,), (want,))
    for g, w in zip(got, want):
        assert g.n == w.n
        for field in ("gram", "sum", "cross", "ysum", "yy"):
            a, b = getattr(g, field), getattr(w, field)
            assert np.linalg.norm(a - b) <= tol * np.linalg.norm(b), field


def test_device_branch_rejects_nan(data, standin):
    X, _ = data
    X = X.copy()
    X[1234, 2] = np.nan
    fmap = dxrf.RandomFourierFeatures(M, bandwidth=2.0, random_state=0).fit(X[:10])
    with dask.config.set(scheduler="sync"), pytest.raises(ValueError, match="first at row 1234"):
        dxrf.accumulate(da.from_array(X, chunks=(1000, D)), features=fmap)


def test_device_sums_travel_as_host_sums_and_move_back(standin):
    import pickle

    rng = np.random.default_rng(0)
    sums = compensated.CompensatedSums(3, 1, standin)
    Z = rng.standard_normal((5, 3))
    sums.add("gram", Z.T @ Z)
    sums.add("sum", Z.sum(axis=0))
    sums.n = 5
    host = pickle.loads(pickle.dumps(sums))  # what a transfer between workers or a spill does
    assert host.xp is np and host.n == 5 and host.hi["gram"].shape == (compensated.packed_size(3),)
    back = host.on(standin)
    assert back.xp is standin and host.on(np) is host and back.on(standin) is back
    # a device lane merges host partials (fix-up tiles) and the reverse; finishing copies to the host
    total = compensated.CompensatedSums(3, 1, standin).merge(host)
    other = compensated.CompensatedSums(3, 1).merge(back)
    for s in (back, total, other):
        got = s.finish(np.ones(3))
        np.testing.assert_array_equal(got.gram, Z.T @ Z)
        assert got.n == 5


def test_a_device_lane_that_travelled_between_chunks_gives_the_same_statistics(data, standin, monkeypatch):
    import pickle

    X, y = data
    fmap = dxrf.RandomFourierFeatures(M, bandwidth=2.0, random_state=0).fit(X)
    Xd, yd = da.from_array(X, chunks=(650, D)), da.from_array(y, chunks=(650, 2))
    with dask.config.set(scheduler="sync"):
        want = dxrf.accumulate(Xd, yd, features=fmap, tile_rows=325, lanes=2)
    block = stats_tiles._stats_block

    calls = []

    def travelled(X, columns, rows, cfg, running):  # every running partial crosses a pickle
        calls.append(running is not None)
        return block(X, columns, rows, cfg, None if running is None else pickle.loads(pickle.dumps(running)))

    monkeypatch.setattr(stats_tiles, "_stats_block", travelled)
    with dask.config.set(scheduler="sync"):
        got = dxrf.accumulate(Xd, yd, features=fmap, tile_rows=325, lanes=2)
    assert len(calls) == 4 and sum(calls) == 2  # two lanes of two chunks: two partials travelled
    for field in ("gram", "sum", "cross", "ysum", "yy"):
        np.testing.assert_array_equal(getattr(got, field), getattr(want, field), err_msg=field)


def test_array_module_is_numpy_without_cupy():
    a = np.zeros(3)
    assert _device.array_module(a) is np and not _device.is_device_array(a)
    assert _device.to_host(a) is a
    k = dxrf.RandomFourierFeatures(8, bandwidth=1.0, random_state=0).fit(np.zeros((1, 2))).kernel_
    assert _device.kernel_on(k, np) is k
    assert blocks.project(np.ones((2, 2)), np.ones((2, 3))).shape == (2, 3)


def _gpu_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


@pytest.mark.skipif(not _gpu_available(), reason="needs CuPy and a GPU")
@pytest.mark.parametrize("sampling", ["iid", "structured"])
def test_cupy_blocks_match_numpy_pass(data, sampling):
    import cupy

    X, y = data
    fmap = dxrf.RandomFourierFeatures(M, bandwidth=2.0, sampling=sampling, dtype="float32", random_state=0).fit(X)
    Xg = da.from_array(X.astype(np.float32), chunks=(700, D)).map_blocks(cupy.asarray)
    yg = da.from_array(y, chunks=(700, 2)).map_blocks(cupy.asarray)
    with dask.config.set(scheduler="threads"):
        got = dxrf.accumulate(Xg, yg, features=fmap, split=0.25)
    want = dxrf.accumulate(X.astype(np.float32), y, features=fmap, split=0.25)
    for g, w in zip(got, want):
        assert g.n == w.n
        for field in ("gram", "sum", "cross"):
            a, b = getattr(g, field), getattr(w, field)
            assert isinstance(a, np.ndarray)
            assert np.linalg.norm(a - b) <= 1e-5 * np.linalg.norm(b), field


@pytest.mark.skipif(not _gpu_available(), reason="needs CuPy and a GPU")
@pytest.mark.parametrize("dtype,tol", [("float32", 1e-5), ("float64", 1e-12)])
def test_device_gram_fills_the_upper_triangle_that_the_sums_read(dtype, tol):
    import cupy

    Z = np.random.default_rng(2).standard_normal((3000, 300)).astype(dtype)
    out = cupy.zeros((300, 300), dtype=dtype)
    _device.gram_into(cupy.asarray(Z), out)
    got, want = np.triu(out.get()), np.triu(Z.T.astype(np.float64) @ Z)
    assert np.linalg.norm(got - want) <= tol * np.linalg.norm(want)
    host = np.empty((300, 300), dtype=dtype)
    assert _device.gram_into(Z, host) is host
    np.testing.assert_allclose(host, Z.T @ Z, rtol=tol)


@pytest.mark.skipif(not _gpu_available(), reason="needs CuPy and a GPU")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_device_compensated_add_equals_the_host_add_bitwise(dtype):
    import cupy

    rng = np.random.default_rng(5)
    hi, lo = np.zeros((40, 70)), np.zeros((40, 70))
    hi_d, lo_d = cupy.asarray(hi), cupy.asarray(lo)
    for scale in (1.0, 1e8, 1e-8, 3.0):
        x = (rng.standard_normal((40, 70)) * scale).astype(dtype)
        compensated.compensated_add(hi, lo, x)
        compensated.compensated_add(hi_d, lo_d, cupy.asarray(x))
        # a strided view, as the Gram's bands are
        compensated.compensated_add(hi[:, 10:], lo[:, 10:], x[:, :60])
        compensated.compensated_add(hi_d[:, 10:], lo_d[:, 10:], cupy.asarray(x)[:, :60])
    np.testing.assert_array_equal(hi_d.get(), hi)
    np.testing.assert_array_equal(lo_d.get(), lo)


@pytest.mark.skipif(not _gpu_available(), reason="needs CuPy and a GPU")
@pytest.mark.parametrize("m", [64, 150, 192])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_device_packed_gram_sums_equal_the_host_sums_bitwise(m, dtype):
    import cupy

    rng = np.random.default_rng(m)
    host = compensated.CompensatedSums(m, None)
    dev = compensated.CompensatedSums(m, None, cupy)
    for scale in (1.0, 1e8, 1e-8, 3.0):
        Z = (rng.standard_normal((2 * m, m)) * scale).astype(dtype)
        G = Z.T @ Z
        G[np.tril_indices(m, -1)] = 0  # as the device's syrk leaves it
        host.add("gram", G)
        dev.add("gram", cupy.asarray(G))
    back = dev.to_host()
    np.testing.assert_array_equal(back.hi["gram"], host.hi["gram"])
    np.testing.assert_array_equal(back.lo["gram"], host.lo["gram"])
    assert np.count_nonzero(host.lo["gram"]) > 0  # the compensation was exercised


def test_tile_timings_time_the_device_path_part_by_part(standin):
    from dxrf.stats import tile_timings

    X = np.random.default_rng(1).standard_normal((300, D)).astype(np.float32)
    kernel = dxrf.RandomFourierFeatures(M, bandwidth=2.0, dtype="float32", random_state=0).fit(X).kernel_
    parts = tile_timings(kernel, X, repeats=2)
    assert set(parts) == {"tile", "features", "column sums", "syrk", "compensated add"}
    assert all(v > 0 for v in parts.values())
