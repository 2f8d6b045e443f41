"""The "newton-cg" solver: truncated Newton, conjugate gradients on Hessian-vector products."""

from __future__ import annotations

import math

import numpy as np

from dxrf.solvers.logistic.messages import _Outcome, _Request, _Solver
from dxrf.solvers.logistic.newton import _capped, _line_search
from dxrf.solvers.logistic.objective import _Objective

_MAX_CG = 250


def _newton_cg(obj: _Objective, w: np.ndarray, tol: float, max_iter: int) -> _Solver:
    """Truncated Newton: CG on Hessian-vector products (one pass each) and the Newton line search."""
    reply = yield _Request(w)
    L, g = obj.value(reply.loss, w), obj.gradient(reply.grad, w)
    n_iter, stalled = 0, False
    while True:
        if np.max(np.abs(g)) <= tol:
            return _Outcome(w, L, n_iter, True, "converged")
        if stalled:
            return _Outcome(w, L, n_iter, True, "converged: relative decrease of the loss below ftol")
        if n_iter >= max_iter:
            return _Outcome(w, L, n_iter, False, f"max_iter={max_iter} reached")
        # CG from 0 on H p = -g, stopped at the usual forcing term (superlinear convergence)
        gnorm = float(np.linalg.norm(g))
        target = min(0.5, math.sqrt(gnorm)) * gnorm
        step, r = np.zeros_like(g), g.copy()
        d, rr = -r, float(r @ r)
        for _ in range(_MAX_CG):
            Hd = obj.hvp((yield _Request(w, grad=False, vector=d)).hv, d)
            curv = float(d @ Hd)
            if curv <= 1e-10 * obj.alpha * float(d @ d):
                # (near) zero curvature: only the unpenalised intercept can have it, when
                # every point is saturated (w = 0); keep the step so far, or descend
                break
            a = rr / curv
            step += a * d
            r += a * Hd
            rr_new = float(r @ r)
            if math.sqrt(rr_new) <= target:
                break
            d = -r + (rr_new / rr) * d
            rr = rr_new
        if not step.any():
            step = -g
        step = _capped(step, w)
        slope = float(g @ step)
        trial = yield _Request(w + step, direction=step)
        s = yield from _line_search(obj, w, slope, step, trial)
        if s is None:
            return _Outcome(w, L, n_iter, False, "line search found no decrease")
        w_new = w + s * step
        reply = trial if s == 1.0 else (yield _Request(w_new))
        L_new = obj.value(reply.loss, w_new)
        # a stall of a full step is rounding (float32 scores); after backtracking it is not
        stalled = s == 1.0 and obj.stalled(obj.value(trial.line[-1], w), L_new)
        w, L, g = w_new, L_new, obj.gradient(reply.grad, w_new)
        n_iter += 1
