"""Lengthscales in the kernel layer: exact kernels, landmark blocks, and the shipped FeatureKernel."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from dask.base import tokenize

import dxrf
from dxrf.features import nystroem
from dxrf.kernels import exact
from dxrf.kernels.kernel import FeatureKernel
from dxrf.kernels.landmarks import landmark_block

ELL = np.array([0.4, 2.5, 9.0])
RNG = np.random.default_rng(3)
X = RNG.normal(size=(60, 3)) * ELL
Y = RNG.normal(size=(25, 3)) * ELL


@pytest.mark.parametrize("fn", [exact.gaussian_kernel, exact.laplacian_kernel, exact.cauchy_kernel])
def test_exact_kernels_take_lengthscales(fn):
    np.testing.assert_allclose(fn(X, Y, ELL), fn(X / ELL, Y / ELL, 1.0), rtol=1e-15, atol=0)
    np.testing.assert_allclose(fn(X, None, list(ELL)), fn(X / ELL, None, 1.0), rtol=1e-15, atol=0)
    # all equal lengthscales are the scalar bandwidth
    np.testing.assert_allclose(fn(X, Y, np.full(3, 1.7)), fn(X, Y, 1.7), rtol=1e-13, atol=1e-15)
    with pytest.raises(ValueError, match="expected \\(3,\\)"):
        fn(X, Y, ELL[:2])


def test_gaussian_lengthscales_against_the_formula():
    K = exact.gaussian_kernel(X, Y, ELL)
    D2 = (((X[:, None, :] - Y[None, :, :]) / ELL) ** 2).sum(axis=2)
    np.testing.assert_allclose(K, np.exp(-D2 / 2), rtol=1e-12, atol=0)


@pytest.mark.parametrize("kind", ["gaussian", "laplacian", "cauchy"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_landmark_block_takes_lengthscales(kind, dtype):
    W = np.ascontiguousarray(Y.T.astype(dtype))
    got = landmark_block(X, W, kind, ELL)
    assert got.dtype == dtype
    ref = {"gaussian": exact.gaussian_kernel, "laplacian": exact.laplacian_kernel, "cauchy": exact.cauchy_kernel}[kind]
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(got, ref(X, W.T, ELL), rtol=0, atol=tol)
    # the same values as the kernel's own (scaled rows into a buffer, landmarks scaled once)
    kernel = nystroem.landmark_kernel(W, kind, ELL, whiten=False)
    np.testing.assert_array_equal(kernel.base(X), got)


def test_landmark_gram_by_blas_takes_lengthscales(monkeypatch):
    W = np.ascontiguousarray(Y.T)
    exact_gram = nystroem.landmark_gram(W, "gaussian", ELL)
    monkeypatch.setattr(nystroem, "_BLAS_GRAM_WORK", 0)  # the expansion |x|^2 + |l|^2 - 2 x.l
    np.testing.assert_allclose(nystroem.landmark_gram(W, "gaussian", ELL), exact_gram, rtol=0, atol=1e-13)


def fourier_kernel(lengthscales=ELL, activation="cos", bandwidth=1.0) -> FeatureKernel:
    W = RNG.normal(size=(3, 8))
    return FeatureKernel(activation, np.full(8, 0.5), 3, W=W, b=RNG.uniform(0, 6, 8), bandwidth=bandwidth,
                         lengthscales=lengthscales)


def test_feature_kernel_scales_rows_once():
    k = fourier_kernel()
    assert k.lengthscales.dtype == np.float64 and k.effective_bandwidth is k.lengthscales
    plain = FeatureKernel("cos", k.scale, 3, W=k.W, b=k.b)
    np.testing.assert_array_equal(k(X), plain(X / ELL))
    np.testing.assert_array_equal(k.raw_rowwise(X), plain.raw_rowwise(X / ELL))
    np.testing.assert_array_equal(k.scale_rows(X), X / ELL)
    assert plain.scale_rows(X) is X and plain.effective_bandwidth == 1.0
    # derived kernels keep them
    for derived in (k.subset(np.array([1, 3])), k.astype(np.float32), k.dense()):
        np.testing.assert_array_equal(derived.lengthscales, ELL)
    np.testing.assert_array_equal(k.subset(np.array([1, 3]))(X), plain.subset(np.array([1, 3]))(X / ELL))


def test_feature_kernel_ships_and_tokenizes_its_lengthscales():
    k = fourier_kernel()
    k(X)  # fills the derived caches, which are not shipped
    back = pickle.loads(pickle.dumps(k))
    np.testing.assert_array_equal(back(X), k(X))
    other = FeatureKernel("cos", k.scale, 3, W=k.W, b=k.b, lengthscales=ELL * 2)
    assert tokenize(k) != tokenize(other)
    assert tokenize(k) == tokenize(FeatureKernel("cos", k.scale, 3, W=k.W, b=k.b, lengthscales=ELL.copy()))
    assert k.nbytes == other.nbytes and k.nbytes > FeatureKernel("cos", k.scale, 3, W=k.W, b=k.b).nbytes


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(activation="relu"), "shift-invariant"),
        (dict(bandwidth=2.0), "bandwidth 1"),
        (dict(lengthscales=ELL[:2]), "3 positive finite numbers"),
        (dict(lengthscales=np.array([1.0, 0.0, 1.0])), "3 positive finite numbers"),
        (dict(lengthscales=np.array([1.0, np.nan, 1.0])), "3 positive finite numbers"),
    ],
)
def test_feature_kernel_refuses_bad_lengthscales(kwargs, message):
    with pytest.raises(ValueError, match=message):
        fourier_kernel(**kwargs)


def test_landmark_ridge_solve_with_lengthscales():
    """The landmark-basis solve (Cholesky whitening, one alpha) rebuilds K_LL with the lengthscales."""
    Xr = np.random.default_rng(0).normal(size=(300, 3)) * ELL
    y = np.sin(Xr[:, 0] / ELL[0])
    kw = dict(whitening="cholesky", dtype="float64", random_state=1)
    vec = dxrf.RandomFeatureRidge(dxrf.NystroemFeatures(40, bandwidth=ELL, **kw), alpha=1e-3).fit(Xr, y)
    one = dxrf.RandomFeatureRidge(dxrf.NystroemFeatures(40, bandwidth=1.0, **kw), alpha=1e-3).fit(Xr / ELL, y)
    np.testing.assert_allclose(vec.predict(Xr), one.predict(Xr / ELL), rtol=0, atol=1e-10)


class _StandIn:
    """Forwards to NumPy under another name, so that ``xp is not np``: the device branches run on the host."""

    __name__ = "standin"

    def __getattr__(self, name):
        return getattr(np, name)


@pytest.mark.parametrize("make", [
    lambda b: dxrf.RandomFourierFeatures(32, bandwidth=b, sampling="structured", dtype="float64", random_state=0),
    lambda b: dxrf.NystroemFeatures(20, bandwidth=b, random_state=0),
])
def test_device_branch_scales_rows_and_landmarks(monkeypatch, make):
    """The device path (``kernel_on``, the device branches of the kernel) divides by the lengthscales too."""
    import dask
    import dask.array as da

    from dxrf.core import device
    from dxrf.kernels import kernel as kernel_module
    from dxrf.stats import tiles

    Xr = np.random.default_rng(1).normal(size=(900, 3)) * ELL
    vec, one = make(ELL).fit(Xr), make(1.0).fit(Xr / ELL)
    want = dxrf.accumulate(Xr / ELL, features=one)
    xp = _StandIn()
    monkeypatch.setattr(tiles, "array_module", lambda a: xp)
    monkeypatch.setattr(kernel_module, "array_module", lambda a: xp)
    moved = device.kernel_on(vec.kernel_, xp)
    np.testing.assert_array_equal(moved.lengthscales, ELL)
    np.testing.assert_allclose(moved.base(Xr), one.kernel_.base(Xr / ELL), rtol=0, atol=1e-12)
    with dask.config.set(scheduler="sync"):
        got = dxrf.accumulate(da.from_array(Xr, chunks=(400, 3)), features=vec)
    for field in ("gram", "sum"):
        np.testing.assert_allclose(getattr(got, field), getattr(want, field), rtol=1e-11, atol=1e-12)


def test_augmented_landmarks_given_once_give_the_same_bits():
    """The map's cached augmented landmarks equal the ones each block would build."""
    from dxrf.kernels.landmarks import gaussian_landmarks, landmark_block

    rng = np.random.default_rng(3)
    X, W = rng.standard_normal((50, 6)), rng.standard_normal((6, 30))
    ref = landmark_block(X, W, "gaussian", 1.7)
    got = landmark_block(X, W, "gaussian", 1.7, None, gaussian_landmarks(W))
    assert np.array_equal(got, ref)
    fitted = dxrf.NystroemFeatures(n_components=30, bandwidth=1.7, random_state=0).fit(X)
    assert fitted.kernel_._landmarks_augmented is not None
    assert np.array_equal(fitted.kernel_.base(X), landmark_block(X, fitted.kernel_.W, "gaussian", 1.7))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_one_product_gaussian_equals_the_sweeps(dtype):
    """The augmented product ([2c x, -c|x|^2, -c] . [l; 1; |l|^2]) against the three-sweep form, to rounding."""
    from dxrf.kernels import landmarks

    rng = np.random.default_rng(5)
    X, W = rng.standard_normal((200, 5)).astype(dtype), rng.standard_normal((5, 70)).astype(dtype)
    fused = landmarks.landmark_block(X, W, "gaussian", 1.3)
    wide = rng.standard_normal((200, landmarks.AUGMENT_MAX_FEATURES + 1)).astype(dtype)
    Ww = rng.standard_normal((landmarks.AUGMENT_MAX_FEATURES + 1, 70)).astype(dtype)
    swept = landmarks.landmark_block(wide, Ww, "gaussian", 9.0)  # wide input, no augmented landmarks given
    exact = lambda A, B, s: np.exp(-((A[:, None, :].astype(np.float64) - B.T[None].astype(np.float64)) ** 2).sum(-1)  # noqa: E731
                                   / (2 * s * s))
    tol = 1e-12 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(fused, exact(X, W, 1.3), rtol=0, atol=tol)
    np.testing.assert_allclose(swept, exact(wide, Ww, 9.0), rtol=0, atol=tol)
    np.testing.assert_array_equal(landmarks.landmark_block(wide, Ww, "gaussian", 9.0, None,
                                                           landmarks.gaussian_landmarks(Ww)).shape, (200, 70))
