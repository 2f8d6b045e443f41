"""L2-penalised logistic regression on random features, in few passes over the data.

Objective of one binary problem (labels ``t in {-1, +1}``, scores
``f = z(x)^T theta + beta``)::

    L(theta, beta) = (1/N) sum_n log(1 + exp(-t_n f_n)) + (alpha/2) |theta|^2

with the intercept ``beta`` unpenalised. This is scikit-learn's
``LogisticRegression(C=1 / (N * alpha))``, which minimises
``C * sum(loss) + |theta|^2 / 2``. ``K > 2`` classes are solved one-vs-rest:
``K`` independent binary problems advanced *together*, so a pass over the data
serves every class at once (each class keeps its own iterate, step sizes and
convergence test).

Everything touching data is a pass: every row chunk is mapped by
:func:`~.sums._block_sums` (a pure NumPy function: features tile by tile into one
reused buffer, scores, loss, gradient and optionally Hessians,
Hessian-vector products or line-search losses), the partial sums are
tree-reduced by the pass engine (:func:`dxrf.engine.run_pass`), and the
solver does small dense algebra on the totals. The
N x M feature matrix is never formed.

Solvers (``solver=``):

``"newton"``
    Newton with Hessians only where they pay. A pass accumulates the loss,
    the gradient and, when asked, the K Hessians
    ``sum_n w_n [z_n; 1][z_n; 1]^T`` (``w = sigma(f)(1 - sigma(f))``) at the
    point it evaluates: a Hessian costs ``N M^2`` flops (a syrk), the rest
    of a pass ``O(N M (d + K))``. The first pass brings the Hessian; later
    passes bring one only when the previous step made slow progress or when
    the next point should be the last (so that the final step is an exact
    Newton step); in between, the model Hessian is updated by BFGS from the
    gradients every pass brings anyway. On random features this halves the
    cost of a fit against a Hessian in every pass (about twice as many
    passes, two of them with a Hessian). An iteration is ONE pass: the pass
    that evaluates the trial point ``theta + Delta`` also gives the gradient
    (and Hessian) for the next iteration, and the losses along the segment
    ``theta + s Delta, s = 1/2, 1/4, ..., 2^-10`` and at ``theta`` itself
    (cheap: one more score vector per row). The full step is taken when it
    passes the Armijo test against the loss at ``theta`` from the same pass
    (so both carry the same rounding of float32 scores) or when the
    objective still decreases at its end (then, by convexity, it
    decreased). Otherwise (early iterations, far-off warm starts) the best
    grid step is taken and one more pass evaluates it there, with a
    Hessian: such an iteration costs TWO passes (more only when no grid step
    decreases the loss: loss-only passes then continue the grid, ten
    halvings each, at most three; steps are also capped in length, see
    :func:`~.newton._capped`). The first pass evaluates the starting point, so
    ``n_iter`` iterations without backtracking cost ``n_iter + 1`` passes;
    the last step, once its predicted decrease is below tolerance, is taken
    without a verifying pass. With ``N`` well above ``M`` the Hessians are
    summed over a fixed sample of the rows (``hessian_rows``; gradients and
    losses always over all rows), which makes a Hessian pass cost little
    more than a gradient pass; BFGS updates and the line search are
    unchanged. Memory: ``K (M+1)^2 * 8`` bytes of Hessians per
    task and per partial sum in the reduction (the engine's fan-in keeps a
    merge task's group of them under its memory cap).
``"lbfgs"``
    scipy's L-BFGS-B, one pass per function-and-gradient evaluation; memory
    O(M K). Its line search compares function values, so float32 features
    get float64 scores here (float64 coefficients and a float64 copy of each
    tile: a few percent of a pass); float32 scores make the objective steppy
    at ~1e-10 relative and stall it.
``"newton-cg"``
    Truncated Newton: conjugate gradients on Hessian-vector products, one pass
    per product plus one per trial point (same line search as ``"newton"``).
    Memory O(M K).
``"auto"``
    ``"newton"`` when the K Hessians fit in :data:`NEWTON_MAX_HESSIAN_BYTES`
    and ``M <= NEWTON_MAX_COMPONENTS`` (beyond that one Newton pass costs
    K N M^2 flops, more than many L-BFGS passes), else ``"lbfgs"``.

The K classes advance in lockstep: one pass serves every unfinished class,
whatever it needs (a Hessian, a gradient, a Hessian-vector product). Each
class's solver is a generator yielding requests; scipy's L-BFGS runs in a
helper thread bridged to such a generator.

Convergence (per class): the max-norm of the gradient of ``L`` (a mean, so
independent of N) is ``<= tol``, or the predicted (Newton decrement) or
observed decrease of ``L`` is below ``ftol * max(|L|, 1)`` with
``ftol = 64 eps(float64)`` (scikit-learn's L-BFGS setting), or ``1e-11`` for
Newton and Newton-CG on float32 features, whose float32 scores make the
objective noisy at about that level. A small fit (``N M (M + d)`` at most
:data:`dxrf.stats.tiles.WIDE_WORK`, as for the statistics pass) computes
row-independent float32 features and every product from them in float64
(scores, gradients, Hessians, directions), so it keeps the float64 ``ftol``;
integer weights then equal repeated rows to float64 rounding.

Modules
-------
``messages`` (the solvers' requests and replies), ``objective``
(:class:`_Objective`, softplus, label checks), ``sample`` (the Hessian row
sample by global row index), ``sums`` (the per-block kernel), ``blocks`` (the
public per-block functions), ``passes`` (the pass runner on :mod:`dxrf.engine`),
``batching`` (requests of the per-class solvers served by shared passes),
``newton``, ``newton_cg`` and ``lbfgs`` (the solvers) and ``fit``
(:func:`fit_logistic`, :func:`choose_solver`); ``softmax`` (the per-row terms
of the multinomial loss) and ``multinomial`` (:func:`fit_multinomial`: one
softmax over all K classes, by L-BFGS or Newton-CG on the same passes).
"""

from __future__ import annotations

# the names other modules and tests import from here, private ones included
from dxrf.solvers.logistic.batching import _batch_pass, _drive
from dxrf.solvers.logistic.fit import (
    NEWTON_MAX_COMPONENTS,
    NEWTON_MAX_HESSIAN_BYTES,
    SOLVERS,
    LogisticResult,
    choose_solver,
    fit_logistic,
    newton_hessian_bytes,
)
from dxrf.solvers.logistic.messages import _Outcome, _Reply, _Request
from dxrf.solvers.logistic.multinomial import MULTINOMIAL_SOLVERS, MultinomialResult, fit_multinomial
from dxrf.solvers.logistic.objective import _LINE_STEPS, _check_labels, _Objective, _softplus
from dxrf.solvers.logistic.passes import _PassRunner
from dxrf.solvers.logistic.sample import _HESS_BLOCK, HESSIAN_ROWS_PER_PARAMETER, _hessian_period, _hessian_runs
from dxrf.solvers.logistic.softmax import class_index, softmax_rows
from dxrf.solvers.logistic.blocks import LogisticSums, logistic_block, logistic_hvp_block, softmax_block, softmax_hvp_block
from dxrf.solvers.logistic.sums import _block_sums, _finalize, _make_spec, _Spec, _Sums

__all__ = [
    "NEWTON_MAX_COMPONENTS",
    "NEWTON_MAX_HESSIAN_BYTES",
    "MULTINOMIAL_SOLVERS",
    "LogisticResult",
    "MultinomialResult",
    "LogisticSums",
    "choose_solver",
    "fit_logistic",
    "fit_multinomial",
    "logistic_block",
    "logistic_hvp_block",
    "newton_hessian_bytes",
    "softmax_block",
    "softmax_hvp_block",
    "softmax_rows",
]
