"""One lengthscale of maximum GP evidence in the units it chooses (``bandwidth="evidence"``)."""

from __future__ import annotations

import numpy as np
import pytest

from dxrf.kernels.gp import _standardise, log_marginal_likelihood
from dxrf.kernels.gp_isotropic import fit_isotropic


def _pixels(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Columns on one scale, some nearly constant (rare spikes), and a target smooth in the Euclidean distance."""
    X = rng.uniform(0.0, 1.0, size=(n, 12))
    X[:, 8:] = np.where(rng.uniform(size=(n, 4)) < 0.02, rng.uniform(0.5, 1.0, size=(n, 4)), 0.0)  # rare pixels
    y = np.sin(3.0 * X[:, :8].sum(axis=1) / np.sqrt(8)) + np.cos(2.0 * X[:, 8:].sum(axis=1)) + 0.05 * rng.normal(size=n)
    return X, y


def _at(X: np.ndarray, y: np.ndarray, lengthscales: np.ndarray, signal: float, noise: float) -> float:
    Y, _, _ = _standardise(y[:, None], np.ones(len(y)))
    theta = np.concatenate([np.log(lengthscales), [np.log(signal), np.log(noise)]])
    return log_marginal_likelihood(theta, X, Y, eval_gradient=False)


def test_the_optimum_is_a_maximum_of_the_exact_evidence_along_the_lengthscale():
    rng = np.random.default_rng(0)
    X, y = _pixels(300, rng)
    fit, units = fit_isotropic(X, y, random_state=1)
    best = _at(X, y, fit.lengthscales, fit.signal, fit.noise)
    assert best == pytest.approx(fit.log_likelihood, rel=1e-10)
    for factor in (0.8, 1.25):
        assert _at(X, y, factor * fit.lengthscales, fit.signal, fit.noise) < best - 1e-3
    # one lengthscale: in own units all equal; in spread units proportional to the columns' spread
    ratio = fit.lengthscales / fit.lengthscales[0]
    if units == "own":
        np.testing.assert_allclose(ratio, 1.0)


def test_columns_on_one_scale_keep_their_units_and_unrelated_units_take_the_spread():
    rng = np.random.default_rng(3)
    X, y = _pixels(400, rng)
    fit, units = fit_isotropic(X, y, random_state=0)
    assert units == "own"
    np.testing.assert_allclose(fit.lengthscales, fit.lengthscales[0])
    # the same problem with each column in an arbitrary unit: the spread undoes it
    scale = np.exp(rng.uniform(-4.0, 4.0, size=6))
    Z = rng.normal(size=(400, 6))
    t = np.sin(Z.sum(axis=1) / np.sqrt(6)) + 0.05 * rng.normal(size=400)
    fit, units = fit_isotropic(Z * scale, t, random_state=0)
    assert units == "spread"
    ratio = fit.lengthscales / scale
    np.testing.assert_allclose(ratio, ratio[0], rtol=0.3)  # the median |difference| of a sample, per column


def test_more_evidence_wins_and_each_unit_can_be_asked_for():
    rng = np.random.default_rng(4)
    X, y = _pixels(300, rng)
    own, u1 = fit_isotropic(X, y, units=("own",), random_state=0)
    spread, u2 = fit_isotropic(X, y, units=("spread",), random_state=0)
    both, u3 = fit_isotropic(X, y, random_state=0)
    assert (u1, u2) == ("own", "spread")
    assert both.log_likelihood == pytest.approx(max(own.log_likelihood, spread.log_likelihood), rel=1e-12)
    assert u3 == ("own" if own.log_likelihood >= spread.log_likelihood else "spread")


def test_weights_of_zero_drop_rows():
    rng = np.random.default_rng(5)
    X, y = _pixels(300, rng)
    w = np.ones(300)
    w[200:] = 0.0
    kept, _ = fit_isotropic(X[:200], y[:200], random_state=2)
    weighted, _ = fit_isotropic(X, y, w, random_state=2)
    assert weighted.log_likelihood == pytest.approx(kept.log_likelihood, rel=1e-6)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"units": ("metres",)}, "units must be"),
    ({"units": ()}, "units must be"),
    ({"max_iter": 0}, "max_iter"),
])
def test_bad_options_are_named(kwargs, message):
    X, y = _pixels(100, np.random.default_rng(0))
    with pytest.raises(ValueError, match=message):
        fit_isotropic(X, y, **kwargs)


def test_too_few_rows_are_refused():
    X, y = _pixels(20, np.random.default_rng(0))
    with pytest.raises(ValueError, match="at least 50 rows"):
        fit_isotropic(X, y)
