import json, sys, time, warnings
import numpy as np, dask.array as da
from distributed import Client
import dxrf, dxrf.io
from dxrf.cluster import local_cluster
if __name__ == "__main__":
    # ROWS M TOL WORKDIR (WORKDIR: the zarr groups `dxrf bench pcg-scale --workdir` writes)
    rows, m, tol, workdir = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    cluster = local_cluster(2); client = Client(cluster)
    train = dxrf.io.open_zarr(f"{workdir}/flights-3m-all-train.zarr", standardize=True)
    X, y = train.X[:rows], train.y[:rows]
    ym, ys = (float(v) for v in da.compute(y.astype("f8").mean(), y.astype("f8").std()))
    y = (y - ym) / ys
    t0 = time.perf_counter()
    f = dxrf.NystroemFeatures(m, bandwidth=0.5, whitening="cholesky", random_state=0, dtype="float32")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        model = dxrf.RandomFeatureRidge(f, alphas=[1e-4, 1e-5], validation=0.2, solver="pcg", tol=tol, max_iter=300).fit(X, y)
    fit_s = time.perf_counter() - t0
    out = {"fit_s": fit_s, "n_iter": model.n_iter_, "alpha": model.alpha_, "val": model.validation_errors_.tolist(),
           "path": model.pcg_validation_path_.tolist(), "history": model.pcg_history_.tolist(),
           "pass_s": float(np.median(model.pcg_seconds_[:, 0])), "warn": [str(w.message)[:200] for w in said]}
    json.dump(out, open(f"flpath-{rows}-{m}-{tol}.json", "w"))
    print(fit_s, model.n_iter_, model.alpha_, model.validation_errors_)
    client.close(); cluster.close()
