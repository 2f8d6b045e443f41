"""Clients of the public model search (figures 2 and 3, ``dxrf bench fig2-grid``).

:class:`dxrf.RandomFeatureRidgeCV` and :class:`dxrf.RandomFeatureClassifierCV`
with the workflows' protocol (:func:`search_fit`); the choices per reported
cell read off ``cv_results_`` (:func:`best_row`) and one test pass scoring
the kept fold models (:func:`test_errors`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ._paper import VALIDATION_FRACTION, Data, PassLog, lowest_error


# --------------------------------------------------------------------------- clients of the public model search


def search_fit(data: Data, log: PassLog, *, bandwidths: Sequence[float], seed: int, what: str,
               split_seed: int | None = None, **params: Any):
    """The public model search on the training rows, seeded by ``seed``: its passes go to ``log``.

    :class:`dxrf.RandomFeatureRidgeCV` (regression) or
    :class:`dxrf.RandomFeatureClassifierCV` choosing by validation accuracy
    (its second pass scores the 0-1 errors of every configuration), with the
    workflows' protocol: a hashed hold-out of :data:`VALIDATION_FRACTION`
    (seed ``split_seed``, default ``seed``: the rows the workflows always held
    out), candidates and draws seeded by ``seed``, ELSS leverage scores from every training input
    (``N0 = N``), and every configuration's model kept for test passes.
    ``params`` are the search's grid (``n_components``, ``selections``, ...).
    """
    import warnings

    import dxrf

    cls, extra = (dxrf.RandomFeatureRidgeCV, {}) if data.regression else (dxrf.RandomFeatureClassifierCV, {"scoring": "accuracy"})
    split_seed = seed if split_seed is None else split_seed
    est = cls(bandwidths=[float(s) for s in bandwidths], cv=VALIDATION_FRACTION, cv_seed=split_seed, random_state=seed,
              leverage_rows="all", keep_models=True, **extra, **params)
    with warnings.catch_warnings():
        # a grid's edge warnings concern the overall best, which the figures do not report
        warnings.simplefilter("ignore", UserWarning)
        est.fit(data.X, data.T if data.regression else data.labels)
    keys = [(s, seed) for s in bandwidths]
    r = est.cv_results_
    selected = np.flatnonzero((np.asarray(r["param_selection"]) != "none") & ~np.isnan(r["mean_validation_mse"]))
    # bandwidth_choice="plain-first": the plain features at every bandwidth, then every candidate at one
    plain_first = params.get("bandwidth_choice") == "plain-first" and len(bandwidths) > 1 and selected.size > 0
    log.add("train", data.name, keys, "plain features of every sigma (train + validation)" if plain_first else what)
    if plain_first:
        log.add("train", data.name, [(float(r["bandwidth_value"][selected[0]]), seed)], what)
    if not data.regression:
        log.add("train", data.name, keys, "0-1 errors of every configuration on training/validation rows")
    if est.n_passes_ != 1 + plain_first + (not data.regression):
        raise RuntimeError(f"the search made {est.n_passes_} passes over the training rows")
    return est


def search_rows(results: dict, **where: Any) -> np.ndarray:
    """Rows of ``cv_results_`` whose ``bandwidth_value`` / ``param_*`` equal the given values."""
    keep = np.ones(len(results["params"]), dtype=bool)
    for key, value in where.items():
        column = results["bandwidth_value" if key == "bandwidth" else f"param_{key}"]
        keep &= np.array([c == value for c in column])
    return np.flatnonzero(keep)


def validation_error(results: dict, classification: bool) -> np.ndarray:
    """Per row: the validation misclassification rate (classification) or MSE (regression); NaN as infinity."""
    err = 1.0 - results["mean_test_score"] if classification else results["mean_validation_mse"]
    return np.nan_to_num(np.asarray(err, dtype=np.float64), nan=np.inf)


def best_row(results: dict, rows: np.ndarray, classification: bool) -> int:
    """The validation choice among ``rows``: lowest validation error, ties by MSE, then the first."""
    mse = np.asarray(results["mean_validation_mse"], dtype=np.float64)[rows]
    return int(rows[lowest_error(validation_error(results, classification)[rows], mse)])


def row_params(results: dict, row: int) -> dict:
    """The selection penalty (``lam`` or ``rho``) and ``alpha`` of a row, as the results record them."""
    p = results["params"][row]
    return {k: float(p[k]) for k in ("lam", "rho", "alpha") if k in p}


def test_errors(searches: Sequence[tuple[Any, Sequence[int]]], data: Data, log: PassLog, keys: Iterable[tuple],
                what: str) -> list[dict[int, float]]:
    """ONE pass over the test rows scoring the kept models of every ``(search, rows of its cv_results_)``.

    The searches' :meth:`~dxrf.RandomFeatureRidgeCV.fold_models` are scored
    together by :func:`dxrf.score_models`. Returns, per search,
    ``{row: test error}``: the MSE (regression, the scaled response) or the
    misclassification rate.
    """
    from dxrf.stats import score_models

    layout = []
    for est, rows in searches:
        if not data.regression and not np.array_equal(est.classes_, np.arange(len(data.classes))):
            raise RuntimeError(f"the search saw classes {est.classes_} instead of the codes 0..{len(data.classes) - 1}")
        layout.append(est.fold_models(np.asarray(rows, dtype=np.intp)))
    y = data.T_test if data.regression else data.labels_test  # class codes for classification
    scores = iter(score_models(data.X_test, y, [models for groups in layout for _, models in groups]))
    log.add("test", data.name, keys, what)
    out = []
    for groups in layout:
        errors: dict[int, float] = {}
        for rows, _ in groups:
            sc = next(scores)
            errors.update(zip(rows.tolist(), map(float, sc.mse if data.regression else sc.error)))
        out.append(errors)
    return out
