"""Tests of data-dependent feature selection (issue 3): ELSS, leverage-weighted
RFF, EERF, LKRF, subset statistics and diagnostics.

Numeric checks compare against dense NumPy formulas written here (explicit
matrix inverses, explicit feature matrices); statistical checks use fixed
seeds and tolerance bands. The last tests run every selector on a real
``distributed.LocalCluster`` (worker processes) on zarr arrays on disk.
"""

from __future__ import annotations

import json
import threading

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks
from sklearn.base import clone

import dxrf
from _weight_checks import weight_xfails
from dxrf import RandomFourierFeatures, accumulate
from dxrf.selection import (
    EnergyScoreSelector,
    KernelAlignmentSelector,
    LeverageScoreSampler,
    alignment_scores,
    chi2_divergence,
    degrees_of_freedom,
    draw_features,
    energy_scores,
    gram_spectrum,
    leverage_diagnostics,
    leverage_scores,
    lkrf_weights,
    project_simplex,
    select_features,
    suggested_n_components,
)

N, D = 400, 3


# -- data and independent dense references ---------------------------------------------


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 3.0 + 0.1 * rng.normal(size=N)  # non-zero mean on purpose
    labels = (X[:, 0] * X[:, 1] + 0.2 * rng.normal(size=N) > 0).astype(int)
    return X, y, labels


def base64(m0: int = 60, seed: int = 0) -> RandomFourierFeatures:
    return RandomFourierFeatures(m0, bandwidth=1.5, dtype="float64", random_state=seed)


def dense_candidates(kernel, X: np.ndarray) -> np.ndarray:
    """z~(X) = sqrt(2 / M0) cos(X W + b), written out (not via FeatureKernel)."""
    m0 = kernel.n_components
    assert np.allclose(kernel.scale, np.sqrt(2.0 / m0))
    return np.sqrt(2.0 / m0) * np.cos(X @ kernel.W.astype(np.float64) + kernel.b.astype(np.float64))


def rel(a, b) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.fixture(scope="module")
def cand(data):
    X, y, _ = data
    fm = base64().fit(X)
    Z = dense_candidates(fm.kernel_, X)
    stats = accumulate(X, y, features=fm)
    return fm, Z, stats


# -- leverage scores ---------------------------------------------------------------------


def test_leverage_scores_match_dense_inverse(cand):
    fm, Z, stats = cand
    m0 = Z.shape[1]
    G = Z.T @ Z / N
    assert abs(np.trace(G) - 1.0) < 0.05  # the DESIGN's scale: trace about 1
    lams = [1e-4, 1e-2, 1.0]
    for lam in lams:
        Q = G @ np.linalg.inv(G + lam * np.eye(m0))
        q_ref, tr_ref = np.diag(Q) / np.trace(Q), np.trace(Q)
        q, tr = leverage_scores(stats, lam)
        assert q.shape == (m0,) and isinstance(tr, float)
        assert rel(q, q_ref) <= 1e-8 and abs(tr - tr_ref) / tr_ref <= 1e-8
        assert abs(degrees_of_freedom(stats, lam) - tr_ref) / tr_ref <= 1e-8
        # a bare normalised Gram and a precomputed spectrum give the same
        assert rel(leverage_scores(G, lam)[0], q_ref) <= 1e-8
        assert rel(leverage_scores(gram_spectrum(stats), lam)[0], q_ref) <= 1e-8
    # a grid: one eigendecomposition, 2-d weights and a vector of tr Q
    W, T = leverage_scores(stats, np.array(lams))
    assert W.shape == (3, m0) and T.shape == (3,)
    for i, lam in enumerate(lams):
        Q = G @ np.linalg.inv(G + lam * np.eye(m0))
        assert rel(W[i], np.diag(Q) / np.trace(Q)) <= 1e-8 and abs(T[i] / np.trace(Q) - 1) <= 1e-8
    assert np.allclose(W.sum(axis=1), 1.0) and np.all(np.diff(T) < 0)
    assert np.allclose(degrees_of_freedom(stats, lams), T)


def test_leverage_limits(data):
    X, _, _ = data
    fm = base64(30).fit(X)
    stats = accumulate(X, features=fm)
    G = stats.gram / stats.n
    ev = np.linalg.eigvalsh(G)
    assert ev[0] > 1e-8  # full rank
    q0, d0 = leverage_scores(stats, ev[0] * 1e-6)
    assert q0.max() / q0.min() <= 1.001 and abs(d0 - 30) < 1e-3
    qinf, _ = leverage_scores(stats, 1e8)
    assert rel(qinf, np.diag(G) / np.trace(G)) <= 1e-6


def test_lam_conventions_identical(data, cand):
    """Li, Ton, Oglic & Sejdinovic: p_i = [Phi^T Phi ((1/M0) Phi^T Phi + n lam I)^{-1}]_ii."""
    X, _, _ = data
    fm, Z, stats = cand
    m0 = Z.shape[1]
    Phi = np.sqrt(m0) * Z  # unnormalised features sqrt(2) cos(w^T x + b)
    for mu in (0.05, 3.0, 40.0):  # their n * lam
        P = Phi.T @ Phi @ np.linalg.inv(Phi.T @ Phi / m0 + mu * np.eye(m0))
        p = np.diag(P)
        q_un, d_un = leverage_scores(stats, mu, lam_convention="unnormalized")
        q_n, d_n = leverage_scores(stats, mu / N)
        assert rel(q_un, p / p.sum()) <= 1e-8
        assert np.array_equal(q_un, q_n) and d_un == d_n
        assert abs(p.sum() / (m0 * d_n) - 1) <= 1e-8  # sum p = M0 tr Q
    # a bare Gram needs N for the unnormalised convention
    with pytest.raises(ValueError, match="n_samples"):
        leverage_scores(stats.gram / stats.n, 3.0, lam_convention="unnormalized")
    q_arr, _ = leverage_scores(stats.gram / stats.n, 3.0, lam_convention="unnormalized", n_samples=N)
    assert np.array_equal(q_arr, leverage_scores(stats, 3.0 / N)[0])
    # the estimator: both spellings give identical weights and selections
    a = LeverageScoreSampler(20, n_candidates=60, lam=3.0, lam_convention="unnormalized", base=base64(), random_state=1).fit(X)
    b = LeverageScoreSampler(20, n_candidates=60, lam=3.0 / N, base=base64(), random_state=1).fit(X)
    assert a.lam_ == b.lam_ == 3.0 / N
    assert np.array_equal(a.weights_, b.weights_) and np.array_equal(a.selected_, b.selected_)
    assert np.array_equal(a.scales_, b.scales_) and a.dof_ == b.dof_


def test_suggested_n_components_and_diagnostics(cand):
    _, Z, stats = cand
    m0 = Z.shape[1]
    assert suggested_n_components(20.0, 0.1) == int(np.ceil(5 * 20 * np.log(16 * 20 / 0.1)))
    assert suggested_n_components(20.0, 0.1, constant=1, log_constant=1) == int(np.ceil(20 * np.log(200)))
    s = suggested_n_components(np.array([1.0, 5.0, 20.0]), 0.05)
    assert s.dtype.kind == "i" and np.all(np.diff(s) > 0)
    with pytest.raises(ValueError, match="delta"):
        suggested_n_components(5.0, 1.5)
    lams = np.logspace(-5, 0, 6)
    diag = leverage_diagnostics(stats, lams, bins=10)
    W, T = leverage_scores(stats, lams)
    assert np.allclose(diag.weights, W) and np.allclose(diag.dof, T)
    assert diag.hist_counts.shape == (6, 10) and diag.hist_edges.shape == (6, 11)
    assert np.all(diag.hist_counts.sum(axis=1) == m0)
    assert np.all(np.diff(diag.dof) < 0) and diag.eigenvalues.shape == (m0,)
    assert np.all(np.diff(diag.eigenvalues) <= 0)
    assert np.array_equal(diag.suggested_n_components, suggested_n_components(T, 0.1))
    json.dumps(diag.as_dict())  # plain data for the reproduction workflows
    # the unnormalised convention on a grid
    diag_un = leverage_diagnostics(stats, lams * N, bins=10, lam_convention="unnormalized")
    assert np.allclose(diag_un.lams, lams) and np.allclose(diag_un.weights, W)


# -- ELSS estimator ----------------------------------------------------------------------


def test_elss_sample_and_top(data):
    X, _, _ = data
    M, M0 = 25, 60
    s = LeverageScoreSampler(M, n_candidates=M0, lam=1e-3, base=base64(), random_state=3).fit(X)
    # the candidates are those of the base map with the same seed
    assert np.array_equal(s.candidates_.kernel_.W, base64(M0).fit(X).kernel_.W)
    q, d = leverage_scores(s.candidate_stats_, 1e-3)
    assert np.array_equal(s.weights_, q) and s.dof_ == d
    assert s.selected_.shape == (M,) and s.scales_.shape == (M,)
    assert np.allclose(s.scales_, 1.0 / np.sqrt(M * q[s.selected_]))
    Zc = s.candidates_.transform(X)
    assert np.allclose(s.transform(X), Zc[:, s.selected_] * s.scales_, rtol=1e-12, atol=1e-14)
    assert s.n_passes_ == 1 and s.n_samples_ == N
    assert list(s.get_feature_names_out()) == [f"leveragescoresampler{i}" for i in range(M)]

    t = LeverageScoreSampler(M, n_candidates=M0, lam=1e-3, method="top", base=base64(), random_state=3).fit(X)
    assert np.array_equal(t.selected_, np.argsort(-q, kind="stable")[:M])
    assert len(set(t.selected_)) == M and np.allclose(t.scales_, np.sqrt(M0 / M))
    # the same per-feature scale as a plain M-feature map: phi / sqrt(M)
    Zt = t.transform(X)
    phi = np.sqrt(M0) * Zc  # sqrt(2) cos(...)
    assert np.allclose(Zt, phi[:, t.selected_] / np.sqrt(M))


def test_algorithm1_unbiased(data):
    """Averaged over 200 draws, z(x)^T z(x') matches the candidate kernel."""
    X, _, _ = data
    P = X[:8]
    M, M0 = 15, 40
    base = base64(M0, seed=7)
    Kc = None
    draws = []
    for k in range(200):
        s = LeverageScoreSampler(M, n_candidates=M0, lam=1e-2, base=base, random_state=k).fit(X)
        if Kc is None:
            q, kernel0 = s.weights_, s.candidates_.kernel_
            Zc = dense_candidates(kernel0, P)
            Kc = Zc @ Zc.T
        else:
            assert np.array_equal(s.candidates_.kernel_.W, kernel0.W)  # fixed candidates, new draws
        Zs = s.transform(P)
        draws.append(Zs @ Zs.T)
    mean = np.mean(draws, axis=0)
    # exact standard error: one draw is a_i / q_i with probability q_i
    A = Zc[:, None, :] * Zc[None, :, :]  # a_i(x, x') for every pair
    var1 = np.sum(A**2 / q, axis=-1) - Kc**2
    se = np.sqrt(var1 / M / 200)
    zscore = np.abs(mean - Kc) / se
    assert zscore.max() < 4.5, zscore.max()
    assert np.mean(zscore) < 1.5  # about sqrt(2/pi) = 0.8 when unbiased
    # the weights are far from uniform, so the importance weights matter
    assert q.max() / q.min() > 3


def test_n_samples_subsample_and_passes(data):
    X, y, _ = data
    s = LeverageScoreSampler(10, n_candidates=40, n_samples=150, base=base64(40), random_state=0).fit(X, y)
    # a hashed row sample: about N0 rows (binomial, sd ~ 10 here), exactly those of row_sample's hash
    frac, seed = s.row_sample(N)
    assert frac == 150 / N
    kept = int(dxrf.engine.hashed_split(0, N, frac, seed).sum())
    assert s.candidate_stats_.n == kept == s.n_samples_ and 110 <= kept <= 190
    assert s.candidate_stats_.cross is not None  # y given: kept for learners
    full = LeverageScoreSampler(10, n_candidates=40, n_samples=N, base=base64(40), random_state=0).fit(X)
    assert full.n_samples_ == N
    med = LeverageScoreSampler(10, base=RandomFourierFeatures(bandwidth="median"), random_state=0).fit(X)
    assert med.n_passes_ == 2 and med.candidates_.bandwidth_ > 0


def test_fit_is_one_pass_over_dask_chunks(data):
    """Count chunk reads of a dask X: fit reads each chunk exactly once."""
    X, y, labels = data
    lock, reads = threading.Lock(), []

    def counting(block, block_info=None):
        with lock:
            reads.append(block_info[0]["chunk-location"][0])
        return block

    Xd = da.from_array(X, chunks=(50, D)).map_blocks(counting, dtype=X.dtype)
    for est, target in [
        (LeverageScoreSampler(10, n_candidates=40, base=base64(40), random_state=0), None),
        (EnergyScoreSelector(10, n_candidates=40, base=base64(40), random_state=0), y),
        (KernelAlignmentSelector(10, n_candidates=40, base=base64(40), random_state=0), labels),
    ]:
        reads.clear()
        with dask.config.set(scheduler="threads"):
            est.fit(Xd, target)
        assert sorted(reads) == list(range(N // 50)), type(est).__name__
        assert est.n_passes_ == 1
        reads.clear()
        Zd = est.transform(Xd)
        assert isinstance(Zd, da.Array) and reads == []  # lazy
        assert np.allclose(Zd.compute(scheduler="threads"), est.transform(X))


# -- subsets of statistics without a pass --------------------------------------------------


def _assert_stats_equal(a, b, rtol=1e-10):
    assert a.n == b.n
    for f in ("gram", "sum", "cross", "ysum", "yy"):
        x, z = getattr(a, f), getattr(b, f)
        if z is None:
            assert x is None
        else:
            np.testing.assert_allclose(x, z, rtol=rtol, atol=1e-12 * max(1.0, np.abs(z).max()))


def test_subset_stats_equal_second_pass(data, cand):
    X, y, labels = data
    fm, _, stats = cand
    rng = np.random.default_rng(5)
    idx = rng.integers(0, 60, size=35)  # with repetitions
    scales = rng.uniform(0.2, 3.0, size=35)
    sub = stats.subset(idx, scales)
    again = accumulate(X, y, features=fm.kernel_.subset(idx, scales))
    _assert_stats_equal(sub, again)
    for est, target in [
        (LeverageScoreSampler(30, n_candidates=60, base=base64(), random_state=2), y),
        (LeverageScoreSampler(30, n_candidates=60, method="top", base=base64(), random_state=2), y),
        (EnergyScoreSelector(30, n_candidates=60, base=base64(), random_state=2), y),
        (KernelAlignmentSelector(30, n_candidates=60, base=base64(), random_state=2), labels),
    ]:
        est.fit(X, target)
        Y = target if est.__class__ is not KernelAlignmentSelector else np.where(labels == 1, 1.0, -1.0)
        _assert_stats_equal(est.stats_, accumulate(X, Y, features=est.kernel_))


# -- EERF -----------------------------------------------------------------------------------


def test_eerf_scores_match_dense(data):
    X, y, labels = data
    M, M0 = 20, 60
    e = EnergyScoreSelector(M, n_candidates=M0, base=base64(), random_state=4).fit(X, y)
    assert e.task_ == "regression" and e.classes_ is None
    Phi = np.sqrt(M0) * dense_candidates(e.candidates_.kernel_, X)
    ys = (y - y.mean()) / y.std()
    s_ref = Phi.T @ ys / N
    assert e.scores_.shape == (M0, 1) and rel(e.scores_[:, 0], s_ref) <= 1e-8
    assert np.array_equal(e.selected_, np.argsort(-np.abs(s_ref))[:M])
    assert np.allclose(e.scales_, np.sqrt(M0 / M))
    assert np.allclose(e.transform(X), Phi[:, e.selected_] / np.sqrt(M))
    # {0, 1} labels and string labels both become -1/+1
    for lab in (labels, np.where(labels == 1, "yes", "no")):
        c = EnergyScoreSelector(M, n_candidates=M0, base=base64(), random_state=4).fit(X, lab)
        assert c.task_ == "classification" and len(c.classes_) == 2
        s_ref = Phi.T @ np.where(labels == 1, 1.0, -1.0) / N
        assert rel(c.scores_[:, 0], s_ref) <= 1e-8
        assert np.array_equal(c.selected_, np.argsort(-np.abs(s_ref))[:M])
    # three classes: one-hot +-1 columns, ranked by the norm over columns
    three = np.digitize(X[:, 0], [-0.5, 0.5])
    c3 = EnergyScoreSelector(M, n_candidates=M0, base=base64(), random_state=4).fit(X, three)
    Y3 = np.where(three[:, None] == np.arange(3)[None, :], 1.0, -1.0)
    S3 = Phi.T @ Y3 / N
    assert rel(c3.scores_, S3) <= 1e-8
    assert np.array_equal(c3.selected_, np.argsort(-np.linalg.norm(S3, axis=1))[:M])
    # the function form, from statistics alone
    assert rel(energy_scores(e.candidate_stats_, standardize=True)[:, 0], Phi.T @ ys / N) <= 1e-8


# -- LKRF -----------------------------------------------------------------------------------


def test_project_simplex():
    rng = np.random.default_rng(0)
    for _ in range(20):
        x = rng.normal(size=12) * rng.uniform(0.1, 5)
        p = project_simplex(x)
        assert np.all(p >= 0) and abs(p.sum() - 1) < 1e-12
        others = rng.dirichlet(np.full(12, 0.3), size=500)
        assert np.all(np.linalg.norm(others - x, axis=1) >= np.linalg.norm(p - x) - 1e-12)
    q = rng.dirichlet(np.ones(7))
    assert np.allclose(project_simplex(q), q)


def _random_feasible(rng, m0, rho, size):
    u = np.full(m0, 1.0 / m0)
    P = rng.dirichlet(np.full(m0, rng.choice([0.05, 0.5, 5.0])), size=size)
    div = m0 * np.sum((P - u) ** 2, axis=1)
    t = np.minimum(1.0, np.sqrt(rho / div))[:, None]
    return u + t * (P - u)  # shrunk towards u into the ball: still on the simplex


def test_lkrf_scores_and_solution(data):
    X, y, labels = data
    M, M0 = 20, 60
    rng = np.random.default_rng(11)
    for target, ys in [(y, (y - y.mean()) / y.std()), (labels, np.where(labels == 1, 1.0, -1.0))]:
        for rho in (0.05, 1.0, 8.0):
            k = KernelAlignmentSelector(M, n_candidates=M0, rho=rho, base=base64(), random_state=4).fit(X, target)
            Phi = np.sqrt(M0) * dense_candidates(k.candidates_.kernel_, X)
            v = (Phi.T @ ys) ** 2
            assert rel(k.scores_, v) <= 1e-8
            q = k.weights_
            assert np.all(q >= 0) and abs(q.sum() - 1) < 1e-12
            div = M0 * np.sum((q - 1 / M0) ** 2)
            assert abs(div - rho) <= 1e-8 and abs(k.divergence_ - rho) <= 1e-8
            obj = q @ v
            assert obj >= v.mean()  # the uniform distribution
            Q = _random_feasible(rng, M0, rho, 1000)
            assert np.all(M0 * np.sum((Q - 1 / M0) ** 2, axis=1) <= rho + 1e-12)
            assert obj >= (Q @ v).max() * (1 - 1e-12)
            # sampled features carry importance weights 1 / sqrt(M M0 q) on phi
            assert np.allclose(k.transform(X), Phi[:, k.selected_] / np.sqrt(M * M0 * q[k.selected_]))


def test_lkrf_weights_edge_cases():
    m0 = 10
    assert np.allclose(lkrf_weights(np.zeros(m0), 1.0), 1 / m0)
    v = np.arange(m0, dtype=float)
    q = lkrf_weights(v, m0 - 1.0)  # the ball holds the whole simplex: a vertex
    assert q[-1] == 1.0 and q.sum() == 1.0
    v2 = np.array([1.0, 3.0, 3.0, 0.5])
    assert np.allclose(lkrf_weights(v2, 100.0), [0, 0.5, 0.5, 0])  # tied maxima
    q = lkrf_weights(v, 0.3)
    assert abs(chi2_divergence(q) - 0.3) <= 1e-8 and np.all(np.diff(q) >= 0)
    # invariant to the scale of v
    assert np.allclose(lkrf_weights(1e9 * v, 0.3), q, atol=1e-10)


def test_lkrf_large_rho_selects_eerf(data):
    X, y, labels = data
    M, M0 = 20, 60
    for target in (y, labels):
        e = EnergyScoreSelector(M, n_candidates=M0, base=base64(), random_state=6).fit(X, target)
        for rho in (1e6, 2.0):  # top-M by q (zeros ranked by v) is top-M by v for any rho
            k = KernelAlignmentSelector(M, n_candidates=M0, rho=rho, method="top", base=base64(), random_state=6).fit(X, target)
            assert np.array_equal(k.selected_, e.selected_)
            assert np.allclose(k.scales_, e.scales_)
        ks = KernelAlignmentSelector(M, n_candidates=M0, rho=1e6, base=base64(), random_state=6).fit(X, target)
        assert np.all(ks.selected_ == e.selected_[0])  # q is the vertex of EERF's best feature


# -- selection from statistics alone ---------------------------------------------------------


def test_select_features_from_stats(cand):
    _, _, stats = cand
    spec = gram_spectrum(stats)
    a = select_features(stats, 25, lam=1e-3, random_state=0)
    b = select_features(stats, 25, lam=1e-3, random_state=0, spectrum=spec)
    assert all(np.array_equal(x, z) for x, z in zip(a, b))
    selected, scales, weights = a
    assert np.allclose(scales, 1 / np.sqrt(25 * weights[selected]))
    top40 = select_features(spec, 40, lam=1e-2, method="top").selected
    top10 = select_features(spec, 10, lam=1e-2, method="top").selected
    assert np.array_equal(top40[:10], top10)  # nested top-m selections
    # sampling with M > M0 is allowed (draws with replacement)
    assert select_features(spec, 500, lam=1e-2, random_state=1).selected.shape == (500,)
    assert np.array_equal(
        select_features(stats, 10, criterion="alignment", rho=1.0, standardize=True, method="top").selected,
        np.argsort(-alignment_scores(stats, standardize=True))[:10],
    )
    sel, sc = draw_features(np.array([0.5, 0.25, 0.25]), 4, "sample", random_state=0)
    assert np.allclose(sc, 1 / np.sqrt(4 * np.array([0.5, 0.25, 0.25])[sel]))


# -- bad parameters ------------------------------------------------------------------------


def test_bad_parameters(data, cand):
    X, y, _ = data
    _, _, stats = cand
    with pytest.raises(ValueError, match="n_components"):
        LeverageScoreSampler(50, n_candidates=40, method="top").fit(X)
    with pytest.raises(ValueError, match="n_components"):
        KernelAlignmentSelector(50, n_candidates=40, method="top").fit(X, y)
    with pytest.raises(ValueError, match="n_components"):
        EnergyScoreSelector(50, n_candidates=40).fit(X, y)
    for lam in (0.0, -1.0):
        with pytest.raises(ValueError, match="lam"):
            LeverageScoreSampler(5, lam=lam).fit(X)
        with pytest.raises(ValueError, match="lam"):
            leverage_scores(stats, lam)
    with pytest.raises(ValueError, match="lam"):
        leverage_scores(stats, [1e-3, 0.0])
    with pytest.raises(ValueError, match="lam"):
        degrees_of_freedom(stats, -2.0)
    for est in (EnergyScoreSelector(5), KernelAlignmentSelector(5)):
        with pytest.raises(ValueError, match=r"\by\b"):
            est.fit(X)
    for rho in (0.0, -3.0):
        with pytest.raises(ValueError, match="rho"):
            KernelAlignmentSelector(5, rho=rho).fit(X, y)
        with pytest.raises(ValueError, match="rho"):
            lkrf_weights(np.ones(4), rho)
    with pytest.raises(ValueError, match="n_samples"):
        LeverageScoreSampler(5, n_samples=N + 1).fit(X)
    for est in (LeverageScoreSampler(5), EnergyScoreSelector(5), KernelAlignmentSelector(5)):
        with pytest.raises(ValueError, match="not fitted"):
            est.transform(X)
    with pytest.raises(ValueError, match="method"):
        LeverageScoreSampler(5, method="best").fit(X)
    with pytest.raises(ValueError, match="lam_convention"):
        LeverageScoreSampler(5, lam_convention="li").fit(X)
    with pytest.raises(ValueError, match="task"):
        EnergyScoreSelector(5, task="ranking").fit(X, y)
    with pytest.raises(ValueError, match="class"):
        EnergyScoreSelector(5).fit(X, np.zeros(N, dtype=int))
    with pytest.raises(ValueError, match="n_features|features"):
        LeverageScoreSampler(5, random_state=0).fit(X).transform(X[:, :2])


# -- a real LocalCluster on zarr data ------------------------------------------------------------


@pytest.fixture(scope="module")
def zarr_data(tmp_path_factory, data):
    zarr = pytest.importorskip("zarr")
    root = tmp_path_factory.mktemp("zarr")
    X, y, labels = data
    paths = {}
    for name, arr, chunks in [("X", X, (64, D)), ("y", y, (64,)), ("labels", labels, (64,))]:
        z = zarr.create_array(store=str(root / f"{name}.zarr"), shape=arr.shape, chunks=chunks, dtype=arr.dtype)
        z[...] = arr
        paths[name] = str(root / f"{name}.zarr")
    return paths


def test_selectors_on_local_cluster_and_zarr(client, zarr_data, data):
    X, y, labels = data
    Xd = da.from_zarr(zarr_data["X"])
    yd = da.from_zarr(zarr_data["y"])
    ld = da.from_zarr(zarr_data["labels"])
    assert Xd.numblocks[0] > 1
    cases = [
        (lambda: LeverageScoreSampler(25, n_candidates=60, lam=1e-3, base=base64(), random_state=8), None, None),
        (lambda: LeverageScoreSampler(25, n_candidates=60, method="top", base=base64(), random_state=8), yd, y),
        (lambda: LeverageScoreSampler(25, n_candidates=60, n_samples=150, base=base64(), random_state=8), None, None),
        (lambda: EnergyScoreSelector(25, n_candidates=60, base=base64(), random_state=8), yd, y),
        (lambda: EnergyScoreSelector(25, n_candidates=60, base=base64(), random_state=8), ld, labels),
        (lambda: KernelAlignmentSelector(25, n_candidates=60, rho=2.0, base=base64(), random_state=8), yd, y),
        (lambda: KernelAlignmentSelector(25, n_candidates=60, method="top", base=base64(), random_state=8), ld, labels),
    ]
    for make, target_d, target in cases:
        dist = make().fit(Xd, target_d)
        local = make().fit(X, target)
        name = type(dist).__name__
        assert dist.n_passes_ == 1, name
        np.testing.assert_allclose(dist.weights_, local.weights_, rtol=1e-9, atol=1e-15, err_msg=name)
        assert np.array_equal(dist.selected_, local.selected_), name
        np.testing.assert_allclose(dist.scales_, local.scales_, rtol=1e-9, err_msg=name)
        _assert_stats_equal(dist.candidate_stats_, local.candidate_stats_, rtol=1e-9)
        _assert_stats_equal(dist.stats_, local.stats_, rtol=1e-9)
        Zd = dist.transform(Xd)
        assert isinstance(Zd, da.Array)
        np.testing.assert_allclose(Zd.compute(), local.transform(X), rtol=1e-9, atol=1e-12, err_msg=name)
    # the default float32 features on the cluster: same selection up to float32 rounding
    dist = LeverageScoreSampler(20, n_candidates=50, method="top", random_state=2).fit(Xd)
    local = LeverageScoreSampler(20, n_candidates=50, method="top", random_state=2).fit(X)
    np.testing.assert_allclose(dist.weights_, local.weights_, rtol=1e-4)
    assert len(set(dist.selected_) ^ set(local.selected_)) <= 2


def test_fit_from_stats_equals_fit(data):
    """A learner may accumulate the candidates itself and select without a pass."""
    X, y = data[0], data[1]
    y = np.asarray(y, dtype=np.float64).reshape(len(y), -1)[:, 0]
    for sel in [
        dxrf.LeverageScoreSampler(12, n_candidates=60, lam=1e-3, method="sample", random_state=3),
        dxrf.LeverageScoreSampler(12, n_candidates=60, lam=1e-2, method="top", random_state=3),
        dxrf.EnergyScoreSelector(12, n_candidates=60, random_state=3),
        dxrf.KernelAlignmentSelector(12, n_candidates=60, rho=2.0, random_state=3),
    ]:
        ref = clone(sel).fit(X, y)
        other = clone(sel)
        cand = other.make_candidates(X)
        np.testing.assert_array_equal(cand.kernel_.W, ref.candidates_.kernel_.W)
        stats = dxrf.accumulate(X, y, cand)
        other.fit_from_stats(cand, stats, task="regression")
        assert other.n_passes_ == 0
        np.testing.assert_array_equal(other.selected_, ref.selected_)
        np.testing.assert_allclose(other.scales_, ref.scales_, rtol=1e-12)
        np.testing.assert_allclose(other.transform(X[:5]), ref.transform(X[:5]), rtol=1e-6)
    with pytest.raises(ValueError, match="FeatureStats of the 60 candidates"):
        dxrf.LeverageScoreSampler(5, n_candidates=60).fit_from_stats(cand, dxrf.accumulate(X, y, dxrf.RandomFourierFeatures(7).fit(X)))
    with pytest.raises(ValueError, match="with targets"):
        dxrf.EnergyScoreSelector(5, n_candidates=60).fit_from_stats(cand, dxrf.accumulate(X, features=cand))


@parametrize_with_checks(
    [dxrf.LeverageScoreSampler(), dxrf.EnergyScoreSelector(), dxrf.KernelAlignmentSelector()],
    expected_failed_checks=weight_xfails,
)
def test_sklearn_compatible_with_default_parameters(estimator, check):
    check(estimator)
