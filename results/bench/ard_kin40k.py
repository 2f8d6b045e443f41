"""kin40k split 0: fit_ard on a uniform training sample, then a NumPy Nystroem ridge with those lengthscales.

Usage: ``PYTHONPATH=. python results/bench/ard_kin40k.py N0 RESTARTS [M]``; one JSON line
(results in ard-kin40k.jsonl, from a loaded 2-core machine). The ridge is centred and
solved in the landmark basis, (C - n m m^T + lam K_mm) beta = c - n m ybar; lam is chosen
on a 20 % hold-out of the training rows ("holdout") or set to sigma^2 / s^2 of the GP ("evidence").
"""
import sys, time, json
import numpy as np
from scipy.linalg import cho_factor, cho_solve
from dxrf.kernels.gp import fit_ard
from dxrf.core.blas import blas_limit

n0, restarts = int(sys.argv[1]), int(sys.argv[2])
M = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
base = "/work/shared/data/uci_regression_yang2016/"
D = np.loadtxt(base + "kin40k.csv.gz", delimiter=",")
mask = np.loadtxt(base + "kin40k_test_mask.csv.gz", delimiter=",")[:, 0].astype(bool)
X, y = D[:, :-1], D[:, -1]
Xtr, ytr, Xte, yte = X[~mask], y[~mask], X[mask], y[mask]
mu, sd = ytr.mean(), ytr.std()
ytr, yte = (ytr - mu) / sd, (yte - mu) / sd
rng = np.random.default_rng(0)
idx = rng.choice(len(Xtr), n0, replace=False)
t = time.perf_counter()
fit = fit_ard(Xtr[idx], ytr[idx], restarts=restarts, random_state=0)
t_ard = time.perf_counter() - t
ell = fit.lengthscales

def feats(A, L):
    sa = (A * A).sum(1)[:, None]; sl = (L * L).sum(1)[None, :]
    return np.exp(-0.5 * np.maximum(sa + sl - 2 * A @ L.T, 0))

def stats(A, b, L):
    C = np.zeros((len(L), len(L))); c = np.zeros(len(L)); s = np.zeros(len(L)); n = 0
    for i in range(0, len(A), 4000):
        K = feats(A[i:i + 4000], L); C += K.T @ K; c += K.T @ b[i:i + 4000]; s += K.sum(0); n += len(K)
    return C, c, s, n

def solve(C, c, s, n, ybar, Kmm, lam):
    # centred ridge in the landmark basis: (C - n m m^T + lam K_mm) beta = c - n m ybar
    m = s / n
    A = C - n * np.outer(m, m) + lam * Kmm
    beta = cho_solve(cho_factor(A + 1e-10 * np.trace(A) / len(A) * np.eye(len(A))), c - n * m * ybar)
    return beta, ybar - m @ beta

with blas_limit(1):
    t = time.perf_counter()
    Z = Xtr / ell
    L = Z[rng.choice(len(Z), M, replace=False)]
    Kmm = feats(L, L)
    perm = rng.permutation(len(Z)); hold = perm[: len(Z) // 5]; fitr = perm[len(Z) // 5:]
    C, c, s, n = stats(Z[fitr], ytr[fitr], L)
    lams = np.logspace(-8, 1, 19) * n
    errs = []
    Kh = feats(Z[hold], L)
    for lam in lams:
        beta, b0 = solve(C, c, s, n, ytr[fitr].mean(), Kmm, lam)
        errs.append(np.mean((Kh @ beta + b0 - ytr[hold]) ** 2))
    lam_rel = lams[int(np.argmin(errs))] / n
    C, c, s, n = stats(Z, ytr, L)
    Kt = feats(Xte / ell, L)
    out = {}
    for name, lam in [("holdout", lam_rel * n), ("evidence", fit.noise / fit.signal)]:
        beta, b0 = solve(C, c, s, n, ytr.mean(), Kmm, lam)
        out[name] = float(np.mean((Kt @ beta + b0 - yte) ** 2))
    t_ny = time.perf_counter() - t
print(json.dumps(dict(n0=n0, restarts=restarts, M=M, t_ard=round(t_ard, 1), n_iter=fit.n_iter, n_eval=fit.n_eval,
                      ell=np.round(ell, 3).tolist(), signal=fit.signal, noise=fit.noise, lam_rel=lam_rel,
                      mse_holdout_alpha=out["holdout"], mse_evidence_alpha=out["evidence"], t_nystroem=round(t_ny, 1))))
