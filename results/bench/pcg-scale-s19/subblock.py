# Session 19 measurement script, kept as run (BENCHMARKS.md, session 19). Its data paths are that
# session's scratch zarr groups of flights-3m (dxrf.datasets.to_zarr("flights_3m", ..., n_rows=60000) or all rows).
import time, numpy as np, dxrf, dxrf.io
from dxrf.core.buffers import thread_buffer
from dxrf.kernels.landmark_products import split_products
from dxrf.solvers.landmark_solve import landmark_values
tr = dxrf.io.open_zarr("/work/scratch/s19/flall/flights-3m-all-train.zarr", standardize=True)
X = tr.X[:20480].compute()
f = dxrf.NystroemFeatures(10000, bandwidth=0.5, whitening="pivoted", random_state=0, dtype="float32").fit(tr.X[:200000].compute())
kernel = landmark_values(f.kernel_)
buf = np.empty((2048, 10000), np.float32)
def t(fn, r=5):
    ts=[]
    for _ in range(r):
        t0=time.perf_counter(); fn(); ts.append(time.perf_counter()-t0)
    return round(min(ts)*1e3,1)
print("base", t(lambda: kernel.base(X[:2048], out=buf)))
K = kernel.base(X[:2048], out=buf)
V = np.random.default_rng(0).normal(size=(10000, 4)).astype(np.float32)
print("KV", t(lambda: K @ V))
KV = K @ V
print("KVt K", t(lambda: np.ascontiguousarray(KV.T) @ K))
both = np.random.default_rng(0).normal(size=(8, 2048)).astype(np.float32)
print("both K", t(lambda: both @ K))

valid = np.random.default_rng(1).random(20480) < 0.2
print("split_products 10 subblocks", t(lambda: split_products(X, kernel, V=V.astype(np.float64), valid=valid), 2))
import threadpoolctl; print(threadpoolctl.threadpool_info()[0].get('num_threads'))
for sr in (128, 256, 512, 1024, 2048):
    print(sr, t(lambda: split_products(X, kernel, V=V.astype(np.float64), valid=valid, sub_rows=sr), 3))
