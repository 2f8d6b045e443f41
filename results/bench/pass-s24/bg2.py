import sys, time, numpy as np, dask, dask.array as da, psutil
from distributed import wait, Client
import dxrf
from dxrf.cluster import local_cluster

TWEAK = {"distributed.admin.tick.interval": "1s",
         "distributed.scheduler.work-stealing-interval": "500ms"}

if __name__ == "__main__":
    cfg = TWEAK if sys.argv[1] == "tweak" else {}
    with dask.config.set(cfg):
        cluster = local_cluster(2, dashboard_address=None); client = Client(cluster)
        X = da.random.default_rng(0).standard_normal((1_000_000, 90), chunks=(50_000, 90)).astype(np.float32)
        X = client.persist(X); wait(X)
        fmap = dxrf.RandomFourierFeatures(2000, bandwidth=float(np.sqrt(90)), dtype="float32", random_state=0).fit(np.zeros((1, 90)))
        dxrf.accumulate(X[:100_000], features=fmap)
        me = psutil.Process(); procs = [me] + me.children(recursive=True)
        for _ in range(3):
            c0 = [sum(p.cpu_times()[:4]) for p in procs]; t0 = time.time()
            dxrf.accumulate(X, features=fmap)
            wall = time.time() - t0; c1 = [sum(p.cpu_times()[:4]) for p in procs]
            print(sys.argv[1], f"pass {wall:.2f} s, cpu client {c1[0]-c0[0]:.2f}, workers", [round(b - a, 2) for a, b in zip(c0[1:], c1[1:])], flush=True)
        client.close(); cluster.close()
