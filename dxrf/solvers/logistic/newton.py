"""The "newton" solver: Newton with Hessian passes only where they pay, one pass per iteration.

Also the pieces the truncated-Newton solver shares: the step cap and the
line search on the losses that come with a trial pass.
"""

from __future__ import annotations

import math
from collections.abc import Generator

import numpy as np

from dxrf.solvers.logistic.messages import _Outcome, _Reply, _Request, _Solver
from dxrf.solvers.logistic.objective import _LINE_STEPS, _Objective

_REFRESH = 0.25  # Newton: a fresh Hessian when a step shrank the decrement by less than this
_MAX_BACKTRACK_PASSES = 3  # loss-only passes after the grid of the trial pass: steps down to 2^-40


def _capped(step: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The step shortened to at most ``10 max(|w|, 100)``.

    When every point is saturated (a far-off warm start) the weights
    ``sigma(f)(1 - sigma(f))`` underflow and the unpenalised intercept has no
    curvature: the Newton step is astronomically long, beyond what halving
    can repair. A positive multiple stays a descent direction; steps of a
    sane model are far shorter than the cap.
    """
    amax = float(np.max(np.abs(step)))
    if not np.isfinite(amax):
        raise FloatingPointError("the Newton step is not finite")
    radius = 10.0 * max(float(np.linalg.norm(w)), 100.0)
    if amax == 0.0 or amax * math.sqrt(step.size) <= radius:
        return step
    unit = step / amax  # the norm of a step of 1e160 would overflow
    return unit * (radius / float(np.linalg.norm(unit)))


def _line_search(obj: _Objective, w: np.ndarray, slope: float, step: np.ndarray, trial: _Reply) -> Generator[_Request, _Reply, float | None]:
    """The step length along ``step``, given the pass that evaluated ``w + step``.

    1 when :meth:`_Objective.accept_full_step` says so; else the best step of
    the grid 1/2 .. 2^-10 whose losses came with the trial pass; else (far
    from the optimum, e.g. a saturated warm start) loss-only passes continue
    the grid ten halvings at a time, at most :data:`_MAX_BACKTRACK_PASSES`.
    None when no step decreases the loss. Every Armijo test compares losses
    from one pass (the grid includes ``w`` itself).
    """
    if obj.accept_full_step(w, slope, step, trial):
        return 1.0
    c, line = 1.0, trial.line
    for extra in range(_MAX_BACKTRACK_PASSES + 1):
        s = obj.grid_step(w, slope, step, line, c)
        if s is not None or extra == _MAX_BACKTRACK_PASSES:
            return s
        c *= _LINE_STEPS[-1]
        # losses at w + c * s' * step for the grid s': "point - (1 - s') direction" with both scaled by c
        line = (yield _Request(w + c * step, grad=False, direction=c * step)).line
    return None


def _newton(obj: _Objective, w: np.ndarray, tol: float, max_iter: int) -> _Solver:
    """Newton with Hessian passes only where they pay: one pass per iteration.

    A Hessian pass costs ``N M^2`` flops (a syrk), a gradient pass
    ``O(N M (d + K))``. The first pass brings the exact Hessian; in between
    Hessian passes the model Hessian is updated by BFGS from the gradients
    that every pass brings anyway. A trial pass brings an exact Hessian when

    - the previous step made slow progress (the Newton decrement fell by less
      than :data:`_REFRESH`): the model is off, exact steps converge faster;
    - the next point should be the last (the decrement and the gradient,
      extrapolated by their last ratio, meet the tolerance): the final step,
      taken without a verifying pass, is then an exact Newton step.

    When the tolerance is met while the model is more than one update away
    from an exact Hessian, one more pass brings one: the final step of a
    converged fit is a Newton step with an exact Hessian at most one step old.
    """
    reply = yield _Request(w, hessian=True)
    L, g, H = obj.value(reply.loss, w), obj.gradient(reply.grad, w), reply.hessian
    n_iter, stalled, age = 0, False, 0  # age: BFGS updates since the last exact Hessian
    last_decrement = last_gmax = math.inf
    while True:
        step = obj.newton_step(H, g)
        decrement = -float(g @ step)  # lambda^2: L - min of the quadratic model = lambda^2 / 2
        gmax = float(np.max(np.abs(g)))
        done = gmax <= tol or decrement / 2 <= obj.ftol * max(abs(L), 1.0)
        if done and age <= 1:
            # the last step is below tolerance: take it without a verifying pass
            return _Outcome(w + step, L - decrement / 2, n_iter, True, "converged")
        if stalled:
            return _Outcome(w, L, n_iter, True, "converged: relative decrease of the loss below ftol")
        if n_iter >= max_iter:
            return _Outcome(w, L, n_iter, False, f"max_iter={max_iter} reached")
        if done or age == 0:
            # done with an old model: one more (exact) step; with an exact Hessian here,
            # the Hessian of the next point is not needed (this one is one step old there)
            fresh = done
        else:
            slow = decrement > _REFRESH * last_decrement and not obj.converges_next(decrement, L)
            last = (
                gmax * (gmax / last_gmax) <= tol
                or decrement * (decrement / last_decrement) / 2 <= obj.ftol * max(abs(L), 1.0)
            )
            fresh = slow or last
        step = _capped(step, w)
        trial = yield _Request(w + step, hessian=fresh, direction=step)
        s = yield from _line_search(obj, w, float(g @ step), step, trial)
        if s is None:
            return _Outcome(w, L, n_iter, False, "line search found no decrease")
        w_new = w + s * step
        reply = trial if s == 1.0 else (yield _Request(w_new, hessian=True))
        L_new, g_new = obj.value(reply.loss, w_new), obj.gradient(reply.grad, w_new)
        # a stall of a full step is rounding (float32 scores); after backtracking it is not.
        # The loss at w from the trial's own pass has the same rounding as L_new.
        stalled = s == 1.0 and obj.stalled(obj.value(trial.line[-1], w), L_new)
        if reply.hessian is not None:
            H, age = reply.hessian, 0
        else:
            H, age = obj.quasi_newton_update(H, w_new - w, g_new - g), age + 1
        w, L, g, last_decrement, last_gmax = w_new, L_new, g_new, decrement, gmax
        n_iter += 1
