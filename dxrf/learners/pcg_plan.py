"""The Nyström plan choice of the ridge learners: the Gram's one pass, or preconditioned CG over passes.

``solver="gram"`` accumulates the M x M statistics (one pass, ``N M^2``);
``solver="pcg"`` solves the same equations by Falkon's preconditioned
conjugate gradient (:mod:`dxrf.solvers.pcg`, one pass per iteration, no M x M
statistics); ``solver="auto"`` takes the cheaper by
:func:`~dxrf.solvers.pcg.plan_estimate` (only for Nyström features, one
penalty and no validation split: the Gram plan otherwise).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from dxrf.core.options import resolve_options
from dxrf.features.nystroem import NystroemFeatures
from dxrf.solvers.landmark_solve import landmark_values
from dxrf.solvers.pcg import PLANS, pcg_ridge, plan_estimate
from dxrf.stats.feature_stats import is_upper_triangular

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
        for name in ("plan_estimate_", "pcg_history_"):  # nothing left from an earlier fit's plan
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
        one_problem = grid is None and validation is None
        if solver == "pcg" and not one_problem:
            raise ValueError("solver='pcg' solves one penalty on all rows: give alpha, not alphas or validation")
        if solver == "pcg" and not (np.isfinite(self.tol) and self.tol > 0):
            raise ValueError(f"tol must be a positive number for solver='pcg', got {self.tol!r}")
        self.plan_estimate_ = plan_estimate(int(X.shape[0]), m, int(X.shape[1]), k)
        use = solver == "pcg" or (solver == "auto" and one_problem and self.plan_estimate_["plan"] == "pcg")
        self.solver_ = "pcg" if use else "gram"
        return use

    def _plan_solver(self) -> str:
        return self.solver

    def _fit_pcg(self, X: object, Y: object, w: object) -> np.ndarray:
        """Fit the map, solve by PCG; set the fit's attributes and return ``coef`` (M, k) on the features."""
        features = self._make_features()
        kernel = self._fit_map(features, X)
        self.alpha_ = float(self.alpha)
        result = pcg_ridge(
            X, Y, landmark_values(kernel), self.alpha_, sample_weight=w, fit_intercept=self.fit_intercept,
            tol=float(self.tol), max_iter=int(self.max_iter), options=resolve_options(),
        )
        self.n_passes_ += result.n_passes
        self.n_iter_ = result.n_iter
        self.pcg_history_ = result.history
        self._intercept = result.intercept
        # the features are k(x, L) T: their coefficients solve T theta = beta
        T = kernel.transform_matrix
        if is_upper_triangular(T):
            coef = scipy.linalg.solve_triangular(T, result.beta, lower=False, check_finite=False)
        else:
            coef = scipy.linalg.solve(T, result.beta, check_finite=False)
        self._coef = coef
        return coef
