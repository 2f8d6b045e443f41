# usage: python3 logit_order.py positions|settings (from the repository root)
import time, sys, warnings, numpy as np
sys.path.insert(0, "workflows")
import dask.array as da
from distributed import wait
import dxrf
from bench_logistic import make_data, _fit_dxrf, _fit_sklearn, _fit_dask_ml, explicit_features, _settle
if __name__ == "__main__":
    from dxrf.cluster import local_cluster
    from distributed import Client
    cl = local_cluster(2, dashboard_address=None); client = Client(cl)
    X, y = make_data(200000, 90, 0)
    fm = dict(n_components=500, bandwidth=float(np.sqrt(90)), dtype="float32", random_state=0)
    kernel = dxrf.RandomFourierFeatures(**fm).fit(X[:1]).kernel_
    Z = explicit_features(X, kernel)
    Xd = client.persist(da.from_array(X, chunks=(50000, 90), name=False)); yd = client.persist(da.from_array(y, chunks=(50000,), name=False))
    Zd = client.persist(Xd.map_blocks(explicit_features, kernel, True, dtype=np.float64, chunks=(Xd.chunks[0], (501,))))
    y01d = client.persist(yd.astype(np.float64)); wait([Xd, yd, Zd, y01d])
    n=200000; alpha=1e-4
    import resource
    def t(name, f):
        r0=resource.getrusage(resource.RUSAGE_SELF); t0=time.perf_counter(); f(); r1=resource.getrusage(resource.RUSAGE_SELF)
        print(f"{name:30s} {time.perf_counter()-t0:.3f} minflt {r1.ru_minflt-r0.ru_minflt} user {r1.ru_utime-r0.ru_utime:.2f} sys {r1.ru_stime-r0.ru_stime:.2f} vcsw {r1.ru_nvcsw-r0.ru_nvcsw} ivcsw {r1.ru_nivcsw-r0.ru_nivcsw}", flush=True)
    warnings.simplefilter("ignore")
    if sys.argv[1:] == ["positions"]:  # the cached NumPy fit after each contender, and uncached
        def nocache():
            dxrf.RandomFeatureClassifier(dxrf.RandomFourierFeatures(**fm), loss="logistic", alpha=alpha, tol=1e-3, cache_features=False).fit(X, y)
        for r in range(2):
            t("dxrf numpy (after dask-ml)" if r else "dxrf numpy first", lambda: _fit_dxrf(X, y, fm, alpha, 1e-3))
            t("sklearn", lambda: _fit_sklearn(Z, y, alpha, 1e-5, 1000))
            t("dxrf numpy (after sklearn)", lambda: _fit_dxrf(X, y, fm, alpha, 1e-3))
            time.sleep(2)
            t("dxrf numpy (after sleep 2)", lambda: _fit_dxrf(X, y, fm, alpha, 1e-3))
            t("dxrf dask", lambda: _fit_dxrf(Xd, yd, fm, alpha, 1e-3))
            t("dxrf numpy (after dxrf dask)", lambda: _fit_dxrf(X, y, fm, alpha, 1e-3))
            t("dxrf numpy nocache", nocache)
            t("sklearn", lambda: _fit_sklearn(Z, y, alpha, 1e-5, 1000))
            t("dxrf numpy nocache (after skl)", nocache)
            _settle(client)
            t("dask-ml", lambda: _fit_dask_ml(Zd, y01d, n, alpha, 1e-5, 1000, False))
            _settle(client)
    else:  # "settings": each input with the cache on "auto" and off
        def fitc(Xa, ya, cache):
            dxrf.RandomFeatureClassifier(dxrf.RandomFourierFeatures(**fm), loss="logistic", alpha=alpha, tol=1e-3, cache_features=cache).fit(Xa, ya)
        for r in range(3):
            t("numpy auto", lambda: fitc(X, y, "auto"))
            t("numpy nocache", lambda: fitc(X, y, False))
            t("dask auto", lambda: fitc(Xd, yd, "auto"))
            t("dask nocache", lambda: fitc(Xd, yd, False))
            t("sklearn", lambda: _fit_sklearn(Z, y, alpha, 1e-5, 1000))
            _settle(client)
            t("dask-ml", lambda: _fit_dask_ml(Zd, y01d, n, alpha, 1e-5, 1000, False))
            _settle(client)
    client.close(); cl.close()
