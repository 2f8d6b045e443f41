"""The search by conjugate gradient: Nyström configurations validated without the M x M Gram.

Where a search's Gram statistics would not fit the workers, or where their
``N M^2`` pass costs more than Falkon's conjugate gradient (:mod:`dxrf.solvers.pcg`),
every (bandwidth, M) of a Nyström grid is solved by
:func:`~dxrf.solvers.pcg.pcg_ridge` instead: all penalties at once, on the
search's own hold-out (the same hashed rows or mask as the Gram plan's), in
the same passes as the refit on all rows. A configuration's R^2 is scored
like the Gram's, against the validation rows' own variance; the chosen
configuration's model is its all-rows solution, so no refit pass follows.

The plan needs a hold-out (``cv`` a fraction or a mask): k folds would be one
conjugate gradient per fold, and ``cv="evidence"`` needs the statistics. It
keeps no fold models, so ``scoring="accuracy"`` and ``keep_models`` take the
Gram plan.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from dxrf.core.options import resolve_options
from dxrf.engine.cache import plan_cache
from dxrf.features.nystroem import NystroemFeatures
from dxrf.search.refit import landmark_prefix_map
from dxrf.search.evaluate import r2_from_variance
from dxrf.search.settings import SearchSettings
from dxrf.solvers.landmark_solve import landmark_values
from dxrf.solvers.pcg import pcg_coef, pcg_iterations, pcg_ridge, plan_estimate

__all__ = ["SEARCH_TOL", "SEARCH_MAX_ITER", "SEARCH_VALIDATION_TOL", "PCGSearch", "pcg_refusal", "search_estimate", "pcg_search", "pcg_model"]

#: the conjugate gradient's relative residual in a search: a validation MSE needs far less than
#: a model's last digits (kin40k, M = 2000: the hold-out MSE agreed with the Gram's to 1e-5
#: relative at 1e-6), and each decade costs about 18 iterations (:data:`~dxrf.solvers.pcg.ITERATIONS_PER_DECADE`)
SEARCH_TOL = 1e-6
#: iterations at most per configuration (a configuration that stops here is warned about)
SEARCH_MAX_ITER = 300
#: a penalty also stops once its hold-out MSE has settled to this (relative, :func:`~dxrf.solvers.pcg.pcg_ridge`):
#: without it the grid's smallest penalty ran all 300 iterations at every M of a kin40k search
SEARCH_VALIDATION_TOL = 1e-4


def pcg_refusal(s: SearchSettings, kind: str) -> str | None:
    """Why the conjugate gradient cannot run the search ``s`` with row groups ``kind``; None when it can."""
    if not s.nystroem:
        return "it solves Nyström features only (features='nystroem')"
    if kind not in ("fraction", "mask"):
        return ("it validates on a hold-out: give cv a fraction or a boolean mask (k folds and cv='evidence' "
                "need the Gram's statistics)")
    if s.scoring != "r2":
        return "scoring='accuracy' scores fold models in a pass of the Gram plan: use scoring='r2'"
    if s.keep_models:
        return "keep_models=True keeps the Gram plan's fold models"
    return None


def search_estimate(s: SearchSettings, n: int, d: int, k: int, *, dask_input: bool) -> dict:
    """The two plans' arithmetic for the whole grid of ``s`` (:func:`~dxrf.solvers.pcg.plan_estimate`'s units).

    The Gram plan reads X once for every bandwidth's ``M0 = max(M)``
    landmarks (the smaller M are prefixes) and factors ``C + alpha K`` per
    (bandwidth, M, penalty); the conjugate gradient solves each (bandwidth,
    M) with all penalties and the hold-out in one run of passes.
    """
    grid = s.grid
    n_b, a = len(grid.bandwidths), int(grid.alphas.size)
    m0 = int(grid.n_components.max())
    t = pcg_iterations(SEARCH_TOL, SEARCH_MAX_ITER, settled=True)
    options = resolve_options()
    itemsize = np.dtype(s.dtype).itemsize
    gram = pcg = 0.0
    for m in (int(v) for v in grid.n_components):
        cached = plan_cache(options.cache_features, n, m, itemsize, dask_input=dask_input,
                            fraction=options.cache_fraction).cached
        one = plan_estimate(n, m, d, k, t, n_alphas=a, held_out=True, cached=cached)
        pcg += n_b * one["pcg_ops"]
        gram += n_b * a * m**3 / 3
    gram += n_b * (n * m0 * d + n * m0 * m0 / 2)
    return {"plan": "pcg" if pcg < gram else "gram", "gram_ops": float(gram), "pcg_ops": float(pcg), "iterations": t}


@dataclasses.dataclass
class PCGSearch:
    """What the conjugate gradient's search found, as the Gram plan's :class:`~dxrf.search.evaluate.GridErrors`.

    ``mse``/``r2`` (and with training scores ``train_mse``/``train_r2``, those
    of the refit on all rows) per bandwidth, of shape ``(1, 1, len(M), len(alpha))``;
    ``best``: ``(b, i, features, result)`` of the (bandwidth, M) with the best
    validation score (the first of equals), whose map is fitted and whose
    result keeps the preconditioner's factor for the whitening.
    """

    mse: list
    r2: list
    train_mse: list | None
    train_r2: list | None
    best: tuple
    n_passes: int
    n_iter: list  # per configuration, in (bandwidth, M) order


def pcg_search(X: object, T: object, s: SearchSettings, cv: object, values: list, landmarks: tuple, seed: int,
               sample_weight: object = None) -> PCGSearch:
    """Solve and score every (bandwidth, M) of ``s.grid`` by conjugate gradient on the hold-out ``cv``.

    ``cv`` is the checked hold-out (a fraction, hashed with ``s.cv_seed`` as
    the Gram plan's pass hashes it, or a boolean mask); ``values`` the
    bandwidths' values; ``landmarks`` the uniform race's ``(rows, L)``.
    """
    grid = s.grid
    alphas = np.asarray(grid.alphas, dtype=np.float64)
    Y = T if T.ndim == 2 else T.reshape(-1, 1)
    shape = (1, 1, grid.n_components.size, alphas.size)
    mse, r2 = [np.full(shape, np.nan) for _ in values], [np.full(shape, np.nan) for _ in values]
    train = s.return_train_score
    train_mse = [np.full(shape, np.nan) for _ in values] if train else None
    train_r2 = [np.full(shape, np.nan) for _ in values] if train else None
    best, passes, iters, stalled = None, 0, [], []
    options = resolve_options()
    for b, value in enumerate(values):
        for i, m in enumerate(int(v) for v in grid.n_components):
            # the map the Gram plan's refit would make, whitened by the solver's factor (no second factorisation)
            features = landmark_prefix_map(s, landmarks, m, value, seed, "cholesky", defer_whitening=True)
            result = pcg_ridge(
                X, Y, landmark_values(features.kernel_), alphas, sample_weight=sample_weight,
                fit_intercept=s.fit_intercept, tol=SEARCH_TOL, max_iter=SEARCH_MAX_ITER, options=options,
                validation=cv, validation_seed=s.cv_seed, keep_factor=True, validation_tol=SEARCH_VALIDATION_TOL,
            )
            passes += result.n_passes
            iters.append(result.n_iter)
            if not result.converged:
                stalled.append(f"bandwidth {s.grid.bandwidths[b].text}, M={m}: {result.history[-1]:.1e}")
            mse[b][0, 0, i] = result.validation_mse.mean(axis=1)
            r2[b][0, 0, i] = r2_from_variance(result.validation_mse, result.validation_variance)
            if train:
                train_mse[b][0, 0, i] = result.train_mse.mean(axis=1)
                train_r2[b][0, 0, i] = r2_from_variance(result.train_mse, result.variance)
            score = np.nanmax(np.nan_to_num(r2[b][0, 0, i], nan=-np.inf))
            if best is None or score > best[0]:
                best = (score, b, i, features, result)
            else:
                result.factor = None  # only the best configuration's M x M factor is kept
    if stalled:  # one warning for the search, not one per configuration
        warnings.warn(
            f"the search's conjugate gradient stopped after {SEARCH_MAX_ITER} iterations before tol={SEARCH_TOL:g} "
            f"in {len(stalled)} of {len(iters)} configurations (relative residual {'; '.join(stalled[:4])}"
            f"{'; ...' if len(stalled) > 4 else ''}); their scores and model are the last iterate's. The "
            "smallest alphas converge slowest.", ConvergenceWarning, stacklevel=7,  # the estimator's caller (past search and fit)
        )
    return PCGSearch(mse, r2, train_mse, train_r2, best[1:], passes, iters)


def pcg_model(found: PCGSearch, b: int, i: int, alpha: float) -> tuple[NystroemFeatures, tuple]:
    """The chosen configuration's fitted map, whitened, and its model ``(coef, intercept, train MSE per output, weight)``.

    ``(b, i)`` must be the best configuration :func:`pcg_search` kept (the
    search's choice by the same scores); its solution on all rows at
    ``alpha`` becomes the model, so no refit pass is needed.
    """
    kb, ki, features, result = found.best
    if (kb, ki) != (b, i):  # the table and the search chose by the same scores
        raise RuntimeError(f"the search chose configuration {(b, i)} but the conjugate gradient kept {(kb, ki)}")
    j = int(np.flatnonzero(result.alphas == alpha)[0])
    coef = pcg_coef(features, result, result.betas[j], deferred=True)
    return features, (coef, result.intercepts[j].copy(), result.train_mse[j].copy(), result.sum_weight)
