"""The single-lam Cholesky path of the leverage scores against the spectral one,
its fallbacks, its reproducibility, and a smoke run of ``dxrf bench leverage``."""

from __future__ import annotations

import json

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from dxrf import RandomFourierFeatures, accumulate
from dxrf.selection import LeverageScoreSampler, degrees_of_freedom, gram_spectrum, leverage_scores
from dxrf.selection.leverage import _cholesky_diag_q
from workflows import bench_leverage
from workflows._common import bench_args


def rel(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a) - b)) / np.max(np.abs(b)))


def rff_gram(m0: int, n: int, seed: int) -> np.ndarray:
    """``Z^T Z / n`` of random Fourier features: rank ``min(n, m0)``, trace about 1."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    Z = np.sqrt(2.0 / m0) * np.cos(X @ rng.normal(size=(4, m0)) + rng.uniform(0, 2 * np.pi, m0))
    return Z.T @ Z / n


def spectral_gram(m0: int, rank: int, seed: int) -> np.ndarray:
    """``U diag(s) U^T`` with a kernel-like decaying spectrum and ``m0 - rank`` zero eigenvalues."""
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.normal(size=(m0, m0)))
    s = np.zeros(m0)
    s[:rank] = np.exp(-np.arange(rank) / (rank / 6))
    s /= s.sum()
    return (U * s) @ U.T


GRAMS = {
    "rff-full-rank": lambda: rff_gram(150, 600, 0),
    "rff-rank-40": lambda: rff_gram(200, 40, 1),  # only positive semi-definite
    "spectral-rank-30": lambda: spectral_gram(120, 30, 2),
    "spectral-full-rank": lambda: spectral_gram(97, 97, 3),  # odd size: a partial band
}
LAMS = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)


@pytest.mark.parametrize("name", sorted(GRAMS))
def test_cholesky_path_matches_the_eigendecomposition(name):
    G = GRAMS[name]()
    G_before = G.copy()
    spec = gram_spectrum(G)
    for lam in LAMS:
        diag = _cholesky_diag_q(G, lam)
        assert diag is not None, f"{name}: lam={lam} did not take the Cholesky path"
        q, d = leverage_scores(G, lam)
        # leverage_scores took exactly that path
        w = np.clip(diag, 0.0, None)
        assert np.array_equal(q, w / w.sum()) and d == diag.sum()
        q_eig, d_eig = leverage_scores(spec, lam)
        assert rel(q, q_eig) <= 1e-10, (name, lam, rel(q, q_eig))
        assert abs(d - d_eig) / d_eig <= 1e-10, (name, lam)
        assert degrees_of_freedom(G, lam) == d
    assert np.array_equal(G, G_before)  # a bare Gram is never overwritten


def test_reproducible_bitwise_whatever_the_callers_threads():
    G = rff_gram(300, 200, 4)
    q1, d1 = leverage_scores(G, 1e-3)
    q2, d2 = leverage_scores(G, 1e-3)
    with threadpool_limits(1, user_api="blas"):  # the client's own thread count is used anyway
        q3, d3 = leverage_scores(G, 1e-3)
    assert np.array_equal(q1, q2) and np.array_equal(q1, q3) and d1 == d2 == d3


def test_fallbacks_to_the_eigendecomposition():
    G = spectral_gram(80, 80, 5)
    spec = gram_spectrum(G)
    # lam far above the Gram's scale: 1 - lam (A^{-1})_ii would cancel; the spectral path, bit for bit
    big = 1e4 * G.diagonal().max()
    assert _cholesky_diag_q(G.copy(), big) is None
    q, d = leverage_scores(G, big)
    q_eig, d_eig = leverage_scores(spec, big)
    assert np.array_equal(q, q_eig) and d == d_eig
    # lam at the rounding level of the zero eigenvalues
    tiny = 1e-13 * np.trace(G)
    assert _cholesky_diag_q(G.copy(), tiny) is None
    # G + lam I not positive definite (a negative eigenvalue, e.g. from a
    # cancelling Gram): potrf fails and the spectral path clips it to 0
    rng = np.random.default_rng(6)
    U, _ = np.linalg.qr(rng.normal(size=(60, 60)))
    s = np.linspace(1.0, 0.0, 60) / 30
    s[-1] = -1e-6
    H = (U * s) @ U.T
    assert _cholesky_diag_q(H.copy(), 1e-7) is None
    q, d = leverage_scores(H, 1e-7)
    q_eig, d_eig = leverage_scores(gram_spectrum(H), 1e-7)
    assert np.array_equal(q, q_eig) and d == d_eig and np.all(q >= 0)
    with pytest.raises(ValueError, match="lam"):
        leverage_scores(G, 0.0)  # lam must stay positive, as before


def test_sampler_takes_the_cholesky_path_end_to_end():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(300, 3))
    base = RandomFourierFeatures(80, bandwidth=1.5, dtype="float64", random_state=0)
    s = LeverageScoreSampler(20, n_candidates=80, lam=1e-3, base=base, random_state=1).fit(X)
    stats = s.candidate_stats_
    gram = stats.gram.copy()
    diag = _cholesky_diag_q(stats.normalized_gram(), 1e-3)
    assert diag is not None
    w = np.clip(diag, 0.0, None)
    assert np.array_equal(s.weights_, w / w.sum()) and s.dof_ == diag.sum()
    q, d = leverage_scores(stats, 1e-3)  # statistics: their Gram is left as it was
    assert np.array_equal(q, s.weights_) and d == s.dof_ and np.array_equal(stats.gram, gram)
    q_eig, d_eig = leverage_scores(gram_spectrum(stats), 1e-3)
    assert rel(q, q_eig) <= 1e-10 and abs(d / d_eig - 1) <= 1e-10
    # the same stats accumulated again: the same selection
    t = LeverageScoreSampler(20, n_candidates=80, lam=1e-3, base=base, random_state=1).fit(X)
    assert np.array_equal(s.selected_, t.selected_) and np.array_equal(s.weights_, t.weights_)
    assert np.array_equal(accumulate(X, features=s.candidates_).gram, gram)


def test_bench_leverage_smoke(tmp_path):
    args = bench_args(bench_leverage, ["--m0", "64", "97", "--repeats", "1"], n_rows=50, eigh_m0=64, out=str(tmp_path))
    res = bench_leverage.run(args)
    assert [r["m0"] for r in res["runs"]] == [64, 97]
    for r in res["runs"]:
        med = r["median_s"]
        assert med["cholesky"] > 0 and med["leverage"] > 0 and r["threads"] >= 1
        assert r["ratio_leverage_to_cholesky"] == pytest.approx(med["leverage"] / med["cholesky"])
        assert r["float32_weights_rel_error"] < 1e-3
    assert res["eigh"]["weights_rel_diff"] <= 1e-10
    saved = json.loads((tmp_path / "bench-leverage.json").read_text())
    assert saved["lam"] == 1e-3 and (tmp_path / "bench-leverage.md").exists()
