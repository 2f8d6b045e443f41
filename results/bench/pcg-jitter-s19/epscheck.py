# Session 19 measurement script, kept as run (BENCHMARKS.md, session 19). Its data paths are that
# session's scratch zarr groups of flights-3m (dxrf.datasets.to_zarr("flights_3m", ..., n_rows=60000) or all rows).
# Its EXP_EPS / EXP_JITTER_PENALTY switches were temporary hooks of dxrf/solvers/falkon.py used to compare
# the jitter and the penalty form before the change; against the committed code they do nothing.
import sys, time, warnings, numpy as np, dxrf, dxrf.io
import dxrf.solvers.falkon as fk
fk.EXP_EPS=0; fk.EXP_JITTER_PENALTY=0
warnings.simplefilter("ignore")
data, M, sigma = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
alphas = [float(v) for v in sys.argv[4].split(",")]
dtypes = sys.argv[5].split(","); epss = [float(v) for v in sys.argv[6].split(",")]; forms = [int(v) for v in sys.argv[7].split(",")]
if data == "flights":
    tr = dxrf.io.open_zarr("/work/scratch/s19/fl/flights-3m-60000-train.zarr", standardize=True)
    X = tr.X.compute().astype(np.float64); y = tr.y.compute().astype(np.float64)
    te = dxrf.io.open_zarr("/work/scratch/s19/fl/flights-3m-60000-test.zarr"); Xte = tr.standardize(te.X.compute()).astype(np.float64); yte = te.y.compute().astype(np.float64)
else:
    import dxrf.datasets
    ds = dxrf.datasets.load(data, split=0) if data != "mnist" else None
    X, y, Xte, yte = ds.X_train, ds.y_train, ds.X_test, ds.y_test
    mu, sd = X.mean(0), X.std(0); sd[sd == 0] = 1; X = (X - mu) / sd; Xte = (Xte - mu) / sd
ym, ys = y.mean(), y.std(); y = (y - ym) / ys; yte = (yte - ym) / ys
for dtype in dtypes:
    for eps in epss:
        for form in forms:
            fk.EXP_EPS = eps; fk.EXP_JITTER_PENALTY = bool(form)
            for a in alphas:
                f = dxrf.NystroemFeatures(M, bandwidth=sigma, whitening="cholesky", random_state=0, dtype=dtype)
                t0 = time.perf_counter()
                m = dxrf.RandomFeatureRidge(f, alpha=a, solver="pcg", tol=float(sys.argv[8]) if len(sys.argv) > 8 else 1e-4, max_iter=300).fit(X, y)
                mse = float(np.mean((m.predict(Xte) - yte) ** 2))
                print(f"{dtype} eps={eps:g} form={'falkon' if form else 'exact'} a={a:g}: it {m.n_iter_} last {m.pcg_history_[-1]:.2e} test {mse:.6f} {time.perf_counter()-t0:.1f}s", flush=True)
