import sys, time, numpy as np
from scipy.spatial.distance import cdist
from scipy.linalg import cho_factor, cho_solve, eigh
from dxrf.datasets.uci import _load_uci
from dxrf.kernels.gp import fit_ard
name = sys.argv[1]; split = int(sys.argv[2]) if len(sys.argv) > 2 else 0
ds = _load_uci(name, split=split)
X, y, Xt, yt = ds.X_train, ds.y_train, ds.X_test, ds.y_test
rng = np.random.default_rng(0)
mu, sd = X.mean(0), X.std(0); sd[sd == 0] = 1
X = (X - mu) / sd; Xt = (Xt - mu) / sd
ym, ys = y.mean(), y.std(); y = (y - ym) / ys; yt = (yt - ym) / ys
n = len(X); idx = rng.choice(n, 2000, replace=False)
t = time.time(); r = fit_ard(X[idx], y[idx], random_state=0); print("ard", time.time() - t, r.lengthscales.round(2), r.noise)
ell = r.lengthscales
val = rng.random(n) < 0.2; tr = ~val
M = int(sys.argv[5]) if len(sys.argv) > 5 else 4000
L = X[rng.choice(n, M, replace=False)]
def K(A, B, kind, s):
    if kind == "gauss":
        return np.exp(-0.5 * cdist(A / (ell * s), B / (ell * s), "sqeuclidean"))
    if kind == "lap":
        return np.exp(-cdist(A / (ell * s), B / (ell * s), "cityblock"))
    if kind == "m52":
        r = np.sqrt(5) * cdist(A / (ell * s), B / (ell * s))
        return (1 + r + r * r / 3) * np.exp(-r)
    if kind == "m32":
        r = np.sqrt(3) * cdist(A / (ell * s), B / (ell * s))
        return (1 + r) * np.exp(-r)
for kind, scales in [(k, [float(v) for v in sys.argv[4].split(",")]) for k in sys.argv[3].split(",")]:
    for s in scales:
        t = time.time()
        Kll = K(L, L, kind, s); w, V = eigh(Kll); keep = w > w.max() * 1e-12
        T = V[:, keep] / np.sqrt(w[keep])
        Z = K(X, L, kind, s) @ T; Zt = K(Xt, L, kind, s) @ T
        G = Z[tr].T @ Z[tr]; b = Z[tr].T @ y[tr]
        best = None
        for a in [1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8]:
            c = np.linalg.solve(G + a * len(G) * 0 + a * tr.sum() * np.eye(len(G)), b)
            v = np.mean((Z[val] @ c - y[val]) ** 2)
            if best is None or v < best[0]: best = (v, a)
        a = best[1]
        c = np.linalg.solve(Z.T @ Z + a * n * np.eye(Z.shape[1]), Z.T @ y)
        print(f"{kind} s={s} alpha={a:g} val={best[0]:.5f} test={np.mean((Zt @ c - yt) ** 2):.6f} ({time.time()-t:.0f}s)", flush=True)
