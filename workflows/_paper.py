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
  (``_fits.ridge_fit``): a ``Fit`` is one feature selection with its whole
  ridge path;
* test errors come from ONE pass over the test rows: their statistics
  (regression: the exact MSE of every model) or, for classification, one
  prediction pass (:func:`error_pass`) that scores every candidate model at
  once - the coefficient vectors of all (method, M, lambda, alpha) are mapped
  back onto the candidate features and stacked into one matrix, so features
  are computed once per block. Classification needs the same kind of pass
  over the training rows for its validation (and training) 0-1 errors.

Figures 2 and 3 (and ``dxrf bench fig2-grid``) are clients of the public
model search instead (:func:`search_fit`: :class:`dxrf.RandomFeatureRidgeCV`,
:class:`dxrf.RandomFeatureClassifierCV`): its one pass and its algebra give
every configuration's validation (and training) errors, the workflow reads
its choices per reported cell off ``cv_results_`` (``_search.best_row``), and one
test pass scores the kept fold models (``_search.test_errors``). The models
on statistics (``_fits``) remain for the workflows whose methods the search
does not cover (leverage-weighted RFF, maxout maps, few-shot, SGD).

This module holds what they all share: options, data, the pass log, the passes
and reporting; ``_fits`` the models on statistics and ``_search`` the clients
of the model search.

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


def paper_data_sets(args: argparse.Namespace, full: dict, quick: dict) -> list[str]:
    """The real data sets a paper workflow's run reads: ``--datasets`` or ``--dataset``, defaults filled.

    Each workflow's ``data_sets(args)`` returns this, so that ``dxrf reproduce``
    checks (and fetches) them all before it starts.
    """
    resolve_options(args, full, quick)
    return list(args.datasets) if getattr(args, "datasets", None) else [args.dataset]


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
    """The median distance between distinct rows among ``size`` sampled ones: the bandwidth scale.

    :func:`dxrf.features.median_distance` of the distinct sampled rows, each
    weighing its copies, with no weight on the pairs among a row's own copies
    (``self_fraction=0``): repeated rows (one-hot columns) do not pull the
    scale towards 0. 1.0 when fewer than 2 distinct rows are sampled.
    """
    from dxrf.features import median_distance as library_median

    rng = np.random.default_rng(rng_seed)
    idx = rng.choice(X.shape[0], size=min(size, X.shape[0]), replace=False)
    rows, copies = np.unique(np.asarray(X[idx], dtype=np.float64), axis=0, return_counts=True)
    if rows.shape[0] < 2:
        return 1.0
    return library_median(rows, sample_weight=copies, self_fraction=0.0)


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
    ds = dxrf.datasets.load(name, download=True, **kw)
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


class Experiment:
    """What every paper workflow's run starts with, as a context manager.

    Constructing it fills the options left at None from ``full`` or ``quick``
    (:func:`resolve_options`) and starts the :class:`PassLog` ``log``;
    entering it makes the temporary folder ``path`` for the zarr copies
    (:class:`Workdir`, removed on exit).

    Parameters
    ----------
    args : argparse.Namespace
        The workflow's options, with ``--quick``, ``--out`` and ``--chunk-rows``
        (:func:`add_common_arguments`); updated in place.
    full, quick : dict
        The defaults of the full and of the quick variant.
    prefix : str
        Part of the temporary folder's name.
    """

    def __init__(self, args: argparse.Namespace, full: dict, quick: dict, prefix: str) -> None:
        resolve_options(args, full, quick)
        self.args = args
        self.log = PassLog()
        self._prefix = prefix
        self._workdir: Workdir | None = None
        self.path: Path | None = None

    def __enter__(self) -> Experiment:
        self._workdir = Workdir(self._prefix)
        self.path = self._workdir.path
        return self

    def __exit__(self, *exc: object) -> None:
        if self._workdir is not None:
            self._workdir.__exit__(*exc)

    def load(self, name: str, **options: Any) -> Data:
        """:func:`load_data` into the temporary folder, with ``--chunk-rows`` and ``--n-rows``."""
        return load_data(name, self.path, chunk_rows=self.args.chunk_rows, n_rows=getattr(self.args, "n_rows", None),
                         **options)

    def finish(self, name: str, results: dict, markdown: str) -> dict:
        """:func:`finish` with this run's options and pass log."""
        return finish(self.args, name, results, markdown, self.log)


def headline(data: Data, details: str, rows: str = "training") -> None:
    """The line that opens a data set's part of a run: its name, sizes and ``details``."""
    say(f"\n== {data.label}: {data.n_train} {rows} / {data.n_test} test rows, d = {data.d}; {details}")


def fourier_kernel(d: int, m0: int, sigma: float, seed: int):
    """Gaussian random Fourier features (the candidate map), drawn without reading data.

    The same ``seed`` gives the same standard-normal directions for every
    ``sigma`` (common random numbers across the bandwidth grid).
    """
    import dxrf

    fmap = dxrf.RandomFourierFeatures(m0, kernel="gaussian", bandwidth=float(sigma), random_state=int(seed))
    return fmap.fit(np.zeros((1, d), dtype=np.float32)).kernel_


# --------------------------------------------------------------------------- passes


def stats_pass(X, T, kernels: Sequence, *, fraction: float | None = None, seed: int = 0) -> list:
    """ONE pass over ``X`` accumulating the statistics of every kernel in ``kernels``.

    Returns, per kernel, ``(train, validation)`` with a ``fraction`` (the
    hashed split of :func:`dxrf.stats.hashed_split`) or ``(stats,)``: the
    library's multi-map :func:`dxrf.accumulate`, which reads X once.
    """
    import dxrf

    out = dxrf.accumulate(X, T, list(kernels), split=fraction, split_seed=seed, progress=None)
    return [o if isinstance(o, tuple) else (o,) for o in out]


def error_pass(X, labels, groups: Sequence, *, fraction: float | None = None, seed: int = 0) -> list:
    """ONE prediction pass scoring many linear models: :func:`dxrf.score_models`.

    ``groups`` are :class:`dxrf.LinearModels` (classification on
    integer class codes ``labels``). Returns, per part of the rows (training
    and validation with a ``fraction``, else all rows), the list of
    :class:`dxrf.ModelScores` of every group.
    """
    from dxrf.stats import score_models

    out = score_models(X, labels, groups, split=fraction, split_seed=seed, progress=None)
    return list(out) if fraction is not None else [out]


def lowest_error(error: Sequence[float], mse: Sequence[float]) -> int:
    """The validation choice: the index of the lowest ``error``, ties by the lowest ``mse``, then the first.

    The library's rule (:func:`dxrf.search.best_index`: the highest score, the
    first of equals) on the candidates reordered by MSE (a stable sort), so
    that the first of equal errors is the one of lowest MSE. NaN counts as
    the largest error or MSE.
    """
    from dxrf.search import best_index

    order = np.argsort(np.nan_to_num(np.asarray(mse, dtype=np.float64), nan=np.inf), kind="stable")
    score = -np.nan_to_num(np.asarray(error, dtype=np.float64)[order], nan=np.inf)
    return int(order[best_index({"mean_test_score": score})])


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


def pyplot(*filenames: str):
    """matplotlib's pyplot on the file-only Agg backend, or None where matplotlib is not installed.

    Without it, one line says that the figures ``filenames`` are skipped and
    how to get them; every other result is written as usual.
    """
    from ._common import WORKFLOWS_EXTRA

    try:
        import matplotlib
    except ImportError:
        say(f"skipped {', '.join(filenames)}: matplotlib is not installed ({WORKFLOWS_EXTRA} draws "
            f"{'them' if len(filenames) > 1 else 'it'})")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(args: argparse.Namespace, fig: Any, filename: str) -> None:
    """Lay out ``fig``, save it as ``filename`` in the results folder, and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(out_path(args, filename), dpi=120)
    plt.close(fig)


def dataset_panels(args: argparse.Namespace, filename: str, datasets: dict, draw: Callable[[Any, dict], None], *,
                   title: str, cols: int | None = None, width: float = 5.5, legend_size: int = 7) -> None:
    """A figure of one panel per data set, saved as ``filename`` (skipped without matplotlib).

    ``draw(ax, result)`` draws ``datasets[name]`` into its panel, which is
    then titled with the data set's name and gridded; ``cols`` panels a row
    (default: all in one), the legend in the first panel.
    """
    plt = pyplot(filename)
    if plt is None:
        return
    names = list(datasets)
    cols = cols or len(names)
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, 4.2 * rows), squeeze=False)
    panels = axes.ravel()
    for ax, name in zip(panels, names):
        draw(ax, datasets[name])
        ax.set_title(short_label(name), fontsize=10)
        ax.grid(alpha=0.3)
    for ax in panels[len(names):]:
        ax.axis("off")
    panels[0].legend(fontsize=legend_size)
    fig.suptitle(title)
    save_figure(args, fig, filename)


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
