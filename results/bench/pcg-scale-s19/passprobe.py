# Session 19 measurement script, kept as run (BENCHMARKS.md, session 19). Its data paths are that
# session's scratch zarr groups of flights-3m (dxrf.datasets.to_zarr("flights_3m", ..., n_rows=60000) or all rows).
import sys, time, warnings, numpy as np, dask.array as da
from distributed import Client
import dxrf, dxrf.io
from dxrf.cluster import local_cluster
warnings.simplefilter("ignore")
rows, m, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
tr = dxrf.io.open_zarr("/work/scratch/s19/flall/flights-3m-all-train.zarr", standardize=True)
X, y = tr.X[:rows], tr.y[:rows]
y = (y - 6.6) / 30.0
if mode == "numpy":
    X, y = X.compute(), y.compute()
else:
    cluster = local_cluster(2); client = Client(cluster)
f = dxrf.NystroemFeatures(m, bandwidth=0.5, whitening="cholesky", random_state=0, dtype="float32")
t0 = time.perf_counter()
with dxrf.options(cache_features=False):
    model = dxrf.RandomFeatureRidge(f, alphas=[1e-4, 1e-5], validation=0.2, solver="pcg", tol=1e-300, max_iter=4).fit(X, y)
print(mode, rows, m, "fit", round(time.perf_counter() - t0, 1), "per-iteration pass/client:", np.round(model.pcg_seconds_, 3).tolist())
