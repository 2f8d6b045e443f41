"""Benchmark: the model a user gets by default, against what a tabular user would pick instead.

Per data set and test split, side by side in one run, on the same rows:

* **dxrf, defaults**: ``dxrf fit TRAIN --out M`` with no tuning flag, then ``dxrf
  predict`` on the test rows, both as commands (each starts its own local
  cluster, as a new user's would). Everything is chosen on the training rows.
* **HistGradientBoosting, defaults**: scikit-learn's ``HistGradientBoostingRegressor``
  (or ``Classifier``) with its default parameters, in memory. Its default early stopping
  (on above 10 000 rows) holds out a random tenth of the rows, drawn anew on every fit
  (``random_state=None``), so one fit's score is one draw: it is fitted with the seeds
  ``0 .. K-1`` (``--hgb-seeds K``) and scored by the median of the K test scores.
* **Nystroem + RidgeCV**: scikit-learn's ``Nystroem`` (RBF, ``M`` landmarks, on
  standardised columns) and ``RidgeCV`` (or ``RidgeClassifierCV``), with the
  bandwidth chosen among multiples of the median distance on a hold-out of the
  training rows (80/20), then refitted on all training rows.

Regression is scored by the test MSE of y divided by the training rows' variance of y
(the MSE of y scaled by its training standard deviation); classification by the test
error. Each method runs in its own process: its wall time and the peak resident memory of
its largest process are reported beside the score.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

DESCRIPTION = "test error of the default fit vs HistGradientBoosting and Nystroem+RidgeCV, per data set and split"

REGRESSION = ("kin40k", "protein", "elevators", "pol", "bike", "keggdirected")
CLASSIFICATION = ("adult", "mnist")
METHODS = ("dxrf", "hgb", "nystroem")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sets", nargs="+", default=list(REGRESSION + CLASSIFICATION),
                        help="data sets (default: the six UCI regression sets, adult and mnist)")
    parser.add_argument("--splits", type=int, nargs="+", default=[0, 1, 2],
                        help="test splits of the UCI regression sets (default 0 1 2; one split for the others)")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--hgb-seeds", type=int, default=5,
                        help="fits of HistGradientBoosting, with random_state 0..K-1: its score is their median "
                             "(default 5)")
    parser.add_argument("--nystroem-components", type=int, default=4000, help="M of the Nystroem reference (default 4000)")
    parser.add_argument("--fit-args", default="", help="extra arguments for `dxrf fit` (default none: the defaults)")
    parser.add_argument("--n-rows", type=int, default=None, help="read only the first rows of each file (quick runs)")
    parser.add_argument("--workdir", default=None, help="where the zarr groups and models go (default: a temp dir)")
    parser.add_argument("--out", default="results", help="results folder")


def data_sets(args: argparse.Namespace) -> list[str]:
    """The real data sets this run reads (``dxrf bench`` checks them all before it starts)."""
    return list(args.sets)


def _load(name: str, split: int, n_rows: int | None) -> Any:
    import dxrf.datasets

    kw = {"n_rows": n_rows} if n_rows else {}
    if name in REGRESSION:
        kw["split"] = split
    return dxrf.datasets.load(name, **kw)


def _score(ds: Any, pred: np.ndarray) -> dict[str, float]:
    if ds.task == "regression":
        return {"mse": float(np.mean((ds.y_test - pred) ** 2) / np.var(ds.y_train))}
    return {"error": float(np.mean(np.asarray(pred) != ds.y_test))}


def _peak_rss_mib() -> float:
    """Peak resident memory of this process (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _children_peak_mib() -> float:
    """Peak resident memory of the largest waited-for child process (and its waited-for descendants)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def run_hgb(ds: Any, seeds: int = 5) -> dict[str, Any]:
    """HistGradientBoosting with its defaults, fitted with ``random_state`` 0 .. ``seeds`` - 1 (``seeds >= 1``: :func:`run` checks it).

    The score is the median of the seeds' test scores (each listed under
    ``"scores"``); ``"seconds"`` is the median time of one fit and prediction.
    """
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    cls = HistGradientBoostingRegressor if ds.task == "regression" else HistGradientBoostingClassifier
    scores, seconds = [], []
    for seed in range(seeds):
        t0 = time.perf_counter()
        pred = cls(random_state=seed).fit(ds.X_train, ds.y_train).predict(ds.X_test)
        seconds.append(time.perf_counter() - t0)
        scores.append(_score(ds, pred))
    key = next(iter(scores[0]))
    values = [s[key] for s in scores]
    return {key: float(np.median(values)), "scores": values, "seeds": list(range(seeds)),
            "seconds": float(np.median(seconds))}


def run_nystroem(ds: Any, m: int) -> dict[str, Any]:
    """Nystroem + RidgeCV with the RBF bandwidth chosen on a training hold-out, refitted on all training rows."""
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import RidgeClassifierCV, RidgeCV
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    t0 = time.perf_counter()
    X, y = ds.X_train, ds.y_train
    regression = ds.task == "regression"
    scaler = StandardScaler().fit(X)
    Xs = scaler.transform(X)
    rng = np.random.default_rng(0)
    sub = Xs[rng.choice(len(Xs), size=min(len(Xs), 2000), replace=False)]
    d2 = ((sub[:1000, None, :] - sub[None, 1000:, :]) ** 2).sum(-1)
    median = float(np.sqrt(np.median(d2)))
    alphas = np.logspace(-8, 2, 11)
    X_fit, X_val, y_fit, y_val = train_test_split(X, y, test_size=0.2, random_state=0)

    def pipeline(sigma: float) -> Any:
        head = RidgeCV(alphas=alphas) if regression else RidgeClassifierCV(alphas=alphas)
        return make_pipeline(StandardScaler(), Nystroem(gamma=0.5 / sigma**2, n_components=min(m, len(X_fit)),
                                                        random_state=0), head)

    scores = {}
    for factor in (0.25, 0.5, 1.0, 2.0, 4.0):
        sigma = factor * median
        model = pipeline(sigma).fit(X_fit, y_fit)
        pred = model.predict(X_val)
        scores[sigma] = float(np.mean((pred - y_val) ** 2)) if regression else float(np.mean(pred != y_val))
    best = min(scores, key=scores.get)
    pred = pipeline(best).fit(X, y).predict(ds.X_test)
    return {**_score(ds, pred), "seconds": time.perf_counter() - t0, "sigma": best, "median": median}


def run_dxrf(ds: Any, workdir: Path, fit_args: str) -> dict[str, Any]:
    """``dxrf fit`` with no tuning flag and ``dxrf predict``, as commands; X stored as float32 as ingest does."""
    import dxrf.io
    import zarr

    train, test, model, pred = (workdir / n for n in ("train.zarr", "test.zarr", "model.zarr", "pred.zarr"))
    classes = None if ds.task == "regression" else ds.classes
    for path, X, y in ((train, ds.X_train, ds.y_train), (test, ds.X_test, ds.y_test)):
        dxrf.io.write_zarr(X, path, y=y, columns=list(ds.feature_names), classes=classes, overwrite=True,
                           task="regression" if classes is None else "classification")
    cmd = [sys.executable, "-m", "dxrf.cli"]
    t0 = time.perf_counter()
    fit = subprocess.run([*cmd, "fit", str(train), "--out", str(model), "--overwrite", "-q", *fit_args.split()],
                         capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if fit.returncode != 0:
        return {"failed": fit.stderr.strip()[-500:], "seconds": seconds}
    done = subprocess.run([*cmd, "predict", str(model), str(test), "--out", str(pred), "--overwrite", "-q"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        return {"failed": done.stderr.strip()[-500:], "seconds": seconds}
    y_pred = zarr.open_group(str(pred), mode="r")["y_pred"][:]
    if classes is not None:
        y_pred = np.asarray(y_pred)
    return {**_score(ds, y_pred), "seconds": seconds, "peak_mib": _children_peak_mib(), "summary": fit.stdout[-3000:]}


def _one(method: str, name: str, split: int, n_rows: int | None, m: int, fit_args: str, workdir: str,
         hgb_seeds: int = 5) -> dict:
    """One method on one set and split, in this (fresh) process; the peak memory is this process's."""
    ds = _load(name, split, n_rows)
    if method == "hgb":
        res = run_hgb(ds, hgb_seeds)
    elif method == "nystroem":
        res = run_nystroem(ds, m)
    else:
        res = run_dxrf(ds, Path(workdir), fit_args)
    if method != "dxrf":
        res["peak_mib"] = _peak_rss_mib()
    return {**res, "rows": [len(ds.y_train), ds.X_train.shape[1]]}


def _in_child(method: str, name: str, split: int, args: argparse.Namespace, workdir: Path) -> dict:
    payload = json.dumps([method, name, split, args.n_rows, args.nystroem_components, args.fit_args, str(workdir),
                          args.hgb_seeds])
    code = f"import json,sys; from dxrf.workflows import bench_accuracy as b; print(json.dumps(b._one(*json.loads({payload!r}))))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ})
    if proc.returncode != 0:
        return {"failed": proc.stderr.strip()[-500:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(args: argparse.Namespace) -> dict:
    from ._common import report, table

    if args.hgb_seeds < 1:
        raise ValueError(f"--hgb-seeds must be a positive number of fits, got {args.hgb_seeds}")
    results: dict[str, Any] = {"nystroem_components": args.nystroem_components, "fit_args": args.fit_args,
                               "hgb_seeds": args.hgb_seeds, "runs": []}
    rows = []
    work = Path(args.workdir or tempfile.mkdtemp(prefix="dxrf-accuracy-"))
    try:
        for name in args.sets:
            for split in (args.splits if name in REGRESSION else [0]):
                entry: dict[str, Any] = {"set": name, "split": split}
                for method in args.methods:
                    folder = work / f"{name}-{split}"
                    folder.mkdir(parents=True, exist_ok=True)
                    entry[method] = _in_child(method, name, split, args, folder)
                    got = entry[method]
                    score = got.get("mse", got.get("error", float("nan")))
                    print(f"  {name} split {split} {method:9s}: {score:.4g} in {got.get('seconds', float('nan')):.1f} s, "
                          f"peak {got.get('peak_mib', float('nan')):.0f} MiB" + (f" FAILED {got['failed']}" if "failed" in got else ""),
                          flush=True)
                results["runs"].append(entry)
                rows.append([name, split] + [entry[m].get("mse", entry[m].get("error", float("nan"))) for m in args.methods]
                            + [entry[m].get("seconds", float("nan")) for m in args.methods]
                            + [entry[m].get("peak_mib", float("nan")) for m in args.methods])
    finally:
        if args.workdir is None:
            import shutil

            shutil.rmtree(work, ignore_errors=True)
    results["medians"] = _medians(results["runs"], args.methods)
    head = (["set", "split"] + [f"{m} score" for m in args.methods] + [f"{m} s" for m in args.methods]
            + [f"{m} MiB" for m in args.methods])
    md = table(head, rows)
    md += "\n\nscore: test MSE / training variance of y (regression), test error (classification)"
    md += f"; hgb: the median of {args.hgb_seeds} fits (random_state 0..{args.hgb_seeds - 1}), seconds per fit\n"
    md += "\n" + table(["set"] + [f"{m} median score" for m in args.methods],
                       [[s] + [v.get(m, float("nan")) for m in args.methods] for s, v in results["medians"].items()])
    return report(args.out, "bench-accuracy", results, md)


def _medians(runs: list[dict], methods: list[str]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for name in dict.fromkeys(r["set"] for r in runs):
        mine = [r for r in runs if r["set"] == name]
        out[name] = {}
        for m in methods:
            vals = [r[m].get("mse", r[m].get("error")) for r in mine if m in r]
            vals = [v for v in vals if v is not None]
            if vals:
                out[name][m] = float(np.median(vals))
    return out
