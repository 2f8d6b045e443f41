import sys, time, collections, numpy as np, dask, dask.array as da
from distributed import wait, Client
import dxrf
from dxrf.cluster import local_cluster

if __name__ == "__main__":
    split = int(sys.argv[1])  # chunks (of 20) on the first worker
    cluster = local_cluster(2, dashboard_address=None); client = Client(cluster)
    a, b = sorted(client.nthreads())
    with dask.annotate(workers=lambda key: [a] if key[1] < split else [b], allow_other_workers=False):
        X = da.random.default_rng(0).standard_normal((1_000_000, 90), chunks=(50_000, 90)).astype(np.float32)
    X = client.persist(X, optimize_graph=False); wait(X)
    print("placement", sorted(collections.Counter(v[0][-5:] for v in client.who_has(X).values()).values()), flush=True)
    fmap = dxrf.RandomFourierFeatures(2000, bandwidth=float(np.sqrt(90)), dtype="float32", random_state=0).fit(np.zeros((1, 90)))
    dxrf.accumulate(X[:100_000], features=fmap)
    for _ in range(2):
        t0 = time.time(); dxrf.accumulate(X, features=fmap); print(f"pass {time.time()-t0:.2f} s", flush=True)
    print("placement after", sorted(collections.Counter(v[0][-5:] for v in client.who_has(X).values()).values()), flush=True)
    client.close(); cluster.close()
