"""Models on one-pass statistics: a selection of candidate features with its whole ridge path.

The workflows whose methods the public model search does not cover
(leverage-weighted RFF, maxout maps, few-shot) fit here: every method, number
of features M, leverage penalty and ridge penalty alpha is dense algebra on
sub-blocks of the candidates' statistics (:func:`ridge_fit`); test errors come
from one pass over the test rows (:func:`test_mse_pass`, or for
classification :func:`model_groups` scored by :func:`~._paper.error_pass`).
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from ._paper import (
    VALIDATION_FRACTION,
    Data,
    Experiment,
    PassLog,
    fourier_kernel,
    headline,
    lowest_error,
    say,
    stats_pass,
)


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
    """Stack the coefficients of all models on each kernel's candidates, for :func:`~._paper.error_pass`.

    Returns one :class:`dxrf.LinearModels` per kernel (the library's
    :func:`dxrf.learners.stacked_models`) and, per kernel, the list of
    ``(fit, slice of its models in the stack)``.
    """
    from dxrf.learners import stacked_models

    by_group: dict[Any, list[Fit]] = defaultdict(list)
    for f in fits:
        by_group[f.group].append(f)
    groups, layout = [], []
    for g, fs in by_group.items():
        groups.append(stacked_models(kernels[g], [(f.idx, f.scales, f.coefs, f.intercepts) for f in fs], "classification"))
        spans, col = [], 0
        for f in fs:
            spans.append((f, slice(col, col + f.coefs.shape[0])))
            col += f.coefs.shape[0]
        layout.append(spans)
    return groups, layout


def assign_errors(layout: list, result: list, parts: Sequence[str | None]) -> None:
    """Store the error rates of an :func:`error_pass` in the fits (``parts`` names its parts of rows)."""
    for scores, part in zip(result, parts):
        if part is None:
            continue
        for spans, sc in zip(layout, scores):
            if sc.n > 0:
                for f, sl in spans:
                    f.err[part] = sc.error[sl]


def choose(fits: Iterable[Fit], group_key: Callable[[Fit], Any] = lambda f: f.key) -> dict:
    """The validation choice among all fits with the same ``group_key`` and all their alphas.

    Ranked by the validation error (misclassification for classification),
    ties broken by the validation MSE (:func:`~._paper.lowest_error`).
    Returns ``{key: (fit, alpha index)}``.
    """
    candidates: dict = defaultdict(list)
    for f in fits:
        candidates[group_key(f)].extend((f, j) for j in range(len(f.alphas)))
    out = {}
    for k, pairs in candidates.items():
        error = [f.err.get("valid", f.mse["valid"])[j] for f, j in pairs]
        out[k] = pairs[lowest_error(error, [f.mse["valid"][j] for f, j in pairs])]
    return out


def plain_fit(key: tuple, train, valid, m: int, m0: int, alphas, group: Any = 0) -> Fit:
    """Plain random features (RKS): the first ``m`` of ``m0`` candidates, rescaled to an ``m``-feature map."""
    return ridge_fit(key, {}, group, train, valid, np.arange(m), np.full(m, math.sqrt(m0 / m)), alphas)


def plain_validation(train, valid, m: int, m0: int, alphas) -> float:
    """The lowest validation MSE over ``alphas`` of :func:`plain_fit` (what bandwidths are chosen by)."""
    return float(plain_fit(("RKS", m), train, valid, m, m0, alphas).mse["valid"].min())


# --------------------------------------------------------------------------- candidates and errors per seed


def candidate_pass(data: Data, sigma: float, seed: int, m0: int, log: PassLog,
                   what: str = "candidate statistics (train + validation)") -> tuple:
    """ONE pass over the training rows: statistics of ``m0`` candidates for training and validation rows.

    Returns ``(kernel, train, valid)``; the pass is recorded in ``log`` as ``what``.
    """
    kernel = fourier_kernel(data.d, m0, sigma, seed)
    train, valid = stats_pass(data.X, data.T, [kernel], fraction=VALIDATION_FRACTION, seed=seed)[0]
    log.add("train", data.name, [(sigma, seed)], what)
    return kernel, train, valid


def select_sigma(data: Data, grid: Sequence[float], seed: int, log: PassLog, *, m: int, m0: int, alphas,
                 label: str = "RKS", what: str = "candidate statistics (train + validation)") -> tuple:
    """The bandwidth of ``grid`` whose plain fit at ``m`` features has the lowest validation MSE.

    One :func:`candidate_pass` per bandwidth; ``label`` names the plain fit
    in the progress lines. Returns ``(sigma, kernel, train, valid, scores)``:
    the chosen bandwidth with its candidate kernel and statistics, and the
    validation MSE of every bandwidth of ``grid``.
    """
    best = None
    scores = []
    for sigma in grid:
        kernel, train, valid = candidate_pass(data, sigma, seed, m0, log, what)
        v = plain_validation(train, valid, m, m0, alphas)
        scores.append(v)
        say(f"   sigma = {sigma:.3g}: validation MSE of {label} at M = {m}: {v:.4g}")
        if best is None or v < best[0]:
            best = (v, sigma, kernel, train, valid)
    _, sigma, kernel, train, valid = best
    return sigma, kernel, train, valid, scores


@dataclasses.dataclass
class SeedCandidates:
    """One seed's data (split ``seed``) with the candidate statistics at the chosen bandwidth.

    ``scores`` (the validation MSE of every bandwidth of ``grid``) only on
    seed 0, where the bandwidth is chosen; None on the others.
    """

    seed: int
    data: Data
    grid: list[float]
    sigma: float
    kernel: Any
    train: Any
    valid: Any
    scores: list[float] | None


def seed_candidates(exp: Experiment, name: str, m0: int, *, m: int, label: str = "RKS",
                    what: str = "candidate statistics (train + validation)",
                    check: Callable[[Data], None] | None = None) -> Iterator[SeedCandidates]:
    """For each seed ``s`` of ``--seeds``: data set ``name`` on split ``s`` and its candidate pass.

    On seed 0 the bandwidth is chosen from the ``--sigma-factors`` multiples
    of the median distance (:func:`select_sigma`: one pass per bandwidth);
    the other seeds make ONE :func:`candidate_pass` at that bandwidth.
    ``check`` sees each loaded data set before any pass (to refuse one).
    """
    args = exp.args
    grid: list[float] = []
    sigma = math.nan
    for seed in range(args.seeds):
        data = exp.load(name, rep=seed)
        if check is not None:
            check(data)
        scores = None
        if seed == 0:
            grid = [f * data.sigma_median for f in args.sigma_factors]
            headline(data, f"M0 = {m0}; sigma grid {[round(s, 3) for s in grid]}")
            sigma, kernel, train, valid, scores = select_sigma(data, grid, seed, exp.log, m=m, m0=m0,
                                                               alphas=args.alphas, label=label, what=what)
        else:
            kernel, train, valid = candidate_pass(data, sigma, seed, m0, exp.log, what)
        yield SeedCandidates(seed, data, grid, sigma, kernel, train, valid, scores)


def test_mse_pass(data: Data, kernels: dict, fits: Sequence[Fit], keys: Iterable[tuple], log: PassLog,
                  what: str = "test statistics") -> None:
    """Regression: ONE pass over the test rows; their statistics give every fit's exact test MSE.

    ``kernels`` maps each fit group to its candidate kernel; ``keys`` are the
    (sigma, seed) the pass serves. The test MSE becomes each fit's reported error.
    """
    groups = list(kernels)
    test = stats_pass(data.X_test, data.T_test, [kernels[g] for g in groups])
    log.add("test", data.name, keys, what)
    add_mse(fits, "test", {g: t[0] for g, t in zip(groups, test)})
    regression_errors(fits)
