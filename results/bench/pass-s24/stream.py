import time, numpy as np, dask.array as da
from distributed import wait, get_task_stream
import dxrf
from dxrf.cluster import local_cluster
from distributed import Client

if __name__ == "__main__":
    cluster = local_cluster(2, dashboard_address=None); client = Client(cluster)
    X = da.random.default_rng(0).standard_normal((1_000_000, 90), chunks=(50_000, 90)).astype(np.float32)
    X = client.persist(X); wait(X)
    fmap = dxrf.RandomFourierFeatures(2000, bandwidth=float(np.sqrt(90)), dtype="float32", random_state=0).fit(np.zeros((1, 90)))
    dxrf.accumulate(X[:100_000], features=fmap)
    for rep in range(2):
        with get_task_stream(client) as ts:
            t0 = time.time(); dxrf.accumulate(X, features=fmap); wall = time.time() - t0
        recs = ts.data
        by = {}
        for r in recs:
            for s in r["startstops"]:
                if s["action"] == "compute":
                    by.setdefault(r["worker"], []).append((s["start"], s["stop"], r["key"]))
        print(f"wall {wall:.2f}")
        for w, iv in by.items():
            iv.sort()
            busy = sum(b - a for a, b, _ in iv)
            blocks = [b - a for a, b, k in iv if "call_block" in str(k)]
            others = [(str(k)[:40], round(b - a, 3)) for a, b, k in iv if "call_block" not in str(k)]
            print(w[-6:], f"busy {busy:.2f} span {iv[-1][1]-iv[0][0]:.2f} first start {iv[0][0]-t0:.2f} last stop {iv[-1][1]-t0:.2f}",
                  f"blocks n={len(blocks)} median {np.median(blocks):.3f} min {min(blocks):.3f} max {max(blocks):.3f}", others)
    client.close(); cluster.close()
