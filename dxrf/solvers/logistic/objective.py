"""The objective of one binary problem, its derivatives from a pass's sums, and the label checks."""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg

from dxrf.solvers.logistic.messages import _Reply

# steps s of the line-search grid evaluated in the same pass as a trial point (a pass also
# evaluates s = 0, the reference of the Armijo test)
_LINE_STEPS = 0.5 ** np.arange(1, 11)
_ARMIJO = 1e-4
_FTOL = {np.dtype(np.float64): 64 * np.finfo(np.float64).eps, np.dtype(np.float32): 1e-11}


def _softplus(x: np.ndarray, scratch: np.ndarray | None = None) -> np.ndarray:
    """``log(1 + exp(x))`` = ``np.logaddexp(0, x)``, stable, about 4x faster; overwrites ``x``.

    ``scratch``, of the shape of ``x``, saves one temporary array.
    """
    pos = np.maximum(x, 0.0, out=scratch)
    np.abs(x, out=x)
    np.negative(x, out=x)
    np.exp(x, out=x)
    np.log1p(x, out=x)
    x += pos
    return x


def _check_labels(T: np.ndarray, n: int, row_offset: int = 0) -> np.ndarray:
    T = np.asarray(T)
    if T.ndim == 1:
        T = T[:, None]
    if T.ndim != 2 or T.shape[0] != n:
        raise ValueError(f"labels T have shape {T.shape}; expected ({n},) or ({n}, K) to match the rows of X")
    bad = (T != 1) & (T != -1)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise ValueError(
            f"labels T must be -1 or +1; found {T[row, col].item()!r} at row {row + row_offset}"
            + (f", column {col}" if T.shape[1] > 1 else "")
        )
    return T


class _Objective:
    """``L = loss / N + alpha/2 |theta|^2`` and its derivatives from a pass's sums.

    A point is ``[theta; beta]``: ``m`` penalised coefficients, then ``intercepts``
    unpenalised ones (1 for a binary problem; K for the multinomial one, whose
    point is the (M + 1, K) matrix flattened row by row).
    """

    def __init__(self, n: int, alpha: float, m: int, fit_intercept: bool, dtype: np.dtype, intercepts: int = 1) -> None:
        self.n, self.alpha, self.m, self.fit_intercept = n, alpha, m, fit_intercept
        self.size = m + intercepts  # entries of a point
        self.dim = self.size if fit_intercept else m  # free parameters, first in a point
        self.ftol = _FTOL[np.dtype(dtype)]

    def value(self, loss_sum: float, w: np.ndarray) -> float:
        th = w[: self.m]
        return loss_sum / self.n + 0.5 * self.alpha * float(th @ th)

    def _penalised(self, total: np.ndarray, v: np.ndarray) -> np.ndarray:
        # a sum over rows divided by N plus the penalty's term in v (the gradient at v,
        # or the Hessian times v); a fixed intercept has no component
        out = total / self.n
        out[: self.m] += self.alpha * v[: self.m]
        if not self.fit_intercept:
            out[self.m :] = 0.0
        return out

    def gradient(self, grad_sum: np.ndarray, w: np.ndarray) -> np.ndarray:
        return self._penalised(grad_sum, w)

    def hvp(self, hv_sum: np.ndarray, v: np.ndarray) -> np.ndarray:
        return self._penalised(hv_sum, v)

    def newton_step(self, hess_sum: np.ndarray, g: np.ndarray) -> np.ndarray:
        """Solve ``(H/N + alpha I_theta) Delta = -g`` by Cholesky (intercept unpenalised)."""
        d = self.dim
        H = hess_sum[:d, :d] / self.n
        H[np.diag_indices(self.m)] += self.alpha
        step = np.zeros(self.m + 1)
        jitter = 0.0
        for _ in range(8):
            try:
                factor = scipy.linalg.cho_factor(H, lower=True, check_finite=False)
                step[:d] = scipy.linalg.cho_solve(factor, -g[:d], check_finite=False)
                return step
            except np.linalg.LinAlgError:
                # only when the intercept row is (numerically) singular: all weights ~ 0
                jitter = max(jitter * 100.0, 1e-12 * max(np.trace(H) / d, 1e-300))
                H[np.diag_indices(d)] += jitter
        raise np.linalg.LinAlgError("the Newton system is not positive definite even with jitter")

    def quasi_newton_update(self, hess_sum: np.ndarray, s: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``hess_sum`` after a BFGS update of the model Hessian ``hess_sum / N + alpha I_theta``.

        ``s`` is the step taken and ``y`` the change of the gradient along it.
        Powell's damping (``y`` blended with ``B s`` when ``s^T y < 0.2 s^T B s``)
        keeps the model positive definite whatever the rounding of ``y``.
        """
        d = self.dim
        s, y = s[:d], y[:d]
        Bs = hess_sum[:d, :d] @ s / self.n
        Bs[: self.m] += self.alpha * s[: self.m]
        sBs, sy = float(s @ Bs), float(s @ y)
        if not sBs > 0.0:
            return hess_sum
        if sy < 0.2 * sBs:
            theta = 0.8 * sBs / (sBs - sy)
            y = theta * y + (1.0 - theta) * Bs
            sy = 0.2 * sBs
        out = hess_sum.copy()
        out[:d, :d] += self.n * (np.outer(y, y) / sy - np.outer(Bs, Bs) / sBs)
        return out

    def accept_full_step(self, w: np.ndarray, slope: float, direction: np.ndarray, trial: _Reply) -> bool:
        """Whether the full step ``w + direction``, evaluated by ``trial``, is taken.

        It is when it passes the Armijo test against the loss at ``w``
        recomputed in the trial's own pass (``trial.line[-1]``): both losses
        then carry the same rounding of the scores, so their difference is
        accurate far below the rounding of either (float32 scores). Failing
        that, it is taken when the objective still decreases at its end
        (``g(w + direction)^T direction <= 0``): by convexity it then lies
        before the minimum along the line, so its loss is no larger.
        """
        L0 = self.value(trial.line[-1], w)
        w1 = w + direction
        if self.value(trial.loss, w1) <= L0 + _ARMIJO * slope + self.ftol * max(abs(L0), 1.0):
            return True
        return float(self.gradient(trial.grad, w1) @ direction) <= 0.0

    def grid_step(self, w: np.ndarray, slope: float, direction: np.ndarray, line: np.ndarray, c: float) -> float | None:
        """Among the steps ``c * _LINE_STEPS``, the one with the lowest objective among those
        passing Armijo; None if none does.

        ``line`` holds the losses of one pass at those steps and, last, at ``w``
        (the reference of the Armijo test, with the same rounding).
        """
        steps = c * _LINE_STEPS
        th, dth = w[: self.m], direction[: self.m]
        pen = 0.5 * self.alpha * (th @ th + 2 * steps * (th @ dth) + steps**2 * (dth @ dth))
        Ls = line[:-1] / self.n + pen
        L0 = self.value(line[-1], w)
        ok = Ls <= L0 + _ARMIJO * steps * slope + self.ftol * max(abs(L0), 1.0)
        if not ok.any():
            return None
        return float(steps[ok][np.argmin(Ls[ok])])

    def converges_next(self, decrement: float, L: float) -> bool:
        """Whether a Newton step with this decrement should land where the next step is
        below tolerance (near the optimum the decrement squares at each step): there
        the ratio of successive decrements is rounding, not a sign of a poor model."""
        return decrement <= math.sqrt(0.5 * self.ftol * max(abs(L), 1.0))

    def stalled(self, L_old: float, L_new: float) -> bool:
        return L_old - L_new <= self.ftol * max(abs(L_old), 1.0)
