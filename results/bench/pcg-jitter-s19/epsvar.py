# Session 19 measurement script, kept as run (BENCHMARKS.md, session 19). Its data paths are that
# session's scratch zarr groups of flights-3m (dxrf.datasets.to_zarr("flights_3m", ..., n_rows=60000) or all rows).
import sys, time, warnings, numpy as np, dxrf, dxrf.io
import dxrf.solvers.falkon as fk
warnings.simplefilter("ignore")
tr = dxrf.io.open_zarr("/work/scratch/s19/fl/flights-3m-60000-train.zarr", standardize=True)
X = tr.X.compute().astype(np.float64); y = tr.y.compute().astype(np.float64)
te = dxrf.io.open_zarr("/work/scratch/s19/fl/flights-3m-60000-test.zarr"); Xte = tr.standardize(te.X.compute()).astype(np.float64); yte = te.y.compute().astype(np.float64)
ym, ys = y.mean(), y.std(); y = (y - ym) / ys; yte = (yte - ym) / ys
orig = fk.jitter_scale
for div in [float(v) for v in sys.argv[1].split(",")]:
    fk.jitter_scale = lambda eps, alphas, div=div: orig(eps / div, alphas)
    for a in (1e-3, 1e-5):
        f = dxrf.NystroemFeatures(2000, bandwidth=0.5, whitening="cholesky", random_state=0, dtype="float32")
        m = dxrf.RandomFeatureRidge(f, alpha=a, solver="pcg", tol=1e-4, max_iter=300).fit(X, y)
        print(f"eps32/{div:g} a={a:g}: it {m.n_iter_} last {m.pcg_history_[-1]:.2e} test {np.mean((m.predict(Xte)-yte)**2):.6f}", flush=True)
