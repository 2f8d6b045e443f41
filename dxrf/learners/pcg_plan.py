"""The Nyström plan choice of the ridge learners: the Gram's one pass, or preconditioned CG over passes.

``solver="gram"`` accumulates the M x M statistics (one pass, ``N M^2``);
``solver="pcg"`` solves the same equations by Falkon's preconditioned
conjugate gradient (:mod:`dxrf.solvers.pcg`, one pass per iteration, no M x M
statistics); ``solver="auto"`` takes the cheaper by
:func:`~dxrf.solvers.pcg.plan_estimate` (only for Nyström features: the
Gram plan otherwise). A grid of penalties and a validation split are solved
and scored in the conjugate gradient's own passes.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from dxrf.core.options import resolve_options
from dxrf.core.validation import is_dask
from dxrf.engine.cache import plan_cache
from dxrf.features.nystroem import NystroemFeatures
from dxrf.learners._base import check_validation
from dxrf.solvers.landmark_solve import landmark_values
from dxrf.solvers.pcg import PLANS, pcg_coef, pcg_iterations, pcg_ridge, plan_estimate

__all__ = ["PCGPlanMixin", "n_landmarks"]


def n_landmarks(features: object, n: int) -> int | None:
    """Landmarks a Nyström map will take (None for other features)."""
    if not isinstance(features, NystroemFeatures):
        return None
    given = features.landmarks
    if not isinstance(given, str):
        return int(np.shape(given)[0])
    return min(int(n), 100 if features.n_components is None else int(features.n_components))


class PCGPlanMixin:
    """``_choose_plan`` and ``_fit_pcg`` for a ridge learner with ``solver``, ``tol`` and ``max_iter``."""

    def _choose_plan(self, X: object, k: int, grid: object, validation: object) -> bool:
        """Set ``solver_`` and ``plan_estimate_``; True when the CG plan is taken."""
        for name in ("plan_estimate_", "pcg_history_", "pcg_validation_path_", "pcg_seconds_", "feature_cache_", "feature_cache_bytes_"):  # nothing left from an earlier fit's plan
            self.__dict__.pop(name, None)
        self.n_iter_ = 1  # the Gram plan's one solve; the conjugate gradient's iterations replace it
        solver = self._plan_solver()
        if solver not in PLANS:
            raise ValueError(f"solver must be one of {PLANS} for a ridge fit, got {solver!r}")
        features = self.features
        m = n_landmarks(features, int(X.shape[0]))
        if m is None:
            if solver == "pcg":
                raise ValueError(
                    f"solver='pcg' needs NystroemFeatures (it solves in the landmark basis), got {type(features).__name__}"
                )
            self.solver_ = "gram"
            return False
        if solver == "pcg" and not (np.isfinite(self.tol) and self.tol > 0):
            raise ValueError(f"tol must be a positive number for solver='pcg', got {self.tol!r}")
        # whether the CG's kernel values would be kept by the feature cache (as pcg_ridge will decide)
        options = resolve_options(cache_features=getattr(self, "cache_features", None))
        itemsize = np.dtype(getattr(features, "dtype", None) or np.float64).itemsize
        cache = plan_cache(options.cache_features, int(X.shape[0]), m, itemsize, dask_input=is_dask(X),
                           fraction=options.cache_fraction)
        settled = validation is not None and self.validation_tol is not None
        iterations = (pcg_iterations(self.tol, self.max_iter, settled=settled)
                      if np.isfinite(self.tol) and self.tol > 0 else None)
        self.plan_estimate_ = plan_estimate(int(X.shape[0]), m, int(X.shape[1]), k, iterations,
                                            n_alphas=1 if grid is None else len(grid), held_out=validation is not None,
                                            cached=cache.cached)
        use = solver == "pcg" or (solver == "auto" and self.plan_estimate_["plan"] == "pcg")
        self.solver_ = "pcg" if use else "gram"
        return use

    def _plan_solver(self) -> str:
        return self.solver

    def _fit_pcg(self, X: object, Y: object, w: object, grid: object = None, validation: object = None) -> np.ndarray:
        """Fit the map, solve by PCG; set the fit's attributes and return ``coef`` (M, k) on the features.

        With ``grid`` and/or ``validation`` (a fraction or a mask), every penalty
        is fitted on the training rows and scored on the validation rows, and
        refitted on all rows, in the same passes (:func:`~dxrf.solvers.pcg.pcg_ridge`);
        ``alpha_`` is the one with the lowest mean validation MSE, as on the Gram plan.
        """
        features = self._make_features()
        # a Cholesky whitening is the inverse of the preconditioner's first factor: taken from it, the
        # map's fit skips its own factorisation of K_LL (M^3 / 3 and an M x M array at the peak)
        deferred = isinstance(features, NystroemFeatures) and features.whitening == "cholesky"
        if deferred:
            features._defer_whitening = True
        kernel = self._fit_map(features, X)
        result = pcg_ridge(
            X, Y, landmark_values(kernel), float(self.alpha) if grid is None else np.asarray(grid, dtype=np.float64),
            sample_weight=w, fit_intercept=self.fit_intercept, tol=float(self.tol), max_iter=int(self.max_iter),
            options=resolve_options(cache_features=getattr(self, "cache_features", None)), validation=check_validation(validation, int(X.shape[0])),
            validation_seed=int(self.validation_seed), keep_factor=deferred,
            validation_tol=None if self.validation_tol is None else float(self.validation_tol),
        )
        for name in ("alphas_", "validation_errors_"):  # nothing left from an earlier fit's grid
            self.__dict__.pop(name, None)
        self.alpha_ = result.alpha
        if grid is not None:
            self.alphas_ = np.asarray(grid, dtype=np.float64)
        if result.validation_mse is not None:
            self.validation_errors_ = result.validation_mse.mean(axis=1)
        self.train_mse_ = float(result.train_mse[list(result.alphas).index(result.alpha)].mean())
        self.n_passes_ += result.n_passes
        if not result.converged:
            warnings.warn(
                f"the conjugate gradient did not converge: relative residual {result.history[-1]:.2e} after "
                f"{result.n_iter} iterations, tol={self.tol}. Increase max_iter, or loosen tol (a larger alpha "
                "converges faster).",
                ConvergenceWarning,
                stacklevel=3,  # past _fit_pcg and fit: the caller's line
            )
        self.feature_cache_, self.feature_cache_bytes_ = result.cache.status, int(result.cache.estimate)
        self.n_iter_ = result.n_iter
        self.pcg_history_ = result.history
        if result.validation_path is not None:
            self.pcg_validation_path_ = result.validation_path
        self.pcg_seconds_ = result.seconds
        self._intercept = result.intercept
        coef = pcg_coef(features, result, result.beta, deferred)
        self.kernel_ = features.kernel_
        self._coef = coef
        return coef

