"""Runtime knobs are checked before any work: a wrong type is a TypeError, a value out of range a ValueError.

Each message names the parameter and its accepted range. Values that used to
hang (``split_every=1`` looped forever, ``tile_rows=-5`` until MemoryError)
run under a guard alarm, so a regression fails instead of hanging the suite.
"""

from __future__ import annotations

import signal

import dask.array as da
import numpy as np
import pytest

import dxrf
from dxrf.cluster import get_client, local_cluster
from dxrf.engine import tile_grid
from dxrf.stats.accumulation import block_stats

rng = np.random.default_rng(0)
X = rng.normal(size=(120, 3))
y = X[:, 0] - X[:, 1]
Xd = da.from_array(X, chunks=(30, 3))
yd = da.from_array(y, chunks=30)
FEATURES = dxrf.RandomFourierFeatures(10, bandwidth=1.0, random_state=0).fit(X)
KERNEL = FEATURES.kernel_


def acc(**kw):
    return lambda: dxrf.accumulate(Xd, yd, FEATURES, **kw)


def with_options(**kw):
    def run():
        with dxrf.options(**kw):
            dxrf.accumulate(Xd, None, FEATURES)

    return run


def assign_option(name, value):
    def run():
        before = dxrf.get_options().__dict__.copy()
        try:
            setattr(dxrf.get_options(), name, value)
        finally:
            assert dxrf.get_options().__dict__ == before, "a refused assignment changed the options"

    return run


def scores(**kw):
    def run():
        coef = np.zeros((10, 1))
        dxrf.score_models(Xd, yd, [dxrf.LinearModels(FEATURES, coef)], **kw)

    return run


CASES = [
    # id, call, error, message
    ("split_every=1", acc(split_every=1), ValueError, r"split_every must be an integer of at least 2 or None, got 1"),
    ("split_every=0", acc(split_every=0), ValueError, r"split_every must be an integer of at least 2"),
    ("split_every=-1", acc(split_every=-1), ValueError, r"split_every must be an integer of at least 2 or None, got -1"),
    ("split_every=2.5", acc(split_every=2.5), TypeError, r"split_every must be an integer of at least 2"),
    ("split_every=True", acc(split_every=True), TypeError, r"split_every must be an integer of at least 2"),
    ("tile_rows=-5", acc(tile_rows=-5), ValueError, r"tile_rows must be a positive integer or None, got -5"),
    ("tile_rows=0", acc(tile_rows=0), ValueError, r"tile_rows must be a positive integer or None, got 0"),
    ("tile_rows='10'", acc(tile_rows="10"), TypeError, r"tile_rows must be a positive integer"),
    ("lanes=0", acc(lanes=0), ValueError, r"lanes must be a positive integer or None, got 0"),
    ("lanes=True", acc(lanes=True), TypeError, r"lanes must be a positive integer or None, got True"),
    ("split_seed=-1", acc(split=0.2, split_seed=-1), ValueError, r"split_seed must be an integer in 0\.\.2\*\*64-1, got -1"),
    ("split_seed=2**64", acc(split=0.2, split_seed=2**64), ValueError, r"split_seed must be an integer in 0\.\.2\*\*64-1"),
    ("split_seed='a'", acc(split=0.2, split_seed="a"), TypeError, r"split_seed must be an integer in 0\.\.2\*\*64-1"),
    ("progress='yes'", acc(progress="yes"), TypeError, r"progress must be True, False or None, got 'yes'"),
    ("folds=1", acc(folds=1), ValueError, r"folds must be an integer of at least 2"),
    ("score-split_seed", scores(split=0.2, split_seed=-3), ValueError, r"split_seed must be an integer in 0\.\.2\*\*64-1"),
    ("score-progress", scores(progress=1), TypeError, r"progress must be True, False or None"),
    ("block_stats-tile_rows=-5", lambda: block_stats(X, None, KERNEL, tile_rows=-5), ValueError,
     r"tile_rows must be a positive integer or None, got -5"),
    ("block_stats-tile_rows=0", lambda: block_stats(X, None, KERNEL, tile_rows=0), ValueError, r"tile_rows must be"),
    ("block_stats-row_offset", lambda: block_stats(X, None, KERNEL, row_offset=-1), ValueError,
     r"row_offset must be an integer >= 0, got -1"),
    ("block_stats-blas_threads", lambda: block_stats(X, None, KERNEL, blas_threads=0), ValueError,
     r"blas_threads must be a positive integer or None, got 0"),
    ("tile_grid-0", lambda: tile_grid(0, 10, 0), ValueError, r"tile_rows must be a positive integer, got 0"),
    ("tile_grid-negative", lambda: tile_grid(0, 10, -5), ValueError, r"tile_rows must be a positive integer, got -5"),
    # options, by the context manager, set_options and assignment to the live object
    ("options-min_tile_rows=0-tile_bytes=0", with_options(min_tile_rows=0, tile_bytes=0), ValueError,
     r"option (tile_bytes|min_tile_rows) must be a positive integer, got 0"),
    ("options-tile_bytes='big'", with_options(tile_bytes="big"), TypeError, r"option tile_bytes must be a positive integer, got 'big'"),
    ("options-tile_bytes=True", with_options(tile_bytes=True), TypeError, r"option tile_bytes must be a positive integer"),
    ("options-split_every=1", with_options(split_every=1), ValueError, r"option split_every must be an integer >= 2, got 1"),
    ("options-blas_threads=0", with_options(blas_threads=0), ValueError, r"option blas_threads must be a positive integer"),
    ("options-progress=1", with_options(progress=1), TypeError, r"option progress must be True, False or None"),
    ("options-min-above-max", with_options(min_tile_rows=20_000), ValueError,
     r"option min_tile_rows \(20000\) exceeds max_tile_rows \(10000\)"),
    ("options-unknown", with_options(tile_size=5), ValueError, r"unknown dxrf option\(s\): \['tile_size'\]"),
    ("set_options-split_every=1", lambda: dxrf.set_options(split_every=1), ValueError, r"option split_every must be"),
    ("assign-split_every=1", assign_option("split_every", 1), ValueError, r"option split_every must be an integer >= 2"),
    ("assign-tile_bytes=0", assign_option("tile_bytes", 0), ValueError, r"option tile_bytes must be a positive integer"),
    ("assign-max_tile_rows=10", assign_option("max_tile_rows", 10), ValueError, r"option min_tile_rows \(256\) exceeds"),
    ("assign-unknown", assign_option("tile_size", 5), AttributeError, r"unknown dxrf option 'tile_size'"),
    # seeds and iteration counts of estimators, before their first pass
    ("random_state=-1", lambda: dxrf.RandomFourierFeatures(5, random_state=-1).fit(X), ValueError,
     r"random_state must be a non-negative integer"),
    ("random_state=True", lambda: dxrf.RandomFourierFeatures(5, random_state=True).fit(X), TypeError,
     r"random_state must be None, an int"),
    ("cv-max_iter=0", lambda: dxrf.RandomFeatureClassifierCV(max_iter=0).fit(Xd, yd > 0), ValueError,
     r"max_iter must be a positive integer, got 0"),
    ("cv-cv_seed=-1", lambda: dxrf.RandomFeatureRidgeCV(cv_seed=-1).fit(Xd, yd), ValueError,
     r"cv_seed must be an integer in 0\.\.2\*\*64-1, got -1"),
    ("classifier-max_iter=0", lambda: dxrf.RandomFeatureClassifier(FEATURES, max_iter=0).fit(X, y > 0), ValueError,
     r"max_iter must be a positive integer, got 0"),
    ("classifier-max_iter=True", lambda: dxrf.RandomFeatureClassifier(FEATURES, max_iter=True).fit(X, y > 0), TypeError,
     r"max_iter must be a positive integer, got True"),
    ("classifier-tol=nan", lambda: dxrf.RandomFeatureClassifier(FEATURES, tol=float("nan")).fit(X, y > 0), ValueError,
     r"tol must be a finite number >= 0, got nan"),
    ("cv-tol=-1", lambda: dxrf.RandomFeatureClassifierCV(tol=-1).fit(Xd, yd > 0), ValueError, r"tol must be a finite number >= 0"),
    ("cv-k-above-rows", lambda: dxrf.RandomFeatureRidgeCV(cv=2**70).fit(Xd, yd), ValueError,
     r"cv=\d+ folds for 120 rows: cv must be an integer k in 2\.\.120 \(at most one fold per row\)"),
    # clusters: refused before any process starts
    ("local_cluster-n_workers=-1", lambda: local_cluster(n_workers=-1), ValueError,
     r"n_workers must be a positive integer or None, got -1"),
    ("local_cluster-threads=0", lambda: local_cluster(n_workers=1, threads_per_worker=0), ValueError,
     r"threads_per_worker must be a positive integer, got 0"),
    ("local_cluster-memory_limit=-1", lambda: local_cluster(n_workers=1, memory_limit=-1), ValueError,
     r"memory_limit must be bytes \(>= 0, 0 for none\)"),
    ("local_cluster-memory_limit=True", lambda: local_cluster(n_workers=1, memory_limit=True), TypeError,
     r"memory_limit must be bytes"),
    ("get_client-n_workers=0", lambda: get_client(n_workers=0), ValueError, r"n_workers must be a positive integer or None, got 0"),
    ("get_client-n_workers=True", lambda: get_client(n_workers=True), TypeError, r"n_workers must be a positive integer"),
]


class _Hang(Exception):
    pass


@pytest.fixture
def guard():
    """Fail (instead of hanging the suite) when a case runs longer than 30 s."""
    if not hasattr(signal, "SIGALRM"):
        pytest.skip("needs SIGALRM")

    def on_alarm(signum, frame):
        raise _Hang("the call did not return within 30 s: the value was not refused up front")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(30)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("call,error,match", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_runtime_knobs_are_refused_up_front(call, error, match, guard, monkeypatch):
    import dxrf.engine.run as engine_run

    # nothing may reach the pass: a refused knob fails before any block is computed
    monkeypatch.setattr(engine_run, "_call_block", lambda *a, **k: pytest.fail("a block ran"))
    before = dxrf.get_options().__dict__.copy()
    with pytest.raises(error, match=match) as info:
        call()
    if error is TypeError:
        assert isinstance(info.value, TypeError)
    assert dxrf.get_options().__dict__ == before


def test_valid_knobs_still_run_and_agree(guard):
    """The checks take nothing away: the same statistics (up to float32 rounding of the tiles) with any valid split_every, tile_rows and lanes."""
    ref = dxrf.accumulate(Xd, yd, FEATURES)
    for kw in ({"split_every": 2}, {"tile_rows": 7}, {"lanes": 1}, {"tile_rows": np.int64(16), "split_every": np.int32(3)}):
        got = dxrf.accumulate(Xd, yd, FEATURES, **kw)
        np.testing.assert_allclose(got.gram, ref.gram, rtol=1e-5, atol=1e-5)
    with dxrf.options(min_tile_rows=1, tile_bytes=1, max_tile_rows=4):
        np.testing.assert_allclose(dxrf.accumulate(Xd, yd, FEATURES).gram, ref.gram, rtol=1e-5, atol=1e-5)


SPARSE_CASES = [
    ("accumulate-X", lambda S, tmp: dxrf.accumulate(S, features=FEATURES), "X"),
    ("accumulate-y", lambda S, tmp: dxrf.accumulate(X[:50], S[:, :1], FEATURES), "y"),
    ("accumulate-dask-of-sparse", lambda S, tmp: dxrf.accumulate(da.from_array(S, chunks=(10, 3)), features=FEATURES), "X"),
    ("score_models-X", lambda S, tmp: dxrf.score_models(S, y[:50], [dxrf.LinearModels(FEATURES, np.zeros(10))]), "X"),
    ("write_zarr-X", lambda S, tmp: dxrf.io.write_zarr(S, tmp / "s.zarr"), "X"),
    ("block_stats-X", lambda S, tmp: block_stats(S, None, KERNEL), "X"),
]


@pytest.mark.parametrize("call,name", [c[1:] for c in SPARSE_CASES], ids=[c[0] for c in SPARSE_CASES])
def test_sparse_input_is_refused_with_how_to_convert(call, name, tmp_path):
    import scipy.sparse as sp

    import dxrf.io

    S = sp.random(50, 3, density=0.5, format="csr", random_state=0)
    with pytest.raises(TypeError, match=rf"{name} is a SciPy sparse matrix; .*{name}\.toarray\(\)"):
        call(S, tmp_path)
    assert list(tmp_path.iterdir()) == []
