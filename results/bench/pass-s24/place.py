import collections, numpy as np, dask.array as da
from distributed import wait, Client
from dxrf.cluster import local_cluster
import sys
sys.path.insert(0, "/work/main")
from workflows._common import random_rows

if __name__ == "__main__":
    cluster = local_cluster(2, dashboard_address=None); client = Client(cluster)
    for i in range(6):
        X = client.persist(random_rows(1_000_000, 90, 50_000)); wait(X)
        who = client.who_has(X)
        print(collections.Counter(v[0][-5:] if v else None for v in who.values()))
        del X
    for i in range(3):
        X = client.persist(da.random.default_rng(i).standard_normal((1_000_000, 90), chunks=(50_000, 90)).astype(np.float32)); wait(X)
        print("rng", collections.Counter(v[0][-5:] if v else None for v in client.who_has(X).values()))
        del X
    client.close(); cluster.close()
