"""Two-stage ELSS (Algorithm 1's N0) inside a learner: the candidates over a
hashed sample of about N0 rows, then only the selected features over all rows.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import dxrf
from dxrf import RandomFourierFeatures, RandomFeatureRidge, accumulate
from dxrf.engine import hashed_split
from dxrf.solvers.ridge_path import solve_ridge
from dxrf.selection import LeverageScoreSampler

N, D, M, M0, N0 = 1200, 3, 12, 60, 300


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(N, D))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=N)
    return X, y


def sampler(**kw) -> LeverageScoreSampler:
    base = RandomFourierFeatures(bandwidth=1.5, dtype="float64")
    return LeverageScoreSampler(M, n_candidates=M0, n_samples=N0, base=base, random_state=4, **kw)


def assert_stats_close(a, b, rtol=1e-10):
    assert a.n == b.n
    for f in ("gram", "sum", "cross", "ysum", "yy"):
        np.testing.assert_allclose(getattr(a, f), getattr(b, f), rtol=rtol, atol=1e-9, err_msg=f)


def test_candidates_from_sample_and_selection_from_all_rows(data):
    X, y = data
    model = RandomFeatureRidge(sampler(), alpha=1e-3).fit(X, y)
    sel = model.features_
    assert model.n_passes_ == 2
    frac, seed = sel.row_sample(N)
    keep = hashed_split(0, N, frac, seed)
    assert 0.6 * N0 < keep.sum() < 1.4 * N0
    # pass 1: the candidates' statistics are those of the hashed subset, and only of it
    ref = accumulate(X[keep], y[keep], sel.candidates_.kernel_)
    assert sel.candidate_stats_.n == sel.n_samples_ == int(keep.sum())
    assert_stats_close(sel.candidate_stats_, ref)
    # pass 2: the selected features' statistics over all N rows
    full = accumulate(X, y, model.kernel_)
    assert model.kernel_.n_components == M
    coef, b = solve_ridge(full, 1e-3, True)
    np.testing.assert_allclose(model.coef_, coef[:, 0], rtol=1e-8, atol=1e-12)
    assert model.intercept_ == pytest.approx(float(b[0]), rel=1e-8, abs=1e-12)
    # and not the solution from the sampled rows' statistics
    part = accumulate(X[keep], y[keep], model.kernel_)
    assert not np.allclose(model.coef_, solve_ridge(part, 1e-3, True)[0][:, 0], rtol=1e-3)


def test_learner_selects_what_the_sampler_alone_selects(data):
    X, y = data
    alone = sampler().fit(X)
    inside = RandomFeatureRidge(sampler()).fit(X, y).features_
    assert alone.n_samples_ == inside.n_samples_ < N
    np.testing.assert_array_equal(alone.selected_, inside.selected_)
    np.testing.assert_allclose(alone.weights_, inside.weights_, rtol=1e-12)


def test_one_pass_without_n_samples_or_with_all_rows(data):
    X, y = data
    for n0 in (None, N):
        model = RandomFeatureRidge(sampler().set_params(n_samples=n0)).fit(X, y)
        assert model.n_passes_ == 1 and model.features_.n_samples_ == N


def test_validation_rows_stay_out_of_the_selection(data):
    X, y = data
    model = RandomFeatureRidge(sampler(), alphas=[1e-4, 1e-2], validation=0.25, validation_seed=2).fit(X, y)
    sel = model.features_
    frac, seed = sel.row_sample(N)
    rows = hashed_split(0, N, frac, seed) & ~hashed_split(0, N, 0.25, 2)
    assert_stats_close(sel.candidate_stats_, accumulate(X[rows], y[rows], sel.candidates_.kernel_))
    assert model.n_passes_ == 2


def test_invariant_to_chunking_from_zarr(data, tmp_path):
    X, y = data
    ref = RandomFeatureRidge(sampler()).fit(X, y)
    for chunk in (250, 499):
        path = tmp_path / f"X{chunk}.zarr"
        da.from_array(X, chunks=(chunk, D)).to_zarr(str(path))
        Xd = da.from_zarr(str(path))
        assert Xd.numblocks[0] > 1
        model = RandomFeatureRidge(sampler()).fit(Xd, da.from_array(y, chunks=chunk))
        assert model.n_passes_ == 2
        np.testing.assert_array_equal(model.features_.selected_, ref.features_.selected_)
        np.testing.assert_allclose(model.coef_, ref.coef_, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("bad", [0.0, 1.5, -0.2, "half"])
def test_bad_subsample(data, bad):
    X, y = data
    with pytest.raises((ValueError, TypeError), match="subsample"):
        accumulate(X, y, RandomFourierFeatures(5, bandwidth=1.0, random_state=0), subsample=bad)
