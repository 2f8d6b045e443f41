import time, numpy as np, threadpoolctl
threadpoolctl.threadpool_limits(1)
import sys; n, m, t = 2048, int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
K = rng.random((n, m), dtype=np.float32)
V = rng.standard_normal((m, t)).astype(np.float32)
VF = np.asfortranarray(V); VT = np.ascontiguousarray(V.T)
def tm(name, f):
    f(); ts=[]
    for _ in range(5):
        t0=time.perf_counter(); f(); ts.append(time.perf_counter()-t0)
    print(f"{name:28s} {min(ts)*1e3:7.1f} ms  {2*n*m*t/min(ts)/1e9:5.1f} GFlop/s  {n*m*4/min(ts)/1e9:5.1f} GB/s", flush=True)
tm("K @ V (C)", lambda: K @ V)
tm("K @ V (F)", lambda: K @ VF)
tm("(VT @ K.T).T", lambda: (VT @ K.T))
KV = K @ V; KVF = np.asfortranarray(KV); KVT = np.ascontiguousarray(KV.T)
tm("K.T @ KV (C)", lambda: K.T @ KV)
tm("K.T @ KV (F)", lambda: K.T @ KVF)
tm("KVT @ K", lambda: KVT @ K)
tm("K.sum(0) (read bound)", lambda: K.sum(axis=0))
tm("copy K", lambda: K.copy())
