"""Per-column lengthscales: the Gram plan against the conjugate gradient (kin40k, first 8000 rows, M = 1000).

Run: python3 lengthscales_diag.py ELL.npy (the lengthscales the default search learned on kin40k split 0).
Prints per (bandwidth kind, alpha) the training MSE and iterations of each plan.
"""
import sys
import numpy as np, dxrf, dxrf.datasets, warnings, time
warnings.simplefilter("ignore")
ds = dxrf.datasets.load("kin40k", split=0)
mu, sd = ds.X_train.mean(0), ds.X_train.std(0); ym, ys = ds.y_train.mean(), ds.y_train.std()
X = ((ds.X_train - mu) / sd)[:8000]; y = ((ds.y_train - ym) / ys)[:8000]
ell = np.load(sys.argv[1])
for bw in [ell, 2.0]:
  for a in [1e-5, 1e-7]:
    out = []
    for sol in ["gram", "pcg"]:
        f = dxrf.NystroemFeatures(1000, bandwidth=bw, whitening="cholesky", random_state=0)
        r = dxrf.RandomFeatureRidge(f, alpha=a, solver=sol, tol=1e-6, max_iter=300).fit(X, y)
        out.append((r.train_mse_, getattr(r, "n_iter_", None)))
    print(np.ndim(bw), a, out, flush=True)
