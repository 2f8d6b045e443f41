"""bandwidth="ard": lengthscales learned on a row sample by the maps and the learners, from zarr on a cluster."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from distributed import Client

import dxrf
from dxrf.engine import hashed_split
from dxrf.features.maps import fit_map
from dxrf.kernels.gp import fit_ard


def data(n=1500, seed=0):
    """Columns 0-2 matter, 3-4 do not."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 5))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + np.cos(X[:, 2]) + 0.05 * rng.normal(size=n)
    return X, y


@pytest.fixture
def zarr_xy(tmp_path):
    X, y = data()
    path = str(tmp_path / "x.zarr")
    da.from_array(X, chunks=(260, 5)).to_zarr(path)
    return X, y, da.from_zarr(path), da.from_array(y, chunks=260)


@pytest.mark.slow
def test_nystroem_ard_ridge_from_zarr_beats_median_and_equals_numpy(cluster2, zarr_xy):
    X, y, Xd, yd = zarr_xy
    Xt, yt = data(1000, seed=9)

    def model(bandwidth):
        return dxrf.RandomFeatureRidge(
            dxrf.NystroemFeatures(300, bandwidth=bandwidth, ard_rows=400, random_state=3), alpha=1e-6
        )

    local = model("ard").fit(X, y)
    with Client(cluster2):
        remote = model("ard").fit(Xd, yd)
        median = model("median").fit(Xd, yd)
        pred = remote.predict(da.from_array(Xt, chunks=400)).compute()
    # the same sampled rows, hence the same lengthscales and landmarks
    np.testing.assert_array_equal(remote.features_.bandwidth_, local.features_.bandwidth_)
    np.testing.assert_array_equal(remote.features_.landmark_indices_, local.features_.landmark_indices_)
    # long lengthscales on two columns leave K_LL nearly singular: the workers' rounding of the
    # statistics (1e-13 for a scalar bandwidth) is amplified, so the predictions agree only
    # to about 1e-2 (y's std is about 1; measured 4e-3 at alpha=1e-4)
    diff = pred - local.predict(Xt)
    assert np.abs(diff).max() < 5e-2 and np.sqrt(np.mean(diff**2)) < 1e-2
    ell = remote.features_.bandwidth_
    assert ell.shape == (5,) and ell[3:].min() > 10 * ell[:3].max()
    # the read of the sample, the landmarks' race and the statistics
    assert remote.n_passes_ == median.n_passes_ == 3
    assert model(1.0).fit(X[:300], y[:300]).n_passes_ == 2
    mse_ard = np.mean((pred - yt) ** 2)
    mse_median = np.mean((median.predict(Xt) - yt) ** 2)
    assert mse_ard < 0.5 * mse_median, (mse_ard, mse_median)
    assert 0 < remote.features_.ard_noise_ < 0.05 and remote.features_.ard_signal_ > 0


def test_fourier_ard_learns_the_sample_of_gp_evidence():
    X, y = data(800)
    f = dxrf.RandomFourierFeatures(64, bandwidth="ard", ard_rows=300, random_state=1).fit(X, y)
    assert isinstance(f.bandwidth_, np.ndarray) and f.bandwidth_.shape == (5,)
    # the same rows and seed by hand: the map's lengthscales are fit_ard's on its sample
    rng = np.random.default_rng(1)
    idx = np.sort(rng.choice(800, size=300, replace=False))
    ref = fit_ard(X[idx], y[idx], restarts=1, random_state=int(rng.integers(2**63)))
    np.testing.assert_array_equal(f.bandwidth_, ref.lengthscales)
    assert f.ard_noise_ == ref.noise and f.ard_log_likelihood_ == ref.log_likelihood
    # a numeric bandwidth afterwards: no stale evidence
    f.set_params(bandwidth=2.0).fit(X)
    assert not hasattr(f, "ard_noise_") and f.bandwidth_ == 2.0


def test_weights_and_validation_rows():
    X, y = data(600)
    w = np.random.default_rng(2).uniform(0.5, 2.0, size=600)
    w[:100] = 0.0
    a = dxrf.NystroemFeatures(40, bandwidth="ard", ard_rows=400, random_state=0).fit(X, y, sample_weight=w)
    b = dxrf.NystroemFeatures(40, bandwidth="ard", ard_rows=400, random_state=0).fit(X, y)
    assert not np.array_equal(a.bandwidth_, b.bandwidth_)  # weights are used
    # a learner with a validation fraction learns on its training rows only
    mask = hashed_split(0, 600, 0.25, 11)
    ridge = dxrf.RandomFeatureRidge(
        dxrf.NystroemFeatures(40, bandwidth="ard", ard_rows=400, random_state=0), alphas=[1e-4, 1e-2],
        validation=0.25, validation_seed=11,
    ).fit(X, y)
    alone = dxrf.NystroemFeatures(40, bandwidth="ard", ard_rows=400, random_state=0).fit(X, y, sample_weight=~mask * 1.0)
    np.testing.assert_array_equal(ridge.features_.bandwidth_, alone.bandwidth_)


def test_classifier_learns_lengthscales_from_labels():
    X, y = data(800)
    labels = np.where(y > np.median(y), "hi", "lo")
    clf = dxrf.RandomFeatureClassifier(
        dxrf.RandomFourierFeatures(200, bandwidth="ard", ard_rows=400, random_state=0), alpha=1e-4
    ).fit(X, labels)
    ell = clf.features_.bandwidth_
    assert ell[3:].min() > 5 * ell[:2].max(), ell
    assert clf.n_passes_ == 2
    # the map given class labels directly encodes them the same way (+-1)
    f = dxrf.RandomFourierFeatures(200, bandwidth="ard", ard_rows=400, random_state=0).fit(X, labels)
    np.testing.assert_array_equal(f.bandwidth_, ell)


def test_save_and_load_keep_the_evidence(tmp_path):
    X, y = data(400)
    f = dxrf.NystroemFeatures(30, bandwidth="ard", ard_rows=200, random_state=0).fit(X, y)
    f.save(tmp_path / "m")
    g = dxrf.load(tmp_path / "m")
    np.testing.assert_array_equal(g.bandwidth_, f.bandwidth_)
    assert g.ard_noise_ == f.ard_noise_ and g.ard_signal_ == f.ard_signal_
    np.testing.assert_array_equal(g.transform(X[:7]), f.transform(X[:7]))


def test_bad_input():
    X, y = data(300)
    for make in (dxrf.NystroemFeatures, dxrf.RandomFourierFeatures):
        with pytest.raises(ValueError, match=rf"{make.__name__}\(bandwidth='ard'\).*y"):
            make(10, bandwidth="ard").fit(X)
        with pytest.raises(ValueError, match=rf"{make.__name__}\(bandwidth='ard'\).*no y"):
            fit_map(make(10, bandwidth="ard"), X)
        with pytest.raises(ValueError, match="gaussian kernel"):
            make(10, bandwidth="ard", kernel="laplacian").fit(X, y)
        with pytest.raises(ValueError, match="at least 50 rows"):
            make(10, bandwidth="ard").fit(X[:40], y[:40])
        with pytest.raises(ValueError, match="ard_rows"):
            make(10, bandwidth="ard", ard_rows=0).fit(X, y)
    with pytest.raises(ValueError, match="'median'"):
        dxrf.RandomReLUFeatures(10, bandwidth="ard").fit(X, y)
    with pytest.raises(ValueError, match="'ard'"):
        dxrf.RandomFourierFeatures(10, bandwidth="arf").fit(X, y)
    with pytest.raises(ValueError, match="y contains NaN"):
        dxrf.NystroemFeatures(10, bandwidth="ard").fit(X, np.r_[np.nan, y[1:]])


def test_leverage_landmarks_learn_once(monkeypatch):
    """The leverage pass's inner Fourier map takes the learned vector: one evidence fit, one read for it."""
    import dxrf.features.ard as ard

    calls = []
    monkeypatch.setattr(ard, "fit_ard", lambda *a, **k: calls.append(1) or fit_ard(*a, **k))
    X, y = data(500)
    make = lambda how: dxrf.NystroemFeatures(  # noqa: E731
        30, bandwidth="ard", ard_rows=200, landmarks=how, leverage_components=50, random_state=4
    ).fit(X, y)
    uniform, leverage = make("uniform"), make("leverage")
    np.testing.assert_array_equal(leverage.bandwidth_, uniform.bandwidth_)
    assert (uniform.n_passes_, leverage.n_passes_) == (2, 3)
    assert len(calls) == 2  # one per fit
