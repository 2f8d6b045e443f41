"""Machinery shared by the workflows that reproduce the source papers.

ELSS figures 1-4 (Shahrampour & Kolouri), leverage-weighted RFF (Li, Ton,
Oglic & Sejdinovic), SGD with random features (Carratino, Rudi & Rosasco) and
random maxout features (Mroueh, Rennie & Goel) all follow the pattern of
``workflows/quickstart.py`` (DESIGN section 1):

* a real data set is written to zarr, inputs standardised and (regression)
  responses scaled into [-1, 1] with training statistics;
* ONE pass over the training rows accumulates the statistics of a large set
  of candidate features, for training and validation rows at once (a hashed
  split of the row index, so later passes find the same rows); several
  candidate maps (seeds, bandwidths) may share that pass
  (:func:`stats_pass`);
* every method, number of features M, leverage penalty lambda and ridge
  penalty alpha is then dense algebra on sub-blocks of those statistics
  (:func:`ridge_fit`): a :class:`Fit` is one feature selection with its whole
  ridge path;
* test errors come from ONE pass over the test rows: their statistics
  (regression: the exact MSE of every model) or, for classification, one
  prediction pass (:func:`error_pass`) that scores every candidate model at
  once - the coefficient vectors of all (method, M, lambda, alpha) are mapped
  back onto the candidate features and stacked into one matrix, so features
  are computed once per block. Classification needs the same kind of pass
  over the training rows for its validation (and training) 0-1 errors.

Every pass is recorded in a :class:`PassLog`, which counts the passes that
touched each (data set, sigma, seed) and prints the totals.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

SUBSTITUTES = {"protein": "Online News Popularity", "keggundirected": "YearPredictionMSD"}
"""Regression sets standing in for the ELSS paper's sets that are not available offline."""

UCI_REGRESSION = (
    "protein", "kin40k", "elevators", "pol", "bike", "keggdirected", "keggundirected",
    "pumadyn32nm", "parkinsons", "tamielectric",
)

VALIDATION_FRACTION = 0.2


def dataset_label(name: str) -> str:
    """The name shown in tables and plots; substitutes say what they stand in for."""
    sub = SUBSTITUTES.get(name)
    return f"{name} (SUBSTITUTE for {sub})" if sub else name


def short_label(name: str) -> str:
    sub = SUBSTITUTES.get(name)
    return f"{name}\n(substitute for {sub})" if sub else name


def say(*parts: object) -> None:
    """Progress line on stdout (flushed, so it interleaves with the pass bars)."""
    print(*parts, flush=True)


# --------------------------------------------------------------------------- options


def add_common_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    parser.add_argument("--quick", action="store_true", help="small slices, few seeds and small grids (the test suite's variant)")
    parser.add_argument("--out", default=f"results/{name}", help=f"results folder (default results/{name})")
    parser.add_argument("--chunk-rows", type=int, default=None, help="rows per zarr chunk")


def resolve_options(args: argparse.Namespace, full: dict, quick: dict) -> None:
    """Fill the options left at None from the full or the quick defaults."""
    chosen = quick if args.quick else full
    for key, value in chosen.items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)


# --------------------------------------------------------------------------- pass log


class PassLog:
    """Every pass over data, and which (data set, sigma, seed) it served.

    ``part`` is ``"train"`` or ``"test"`` (``"train+test"`` for SGD, whose
    passes read both to score the test rows in the same pass).
    """

    def __init__(self) -> None:
        self.events: list[dict] = []
        self.t0 = time.perf_counter()

    def add(self, part: str, dataset: str, keys: Iterable[tuple[Any, Any]], what: str) -> None:
        keys = [(float(s) if isinstance(s, (float, np.floating)) else s, int(r)) for s, r in keys]
        self.events.append({"part": part, "dataset": dataset, "keys": keys, "what": what})

    def count(self, part: str | None = None) -> int:
        return sum(1 for e in self.events if part is None or e["part"] == part)

    def per_key(self) -> dict[tuple, dict[str, int]]:
        out: dict[tuple, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for e in self.events:
            for s, r in e["keys"]:
                for p in e["part"].split("+"):
                    out[(e["dataset"], s, r)][p] += 1
        return out

    def summary(self) -> dict:
        pk = self.per_key()
        return {
            "total": self.count(),
            "train": sum(1 for e in self.events if "train" in e["part"]),
            "test": sum(1 for e in self.events if "test" in e["part"]),
            "max_train_per_key": max((v.get("train", 0) for v in pk.values()), default=0),
            "max_test_per_key": max((v.get("test", 0) for v in pk.values()), default=0),
            "events": self.events,
        }

    def line(self) -> str:
        s = self.summary()
        return (
            f"{s['total']} passes over data ({s['train']} over training rows, {s['test']} over test rows); "
            f"per (data set, sigma, seed) at most {s['max_train_per_key']} over training and "
            f"{s['max_test_per_key']} over test rows"
        )

    def seconds(self) -> float:
        return time.perf_counter() - self.t0


# --------------------------------------------------------------------------- data


@dataclasses.dataclass
class Data:
    """One real data set on zarr, standardised with training statistics.

    ``X``/``X_test`` are lazy dask arrays (float32). ``T``/``T_test`` are the
    float targets the statistics use: the response scaled into [-1, 1] (or
    standardised) for regression, +-1 columns for classification.
    ``labels``/``labels_test`` are class codes (classification only).
    ``Xm``, ``Ym``, ``Xtm``, ``Ytm`` are the same data in memory (used for
    bandwidth heuristics, few-shot rows and in-memory baselines).
    """

    name: str
    label: str
    task: str
    classes: list | None
    X: Any
    T: Any
    labels: Any
    X_test: Any
    T_test: Any
    labels_test: Any
    Xm: np.ndarray
    Ym: np.ndarray
    Xtm: np.ndarray
    Ytm: np.ndarray
    description: str
    sigma_median: float

    @property
    def n_train(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_test(self) -> int:
        return int(self.X_test.shape[0])

    @property
    def d(self) -> int:
        return int(self.X.shape[1])

    @property
    def regression(self) -> bool:
        return self.task == "regression"


def load_kwargs(name: str, rep: int) -> dict:
    """Which train/test split repetition ``rep`` uses: the published UCI test
    masks (split ``rep mod 10``), a seeded shuffle for Epileptic Seizure, the
    official files for Adult and MNIST."""
    if name in UCI_REGRESSION:
        return {"split": rep % 10}
    if name == "epileptic_seizure":
        return {"random_state": rep}
    return {}


def median_distance(X: np.ndarray, rng_seed: int = 0, size: int = 1000) -> float:
    from scipy.spatial.distance import pdist

    rng = np.random.default_rng(rng_seed)
    idx = rng.choice(X.shape[0], size=min(size, X.shape[0]), replace=False)
    d = pdist(np.asarray(X[idx], dtype=np.float64))
    d = d[d > 0]
    return float(np.median(d)) if d.size else 1.0


def load_data(
    name: str,
    workdir: Path,
    *,
    chunk_rows: int,
    n_rows: int | None = None,
    rep: int = 0,
    y_mode: str = "minmax",
    standardize: bool = True,
    load_options: dict | None = None,
) -> Data:
    """Load a real set by name, write both parts to zarr and open them lazily.

    ``y_mode``: ``"minmax"`` scales the response into [-1, 1] (ELSS paper,
    section V); ``"standardize"`` makes it zero-mean, unit-variance with the
    training statistics.
    """
    import dask.array as da

    import dxrf.datasets
    import dxrf.io

    kw = dict(load_kwargs(name, rep))
    kw.update(load_options or {})
    if n_rows:
        kw["n_rows"] = n_rows
    ds = dxrf.datasets.load(name, **kw)
    regression = ds.task == "regression"
    y_train, y_test = ds.y_train, ds.y_test
    if regression and y_mode == "standardize":
        mu, sd = float(y_train.mean()), float(y_train.std()) or 1.0
        y_train, y_test = (y_train - mu) / sd, (y_test - mu) / sd
    sub = workdir / f"{name}-{rep}"
    if sub.exists():
        shutil.rmtree(sub)
    sub.mkdir(parents=True)
    dxrf.io.write_zarr(ds.X_train, sub / "train.zarr", y=y_train, chunk_rows=chunk_rows,
                       task="regression" if regression else "classification",
                       classes=None if regression else list(ds.classes))
    dxrf.io.write_zarr(ds.X_test, sub / "test.zarr", y=y_test, chunk_rows=chunk_rows,
                       task="regression" if regression else "classification",
                       classes=None if regression else list(ds.classes))
    scale_y = regression and y_mode == "minmax"
    tr = dxrf.io.open_zarr(sub / "train.zarr", standardize=standardize, scale_y=scale_y)
    te = dxrf.io.open_zarr(sub / "test.zarr")
    X_test = tr.standardize(te.X) if standardize else te.X
    if standardize:
        Xm, Xtm = tr.standardize(ds.X_train), tr.standardize(ds.X_test)
    else:
        Xm, Xtm = ds.X_train.astype(np.float32), ds.X_test.astype(np.float32)
    if regression:
        T = tr.y
        T_test = tr.scale_y(te.y) if scale_y else te.y
        Ym = tr.scale_y(y_train).astype(np.float64) if scale_y else np.asarray(y_train, dtype=np.float64)
        Ytm = tr.scale_y(y_test).astype(np.float64) if scale_y else np.asarray(y_test, dtype=np.float64)
        labels = labels_test = None
        classes = None
    else:
        classes = list(tr.classes)
        labels, labels_test = tr.y, te.y
        k = len(classes)
        if k == 2:
            T = da.where(labels == 1, 1.0, -1.0)
            T_test = da.where(labels_test == 1, 1.0, -1.0)
        else:
            codes = np.arange(k)
            T = da.where(labels[:, None] == codes[None, :], 1.0, -1.0)
            T_test = da.where(labels_test[:, None] == codes[None, :], 1.0, -1.0)
        lookup = {c: i for i, c in enumerate(classes)}
        Ym = np.array([lookup[v] for v in ds.y_train.tolist()], dtype=np.int64)
        Ytm = np.array([lookup[v] for v in ds.y_test.tolist()], dtype=np.int64)
    return Data(
        name=name,
        label=dataset_label(name),
        task="regression" if regression else ("binary" if len(classes) == 2 else "multiclass"),
        classes=classes,
        X=tr.X,
        T=T,
        labels=labels,
        X_test=X_test,
        T_test=T_test,
        labels_test=labels_test,
        Xm=np.asarray(Xm, dtype=np.float32),
        Ym=Ym,
        Xtm=np.asarray(Xtm, dtype=np.float32),
        Ytm=Ytm,
        description=ds.description,
        sigma_median=median_distance(Xm),
    )


class Workdir:
    """A temporary folder for the zarr copies, removed at the end."""

    def __init__(self, prefix: str) -> None:
        self.path = Path(tempfile.mkdtemp(prefix=f"dxrf-{prefix}-"))

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def fourier_kernel(d: int, m0: int, sigma: float, seed: int):
    """Gaussian random Fourier features (the candidate map), drawn without reading data.

    The same ``seed`` gives the same standard-normal directions for every
    ``sigma`` (common random numbers across the bandwidth grid).
    """
    import dxrf

    fmap = dxrf.RandomFourierFeatures(m0, kernel="gaussian", bandwidth=float(sigma), random_state=int(seed))
    return fmap.fit(np.zeros((1, d), dtype=np.float32)).kernel_


# --------------------------------------------------------------------------- passes


def _end_bar() -> None:
    # the progress bars end without a newline
    sys.stdout.write("\n")
    sys.stdout.flush()


def _share(obj: Any) -> Any:
    """Ship a large read-only object to the workers once (a future), or embed it in the graph."""
    import dask

    from dxrf.progress import active_client

    client = active_client()
    if client is not None:
        return client.scatter([obj], broadcast=True, hash=False)[0]
    return dask.delayed(obj, pure=True)


def _limits():
    from threadpoolctl import threadpool_limits

    return threadpool_limits(1, user_api="blas")


def _multi_stats_chunk(X, Y, start, kernels, fraction, seed):
    from dxrf.stats import block_stats, hashed_split

    X = np.asarray(X)
    Y = None if Y is None else np.asarray(Y)
    mask = hashed_split(start, start + X.shape[0], fraction, seed) if fraction is not None else None
    out = []
    for kernel in kernels:
        s = block_stats(X, Y, kernel, mask, blas_threads=1, row_offset=start)
        out.append(s if isinstance(s, tuple) else (s,))
    return out


def _multi_stats_merge(*parts):
    total = [list(p) for p in parts[0]]
    for p in parts[1:]:
        for acc, other in zip(total, p):
            for i in range(len(acc)):
                acc[i] = acc[i] + other[i]
    return [tuple(a) for a in total]


def _row_blocks(a, chunks):
    import dask.array as da

    if a is None:
        return None
    if not isinstance(a, da.Array):
        a = da.from_array(np.asarray(a), chunks=(chunks,) + np.shape(a)[1:])
    a = a.rechunk((chunks,) + tuple(-1 for _ in a.shape[1:]))
    return list(a.to_delayed().ravel())


def _tree(parts: list, merge: Callable, fan_in: int = 8):
    import dask

    fn = dask.delayed(merge, pure=False)
    while len(parts) > 1:
        parts = [fn(*parts[i : i + fan_in]) if len(parts[i : i + fan_in]) > 1 else parts[i] for i in range(0, len(parts), fan_in)]
    return parts[0]


def stats_pass(X, T, kernels: Sequence, *, fraction: float | None = None, seed: int = 0) -> list:
    """ONE pass over ``X`` accumulating the statistics of every kernel in ``kernels``.

    Returns, per kernel, ``(train, validation)`` with a ``fraction`` (the
    hashed split of :func:`dxrf.stats.hashed_split`, the same rows as
    ``dxrf.accumulate(split=fraction, split_seed=seed)``) or ``(stats,)``.
    A single kernel goes through :func:`dxrf.accumulate` itself; several
    kernels share one task per chunk that computes each kernel's block
    statistics in turn, so the data are read once.
    """
    import dask

    import dxrf
    from dxrf.progress import compute

    kernels = list(kernels)
    if len(kernels) == 1:
        out = dxrf.accumulate(X, T, kernels[0], split=fraction, split_seed=seed, progress=True)
        _end_bar()
        return [out if isinstance(out, tuple) else (out,)]
    chunks = X.chunks[0]
    starts = np.concatenate([[0], np.cumsum(chunks)[:-1]]).astype(int)
    xb = list(X.to_delayed().ravel())
    yb = _row_blocks(T, chunks) if T is not None else [None] * len(xb)
    kd = _share(kernels)
    task = dask.delayed(_multi_stats_chunk, pure=False)
    parts = [task(x, y, int(s), kd, fraction, seed) for x, y, s in zip(xb, yb, starts)]
    out = compute(_tree(parts, _multi_stats_merge), progress=True)
    _end_bar()
    return out


def _error_chunk(X, labels, start, groups, kind, fraction, seed, tile_rows=4096):
    from dxrf.stats import hashed_split

    X = np.asarray(X)
    lab = np.asarray(labels).reshape(-1)
    n = X.shape[0]
    mask = hashed_split(start, start + n, fraction, seed) if fraction is not None else np.zeros(n, dtype=bool)
    out = []
    with _limits():
        for kernel, theta, intercept, k in groups:
            p = theta.shape[1] // k
            acc = np.zeros((2, p))
            for a in range(0, n, tile_rows):
                b = min(n, a + tile_rows)
                S = kernel(X[a:b]) @ theta
                S += intercept
                if kind == "binary":
                    wrong = (S > 0) != (lab[a:b, None] == 1)
                elif kind == "multiclass":
                    wrong = S.reshape(b - a, p, k).argmax(axis=2) != lab[a:b, None]
                else:  # squared error of a single output
                    wrong = (S - lab[a:b, None]) ** 2
                m = mask[a:b]
                acc[0] += wrong[~m].sum(axis=0)
                acc[1] += wrong[m].sum(axis=0)
            out.append(acc)
    return out, np.array([n - mask.sum(), mask.sum()], dtype=np.int64)


def _error_merge(*parts):
    sums = [sum(p[0][g] for p in parts) for g in range(len(parts[0][0]))]
    return sums, sum(p[1] for p in parts)


def error_pass(X, labels, groups: Sequence, *, kind: str, fraction: float | None = None, seed: int = 0):
    """ONE prediction pass scoring many linear models on candidate features.

    ``groups``: ``(kernel, theta (M0, P*k) float32, intercept (P*k,), k)``;
    features of each kernel are computed once per tile of rows and multiplied
    by all ``P`` models at once. ``kind``: ``"binary"`` (labels 0/1, predict
    1 where the score is > 0), ``"multiclass"`` (argmax over each model's ``k``
    columns) or ``"squared"`` (labels are the response). Returns, per group,
    error sums of shape ``(2, P)`` (rows outside / inside the hashed
    validation split of ``fraction``; without a fraction everything is in row
    0) and the row counts ``(2,)``.
    """
    import dask

    from dxrf.progress import compute

    chunks = X.chunks[0]
    starts = np.concatenate([[0], np.cumsum(chunks)[:-1]]).astype(int)
    xb = list(X.to_delayed().ravel())
    lb = _row_blocks(labels, chunks)
    gd = _share(list(groups))
    task = dask.delayed(_error_chunk, pure=False)
    parts = [task(x, y, int(s), gd, kind, fraction, seed) for x, y, s in zip(xb, lb, starts)]
    out = compute(_tree(parts, _error_merge), progress=True)
    _end_bar()
    return out


# --------------------------------------------------------------------------- models on statistics


@dataclasses.dataclass
class Fit:
    """One selection of candidate features with its whole ridge path.

    The selected feature ``j`` is ``scales[j] * z~_{idx[j]}`` of the candidate
    map of kernel ``group``. ``err[part]`` holds, for each alpha, the test
    error used for reporting: the MSE on the scaled response (regression,
    from statistics) or the misclassification rate (classification, from
    prediction passes). ``mse[part]`` is the squared error from statistics.
    """

    key: tuple
    params: dict
    group: Any
    idx: np.ndarray
    scales: np.ndarray
    alphas: np.ndarray
    coefs: np.ndarray
    intercepts: np.ndarray
    mse: dict = dataclasses.field(default_factory=dict)
    err: dict = dataclasses.field(default_factory=dict)


def ridge_fit(key: tuple, params: dict, group: Any, train, valid, idx, scales, alphas) -> Fit:
    from dxrf.learners import mse_from_stats, ridge_path

    idx = np.asarray(idx, dtype=np.intp)
    scales = np.asarray(scales, dtype=np.float64)
    tr, va = train.subset(idx, scales), valid.subset(idx, scales)
    path = ridge_path(tr, alphas, va)
    fit = Fit(key, dict(params), group, idx, scales, np.asarray(alphas, float), path.coefs, path.intercepts)
    fit.mse["valid"] = path.validation_mse.mean(axis=1)
    fit.mse["train"] = mse_from_stats(tr, path.coefs, path.intercepts).mean(axis=1)
    return fit


def add_mse(fits: Iterable[Fit], part: str, stats_by_group: dict) -> None:
    """Exact MSE of every model from the statistics of ``part`` (e.g. the test rows)."""
    from dxrf.learners import mse_from_stats

    for f in fits:
        st = stats_by_group[f.group].subset(f.idx, f.scales)
        f.mse[part] = mse_from_stats(st, f.coefs, f.intercepts).mean(axis=1)


def regression_errors(fits: Iterable[Fit]) -> None:
    """For regression the reported error is the MSE from statistics."""
    for f in fits:
        f.err.update(f.mse)


def model_groups(fits: Sequence[Fit], kernels: dict) -> tuple[list, list]:
    """Stack the coefficient vectors of all models on each kernel's candidates.

    Returns the groups for :func:`error_pass` and, per group, the list of
    ``(fit, slice of model columns)``.
    """
    by_group: dict[Any, list[Fit]] = defaultdict(list)
    for f in fits:
        by_group[f.group].append(f)
    groups, layout = [], []
    for g, fs in by_group.items():
        kernel = kernels[g]
        m0 = kernel.n_components
        k = fs[0].coefs.shape[2]
        n_models = sum(f.coefs.shape[0] for f in fs)
        theta = np.zeros((m0, n_models * k))
        icpt = np.zeros(n_models * k)
        spans = []
        col = 0
        for f in fs:
            p = f.coefs.shape[0]
            for j in range(p):
                block = np.zeros((m0, k))
                np.add.at(block, f.idx, f.scales[:, None] * f.coefs[j])
                theta[:, (col + j) * k : (col + j + 1) * k] = block
                icpt[(col + j) * k : (col + j + 1) * k] = f.intercepts[j]
            spans.append((f, slice(col, col + p)))
            col += p
        # the candidate map's own scale is inside kernel(); theta acts on z~
        groups.append((kernel, theta.astype(np.float32), icpt.astype(np.float32), k))
        layout.append(spans)
    return groups, layout


def assign_errors(layout: list, result, parts: Sequence[str]) -> None:
    """Store the error rates of an :func:`error_pass` in the fits (``parts`` names rows 0 and 1)."""
    sums, counts = result
    for spans, s in zip(layout, sums):
        for f, sl in spans:
            for row, part in enumerate(parts):
                if part is not None and counts[row] > 0:
                    f.err[part] = s[row, sl] / counts[row]


def choose(fits: Iterable[Fit], group_key: Callable[[Fit], Any] = lambda f: f.key) -> dict:
    """The validation choice among all fits with the same ``group_key`` and all their alphas.

    Ranked by the validation error (misclassification for classification),
    ties broken by the validation MSE. Returns ``{key: (fit, alpha index)}``.
    """
    best: dict = {}
    for f in fits:
        k = group_key(f)
        err = f.err.get("valid", f.mse["valid"])
        for j in range(len(f.alphas)):
            score = (float(err[j]), float(f.mse["valid"][j]))
            if k not in best or score < best[k][0]:
                best[k] = (score, f, j)
    return {k: (f, j) for k, (_, f, j) in best.items()}


def prefix(stats, p: int):
    """Statistics of the first ``p`` candidates as a ``p``-candidate map (factor ``p^{-1/2}``)."""
    m0 = stats.n_components
    return stats.subset(np.arange(p), np.full(p, math.sqrt(m0 / p)))


# --------------------------------------------------------------------------- reporting


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    a = np.asarray(values, dtype=np.float64)
    return float(a.mean()), float(a.std())


def fmt_ms(values: Sequence[float], digits: int = 4) -> str:
    m, s = mean_std(values)
    return f"{m:.{digits}f} ± {s:.{digits}f}"


def out_path(args: argparse.Namespace, filename: str) -> Path:
    p = Path(args.out)
    p.mkdir(parents=True, exist_ok=True)
    return p / filename


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def finish(args: argparse.Namespace, name: str, results: dict, markdown: str, log: PassLog) -> dict:
    """Print the table, the pass count and the wall time; write JSON and markdown."""
    from ._common import write_results

    elapsed = log.seconds()
    results["passes"] = log.summary()
    results["seconds"] = elapsed
    results["quick"] = bool(args.quick)
    tail = f"\n\nPasses: {log.line()}.  Wall time: {elapsed:.1f} s."
    print()
    print(markdown + tail, flush=True)
    write_results(args.out, name, results, markdown + tail)
    print(f"results in {Path(args.out).resolve()}", file=sys.stderr, flush=True)
    return results
