import sys, time, numpy as np
from scipy.spatial.distance import cdist
from scipy.linalg import eigh
from dxrf.datasets.uci import _load_uci
from dxrf.kernels.gp import fit_ard
name, split, rows, restarts, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
ds = _load_uci(name, split=split)
X, y, Xt, yt = ds.X_train, ds.y_train, ds.X_test, ds.y_test
rng = np.random.default_rng(seed)
from sklearn.preprocessing import QuantileTransformer
if len(sys.argv) > 7:
    qt = QuantileTransformer(output_distribution="normal", n_quantiles=1000, subsample=100000, random_state=0).fit(X); X = qt.transform(X); Xt = qt.transform(Xt)
mu, sd = X.mean(0), X.std(0); sd[sd == 0] = 1
X = (X - mu) / sd; Xt = (Xt - mu) / sd
ym, ys = y.mean(), y.std(); y = (y - ym) / ys; yt = (yt - ym) / ys
n = len(X); idx = rng.choice(n, rows, replace=False)
t = time.time()
from dxrf.kernels import gp
from scipy.optimize import minimize
small = int(sys.argv[6]) if len(sys.argv) > 6 else 0
if small:
    r0 = fit_ard(X[idx[:small]], y[idx[:small]], random_state=seed, restarts=1)
    Xs = X[idx]; Ys = ((y[idx] - y[idx].mean()) / y[idx].std())[:, None]
    th0 = np.concatenate([np.log(r0.lengthscales), [np.log(r0.signal), np.log(r0.noise)]])
    f = lambda th: tuple(-v / len(Xs) for v in gp.log_marginal_likelihood(th, Xs, Ys, None))
    with gp.blas_limit(1):
        res = minimize(f, th0, jac=True, method="L-BFGS-B", options={"maxiter": restarts})
    class R: pass
    r = R(); r.lengthscales = np.exp(res.x[:X.shape[1]]); r.log_likelihood = -res.fun * len(Xs); print("evals", res.nfev, "small", r0.n_eval)
else:
    r = fit_ard(X[idx], y[idx], random_state=seed, restarts=restarts)
ta = time.time() - t
ell = r.lengthscales
rng = np.random.default_rng(0)
val = rng.random(n) < 0.2; tr = ~val
M = 2000
L = X[rng.choice(n, M, replace=False)]
out = []
for s in (0.5, 0.7, 1.0):
    K = lambda A, B: np.exp(-0.5 * cdist(A / (ell * s), B / (ell * s), "sqeuclidean"))
    w, V = eigh(K(L, L)); keep = w > w.max() * 1e-12
    T = V[:, keep] / np.sqrt(w[keep])
    Z = K(X, L) @ T; Zt = K(Xt, L) @ T
    G = Z[tr].T @ Z[tr]; b = Z[tr].T @ y[tr]
    best = None
    for a in [1e-5, 1e-6, 1e-7, 1e-8, 1e-9]:
        c = np.linalg.solve(G + a * tr.sum() * np.eye(len(G)), b)
        v = np.mean((Z[val] @ c - y[val]) ** 2)
        if best is None or v < best[0]: best = (v, a)
    a = best[1]
    c = np.linalg.solve(Z.T @ Z + a * n * np.eye(Z.shape[1]), Z.T @ y)
    out.append((best[0], np.mean((Zt @ c - yt) ** 2), s))
v, te, s = min(out)
print(f"{name} split={split} rows={rows} restarts={restarts} seed={seed} ard {ta:.0f}s lml={r.log_likelihood:.1f} chosen s={s} val={v:.5f} test={te:.6f} all={[round(o[1],6) for o in out]}", flush=True)
