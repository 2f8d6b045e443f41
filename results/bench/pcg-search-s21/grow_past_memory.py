"""The default search on kin40k from zarr on 2 workers of 2 GiB: its growth past the M where the Gram fits.

Run: python3 grow_past_memory.py WORKDIR [MAX_COMPONENTS [SOLVER ...]]. Fits RandomFeatureRidgeCV() with its defaults
(learned lengthscales, Nystrom features, a 20 % hold-out, growing M), time_budget=None and
max_components, once per nystroem_solver given (default "auto" then "gram"); prints each stage, the
test MSE (standardised y) and the wall time. Logs: grow-run1.log ("gram" valid; its "auto" line ran
before the lengthscale fix of the conjugate gradient), grow-run2.log ("auto" after it).
"""

import json
import sys
import time
import warnings

import dask.array as da
import numpy as np
import zarr
from distributed import Client, LocalCluster

import dxrf
import dxrf.datasets


def fit(X, y, Xte, yte, solver: str, max_m: int) -> dict:
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        m = dxrf.RandomFeatureRidgeCV(max_components=max_m, time_budget=None, nystroem_solver=solver,
                                      random_state=0).fit(X, y)
    spent = time.perf_counter() - t0
    mse = float(np.mean((m.predict(Xte) - yte) ** 2))
    print(f"nystroem_solver={solver}: {spent:.1f} s, {m.n_passes_} passes, test MSE {mse:.5f}, "
          f"M={m.kernel_.n_components} by {m.search_solver_}", flush=True)
    for i, st in enumerate(m.growth_["stages"]):
        print(f"  stage {i + 1}: M={st['n_components']} by {st['solver']}, {st['seconds']:.1f} s, "
              f"validation loss {[round(v, 5) for v in st['validation_loss']]}", flush=True)
    print(f"  stopped: {m.growth_['stop_reason']}", flush=True)
    return {"seconds": spent, "test_mse": mse, "growth": m.growth_, "passes": m.n_passes_,
            "chosen": m.best_params_, "solver": m.search_solver_,
            "warnings": sorted({str(w.message)[:300] for w in said})}


def main() -> None:
    workdir, max_m = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 16000
    ds = dxrf.datasets.load("kin40k", split=0)
    mu, sd = ds.X_train.mean(0), ds.X_train.std(0)
    ym, ys = ds.y_train.mean(), ds.y_train.std()
    Xtr, Xte = (ds.X_train - mu) / sd, (ds.X_test - mu) / sd
    ytr, yte = (ds.y_train - ym) / ys, (ds.y_test - ym) / ys
    zarr.create_array(f"{workdir}/X.zarr", shape=Xtr.shape, chunks=(4000, 8), dtype="float64", overwrite=True)[:] = Xtr
    zarr.create_array(f"{workdir}/y.zarr", shape=ytr.shape, chunks=(4000,), dtype="float64", overwrite=True)[:] = ytr
    out = {}
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="2GiB") as cluster, Client(cluster):
        X, y = da.from_zarr(f"{workdir}/X.zarr"), da.from_zarr(f"{workdir}/y.zarr")
        for solver in sys.argv[3:] or ("auto", "gram"):
            out[solver] = fit(X, y, Xte, yte, solver, max_m)
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
