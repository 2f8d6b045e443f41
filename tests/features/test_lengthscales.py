"""Per-column lengthscales (a vector ``bandwidth``): exactly the bandwidth-1 map of ``X / l``.

Fourier features agree with that map to the bit (transform and the
statistics pass, on dask from zarr on a cluster); Nyström features to 1e-12
in float64. Also: an all-equal vector against the scalar map, save/load,
the search with vector candidates, and the refusals.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import zarr
from sklearn.base import clone

import dxrf
from dxrf import NystroemFeatures, RandomFourierFeatures
from dxrf.features.maps import format_bandwidth
from dxrf.search import format_table
from dxrf.stats.accumulation import accumulate

D = 5
ELL = np.array([0.3, 1.7, 2.9, 11.0, 0.05])

# (sampling, kernel): every sampling, with the kernels it is defined for
FOURIER = [
    ("iid", "gaussian"), ("iid", "laplacian"), ("iid", "cauchy"), ("orthogonal", "gaussian"),
    ("qmc", "gaussian"), ("qmc", "cauchy"), ("structured", "gaussian"),
]


def data(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D)) * ELL  # columns on the scales of the lengthscales
    y = np.sin(X[:, 0] / ELL[0]) + 0.1 * rng.normal(size=n)
    return X, y


def fourier_pair(sampling: str, kernel: str, dtype: str, X: np.ndarray):
    vec = RandomFourierFeatures(64, kernel=kernel, bandwidth=ELL, sampling=sampling, dtype=dtype, random_state=7).fit(X)
    one = RandomFourierFeatures(64, kernel=kernel, bandwidth=1.0, sampling=sampling, dtype=dtype, random_state=7)
    return vec, one.fit(X / ELL)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("sampling,kernel", FOURIER)
def test_fourier_vector_is_the_unit_map_of_scaled_columns_bitwise(sampling, kernel, dtype):
    X, _ = data()
    for Xin in (X, X.astype(np.float32)):  # the quotient is rounded once, whatever the input dtype
        vec, one = fourier_pair(sampling, kernel, dtype, Xin)
        assert isinstance(vec.bandwidth_, np.ndarray) and vec.bandwidth_.dtype == np.float64
        np.testing.assert_array_equal(vec.bandwidth_, ELL)
        np.testing.assert_array_equal(vec.components_, one.components_)
        Z = vec.transform(Xin)
        assert Z.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(Z, one.transform(Xin / ELL))
        # the statistics pass's own evaluations (tile features and the small pass's rowwise base)
        np.testing.assert_array_equal(vec.kernel_(Xin), one.kernel_(Xin / ELL))
        np.testing.assert_array_equal(vec.kernel_.base_rowwise(Xin), one.kernel_.base_rowwise(Xin / ELL))
    # a single row (another BLAS path) as well
    np.testing.assert_array_equal(vec.transform(X[3:4]), one.transform(X[3:4] / ELL))


@pytest.fixture(scope="module")
def zarr_pair(tmp_path_factory):
    """X and X / l as zarr arrays on disk (uneven row chunks), with y."""
    X, y = data(1100, seed=1)
    root = tmp_path_factory.mktemp("lengthscales")
    da.from_array(X, chunks=(170, D)).to_zarr(str(root / "x.zarr"))
    da.from_array(X / ELL, chunks=(170, D)).to_zarr(str(root / "xs.zarr"))
    return X, y, da.from_zarr(str(root / "x.zarr")), da.from_zarr(str(root / "xs.zarr"))


def assert_stats_equal(a, b, rtol: float = 0.0) -> None:
    assert a.n == b.n
    for field in ("gram", "sum", "cross", "ysum", "yy"):
        if rtol == 0:
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
        else:
            np.testing.assert_allclose(getattr(a, field), getattr(b, field), rtol=rtol, atol=rtol, err_msg=field)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("sampling,kernel", [("iid", "laplacian"), ("orthogonal", "gaussian"), ("qmc", "gaussian"),
                                             ("structured", "gaussian")])
def test_fourier_statistics_from_zarr_on_a_cluster_bitwise(client, zarr_pair, sampling, kernel, dtype):
    X, y, Xd, Xsd = zarr_pair
    vec, one = fourier_pair(sampling, kernel, dtype, X)
    yd = da.from_array(y, chunks=170)
    got = accumulate(Xd, yd, features=vec)
    assert_stats_equal(got, accumulate(Xsd, yd, features=one))
    # a small pass (float64 products of float32 features) too, and NumPy input
    assert_stats_equal(accumulate(X[:300], y[:300], features=vec), accumulate(X[:300] / ELL, y[:300], features=one))


@pytest.mark.parametrize("landmarks", ["uniform", "leverage", "given"])
def test_nystroem_vector_is_the_unit_map_of_scaled_columns(landmarks):
    X, _ = data()
    if landmarks == "given":
        vec = NystroemFeatures(bandwidth=ELL, landmarks=X[::10]).fit(X)
        one = NystroemFeatures(bandwidth=1.0, landmarks=X[::10] / ELL).fit(X / ELL)
    else:
        kw = dict(landmarks=landmarks, leverage_components=200, random_state=4)
        vec = NystroemFeatures(40, bandwidth=ELL, **kw).fit(X)
        one = NystroemFeatures(40, bandwidth=1.0, **kw).fit(X / ELL)
        np.testing.assert_array_equal(vec.landmark_indices_, one.landmark_indices_)
    np.testing.assert_array_equal(vec.bandwidth_, ELL)
    np.testing.assert_allclose(vec.landmarks_ / ELL, one.landmarks_, rtol=1e-15)  # stored as rows of X
    Z = vec.transform(X)
    np.testing.assert_allclose(Z, one.transform(X / ELL), rtol=0, atol=1e-12)
    np.testing.assert_allclose(vec.kernel_.base(X), one.kernel_.base(X / ELL), rtol=0, atol=1e-12)
    np.testing.assert_allclose(vec.kernel_matrix(X[:20]), one.kernel_matrix(X[:20] / ELL), rtol=0, atol=1e-14)


@pytest.mark.parametrize("kernel", ["laplacian", "cauchy"])
def test_nystroem_other_kernels_and_float32(kernel):
    X, _ = data(200)
    vec = NystroemFeatures(30, kernel=kernel, bandwidth=ELL, random_state=2).fit(X)
    one = NystroemFeatures(30, kernel=kernel, bandwidth=1.0, random_state=2).fit(X / ELL)
    np.testing.assert_allclose(vec.transform(X), one.transform(X / ELL), rtol=0, atol=1e-12)
    v32 = NystroemFeatures(30, kernel=kernel, bandwidth=ELL, dtype="float32", random_state=2).fit(X)
    o32 = NystroemFeatures(30, kernel=kernel, bandwidth=1.0, dtype="float32", random_state=2).fit(X / ELL)
    np.testing.assert_allclose(v32.kernel_.base(X), o32.kernel_.base(X / ELL), rtol=0, atol=1e-6)


def test_nystroem_statistics_from_zarr_on_a_cluster(client, zarr_pair):
    X, y, Xd, Xsd = zarr_pair
    vec = NystroemFeatures(30, bandwidth=ELL, random_state=5).fit(Xd)
    one = NystroemFeatures(30, bandwidth=1.0, random_state=5).fit(Xsd)
    yd = da.from_array(y, chunks=170)
    assert_stats_equal(accumulate(Xd, yd, features=vec), accumulate(Xsd, yd, features=one), rtol=1e-12)


@pytest.mark.parametrize("sampling", ["iid", "orthogonal", "qmc", "structured"])
def test_an_all_equal_vector_is_the_scalar_map(sampling):
    # unit-scale columns: float32 rounds the phases w.x (a few units) to about 1e-6
    X = np.random.default_rng(0).normal(size=(400, D))
    for s in (0.7, 3.3):
        vec = RandomFourierFeatures(128, bandwidth=[s] * D, sampling=sampling, random_state=1).fit(X)
        sca = RandomFourierFeatures(128, bandwidth=s, sampling=sampling, random_state=1).fit(X)
        # float32: x (w / s) against (x / s) w, a rounding apart
        np.testing.assert_allclose(vec.transform(X), sca.transform(X), rtol=0, atol=2e-6)
    vec = NystroemFeatures(30, bandwidth=[1.3] * D, random_state=1).fit(X)
    sca = NystroemFeatures(30, bandwidth=1.3, random_state=1).fit(X)
    np.testing.assert_allclose(vec.transform(X), sca.transform(X), rtol=0, atol=1e-12)


def test_a_scalar_bandwidth_keeps_its_scaled_draw():
    X, _ = data()
    f = RandomFourierFeatures(32, bandwidth=2.0, dtype="float64", random_state=0).fit(X)
    g = RandomFourierFeatures(32, bandwidth=1.0, dtype="float64", random_state=0).fit(X)
    assert isinstance(f.bandwidth_, float) and f.kernel_.lengthscales is None
    np.testing.assert_array_equal(f.components_, g.components_ / 2.0)  # W / sigma, no input scaling


def test_save_and_load_keep_the_lengthscales(tmp_path):
    X, y = data()
    maps = {
        "sorf": RandomFourierFeatures(40, bandwidth=ELL, sampling="structured", random_state=0),
        "nystroem": NystroemFeatures(20, bandwidth=list(ELL), random_state=0),
        "ridge": dxrf.RandomFeatureRidge(NystroemFeatures(20, bandwidth=ELL, random_state=0), alpha=1e-3),
    }
    for name, est in maps.items():
        est.fit(X, y) if name == "ridge" else est.fit(X)
        est.save(tmp_path / f"{name}.zarr")
        back = dxrf.load(tmp_path / f"{name}.zarr")
        np.testing.assert_array_equal(back.kernel_.lengthscales, ELL)
        if name == "ridge":
            np.testing.assert_array_equal(back.predict(X), est.predict(X))
            np.testing.assert_array_equal(back.features_.bandwidth_, ELL)
        else:
            np.testing.assert_array_equal(back.transform(X), est.transform(X))
            np.testing.assert_array_equal(back.bandwidth_, ELL)


def test_models_saved_before_lengthscales_still_load(tmp_path):
    X, _ = data()
    f = RandomFourierFeatures(16, bandwidth=2.0, sampling="structured", random_state=0).fit(X)
    path = tmp_path / "old.zarr"
    f.save(path)
    # a file written before kernels had lengthscales: its kernel description has no such entry
    root = zarr.open_group(str(path), mode="r+")
    edited = 0
    for _, group in root.groups():
        spec = dict(group.attrs).get("kernel")
        if spec is not None and "lengthscales" in spec:
            spec.pop("lengthscales")
            group.attrs["kernel"] = spec
            edited += 1
    assert edited == 1
    back = dxrf.load(path)
    assert back.bandwidth_ == 2.0 and back.kernel_.lengthscales is None
    np.testing.assert_array_equal(back.transform(X), f.transform(X))


def test_format_bandwidth_is_compact():
    assert format_bandwidth(2.0) == "2"
    assert format_bandwidth(np.array([0.5, 2.0])) == "lengthscales [0.5 2] (d=2)"
    text = format_bandwidth(np.linspace(0.8, 9.1, 26))
    assert text == "lengthscales [0.8 1.13 1.46 … 8.44 8.77 9.1] (d=26)"


@pytest.mark.filterwarnings("ignore:the chosen")
@pytest.mark.parametrize("features", ["fourier", "nystroem"])
def test_search_with_vector_candidates(tmp_path, features):
    X, y = data(500)
    kw = dict(n_components=[20, 40], features=features, random_state=0, alphas=[1e-4, 1e-2],
              dtype="float64" if features == "nystroem" else "float32")
    cands = [1.0, ELL, list(ELL * 3), "median"]
    model = dxrf.RandomFeatureRidgeCV(bandwidths=cands, **kw).fit(X, y)
    res = model.cv_results_
    values = {1.0: 1.0, "median": None, format_bandwidth(ELL): ELL, format_bandwidth(ELL * 3): ELL * 3}
    assert set(res["param_bandwidth"].tolist()) == set(values)
    assert format_bandwidth(ELL) == "lengthscales [0.3 1.7 2.9 11 0.05] (d=5)"
    vec_rows = [i for i, b in enumerate(res["param_bandwidth"]) if str(b).startswith("lengthscales")]
    assert len(vec_rows) == 2 * 2 * 2 and np.isnan(res["bandwidth_value"][vec_rows]).all()
    assert "lengthscales [" in format_table(res, top=len(res["params"]))
    # the chosen candidate is what the model uses
    chosen = values[model.best_params_["bandwidth"]]
    if isinstance(chosen, np.ndarray):
        np.testing.assert_array_equal(model.bandwidth_, chosen)
        np.testing.assert_allclose(model.kernel_.effective_bandwidth, chosen, rtol=1e-15)
    best_vector = max(vec_rows, key=lambda i: res["mean_test_score"][i])
    assert res["mean_test_score"][best_vector] > 0.8  # the columns on their own scales fit the target
    # exactly the search of bandwidth 1 on X / l
    alone = dxrf.RandomFeatureRidgeCV(bandwidths=[ELL], **kw).fit(X, y)
    unit = dxrf.RandomFeatureRidgeCV(bandwidths=[1.0], **kw).fit(X / ELL, y)
    tol = 0 if features == "fourier" else 1e-10
    np.testing.assert_allclose(alone.cv_results_["mean_validation_mse"], unit.cv_results_["mean_validation_mse"],
                               rtol=tol, atol=0)
    np.testing.assert_allclose(alone.predict(X), unit.predict(X / ELL), rtol=tol, atol=tol)
    model.save(tmp_path / "m.zarr")
    back = dxrf.load(tmp_path / "m.zarr")
    np.testing.assert_array_equal(back.predict(X), model.predict(X))
    np.testing.assert_array_equal(back.bandwidth_, model.bandwidth_)
    assert back.best_params_ == model.best_params_


@pytest.mark.filterwarnings("ignore:the chosen")
def test_search_with_selections_and_a_classifier():
    X, y = data(400)
    model = dxrf.RandomFeatureRidgeCV(bandwidths=[ELL, 2.0], n_components=[20], selections=["none", "elss-top"],
                                      bandwidth_choice="plain-first", random_state=0).fit(X, y)
    assert model.kernel_.n_components == 20
    labels = (y > 0).astype(int)
    clf = dxrf.RandomFeatureClassifierCV(bandwidths=[ELL], n_components=[20], random_state=0).fit(X, labels)
    np.testing.assert_array_equal(clf.bandwidth_, ELL)
    assert clf.score(X, labels) > 0.7


BAD = [
    (ELL[:3], "bandwidth has 3 lengthscales but X has 5 columns"),
    ([1, 2, 0, 1, 1], "must be positive"),
    ([1, 2, -1, 1, 1], "must be positive"),
    ([1, np.nan, 1, 1, 1], "must be finite"),
    ([1, np.inf, 1, 1, 1], "must be finite"),
    ([[1, 2, 3, 4, 5]], "must be 1-d"),
    ([], "is empty"),
    (["a"] * 5, "must hold numbers"),
]


@pytest.mark.parametrize("bandwidth,message", BAD)
def test_bad_lengthscales_are_refused(bandwidth, message):
    X, y = data(100)
    for est in (RandomFourierFeatures(10, bandwidth=bandwidth), NystroemFeatures(10, bandwidth=bandwidth)):
        with pytest.raises(ValueError, match=message):
            est.fit(X)
    with pytest.raises(ValueError, match=message.replace("bandwidth has", "has")):
        dxrf.RandomFeatureRidgeCV(bandwidths=[1.0, bandwidth], n_components=[10]).fit(X, y)


def test_a_vector_for_a_map_that_is_not_shift_invariant_is_refused():
    X, _ = data(50)
    with pytest.raises(ValueError, match="shift-invariant"):
        dxrf.RandomReLUFeatures(10, bandwidth=ELL).fit(X)


def test_parameters_are_stored_as_given():
    given = np.array(ELL)
    f = RandomFourierFeatures(10, bandwidth=given)
    assert f.get_params()["bandwidth"] is given
    c = clone(f)
    np.testing.assert_array_equal(c.bandwidth, given)
    c.set_params(bandwidth=[1.0] * D)
    assert c.bandwidth == [1.0] * D
    X, _ = data(50)
    assert c.fit(X).kernel_.lengthscales.tolist() == [1.0] * D


def test_a_selector_on_lengthscale_candidates():
    """A selector's features are its candidates' columns: the lengthscales travel with them."""
    X, y = data(300)
    kw = dict(n_candidates=100, lam=1e-3, method="top", random_state=0)
    vec = dxrf.LeverageScoreSampler(20, base=RandomFourierFeatures(bandwidth=ELL), **kw).fit(X)
    one = dxrf.LeverageScoreSampler(20, base=RandomFourierFeatures(bandwidth=1.0), **kw).fit(X / ELL)
    np.testing.assert_array_equal(vec.selected_, one.selected_)
    np.testing.assert_array_equal(vec.transform(X), one.transform(X / ELL))
    np.testing.assert_array_equal(vec.kernel_.lengthscales, ELL)
