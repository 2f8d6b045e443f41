"""Passes re-cut uneven row chunks so every worker thread gets an even share, without changing a bit."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import zarr

import dxrf
import dxrf.engine.lanes as lanes_module
from dxrf.engine.lanes import _makespan, balanced
from dxrf.stats.accumulation import accumulate


def test_makespan_shares_chunks_largest_first():
    assert _makespan((50, 10), 2) == 50
    assert _makespan((30, 30), 2) == 30
    assert _makespan((40, 30, 20, 10), 2) == 50
    assert _makespan((7,), 1) == 7


def test_uneven_chunks_are_recut_evenly_on_a_cluster(client):
    X = da.zeros((600, 3), chunks=((500, 100), 3))
    assert balanced(X).chunks[0] == (300, 300)
    one = da.zeros((601, 3), chunks=((601,), 3))  # one chunk, two threads: one would idle
    assert balanced(one).chunks[0] == (300, 301)
    even = da.zeros((600, 3), chunks=((200, 200, 200), 3))  # shared out as 400:200, so 4 equal chunks
    assert balanced(even).chunks[0] == (150, 150, 150, 150)
    many = da.zeros((1000, 3), chunks=((100,) * 10, 3))  # already even: left as it is
    assert balanced(many) is many


def test_persisted_arrays_are_left_alone(client):
    from distributed import wait

    X = client.persist(da.zeros((600, 3), chunks=((500, 100), 3)))
    wait(X)
    assert balanced(X).chunks[0] == (500, 100)


def test_without_a_cluster_chunks_are_left_alone():
    Y = da.zeros((600, 3), chunks=((500, 100), 3))
    assert balanced(Y) is Y


def test_statistics_from_uneven_zarr_chunks_are_bitwise_the_unbalanced_ones(tmp_path, client, monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((900, 5))
    y = X @ rng.standard_normal(5)
    path = str(tmp_path / "X.zarr")
    zarr.create_array(path, shape=X.shape, chunks=(800, 5), dtype="float64")[:] = X
    Xd = da.from_zarr(path)
    kernel = dxrf.RandomFourierFeatures(n_components=40, bandwidth=2.0, random_state=0).fit(X).kernel_
    got = accumulate(Xd, y, kernel, split=0.2)
    monkeypatch.setattr(lanes_module, "IMBALANCE", np.inf)  # as before: one task per zarr chunk
    ref = accumulate(Xd, y, kernel, split=0.2)
    for a, b in zip(got, ref):
        for name in ("gram", "sum", "cross", "ysum", "yy"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name
        assert a.n == b.n
