"""A search that grows the number of features while it pays: stages of the one-pass search.

The first stage searches a few bandwidths and the nested prefixes
``M, M/2, M/4, ...`` of one set of features in one read of X. While the
largest ``M`` still validates better than its half by more than
``min_improvement``, the next stage reads X once more at twice the features,
at the bandwidth chosen so far, if the time and memory it is predicted to take
fit the budget. The chosen model is the best stage's, refitted from that
stage's statistics (no extra pass).

The prediction scales the last stage's measured seconds: its pass by the
statistics' arithmetic (``N M^2`` per bandwidth) and its dense algebra by
``M^3``. Before any stage is measured, the first stage's size is bounded by a
deliberately low arithmetic rate (:data:`ASSUMED_RATE`), so that a large data
set starts small.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["GrowthBudget", "Stage", "Growth", "first_stage_components", "stage_losses", "grow"]

#: multiply-adds per second assumed for the first stage's size (2 cores, float64 Gram and
#: kernel values, before any measurement): low on purpose, the stages measure the rest
ASSUMED_RATE = 1e10

#: the first stage's largest M when the data and the budget allow it
FIRST_STAGE_MAX = 2000

#: no stage takes more than 1/this of the rows as landmarks: at M = N/2 the statistics
#: (N M^2) cost about twice the whitening (M^3), and exact kernel ridge is near. A quarter
#: stopped pol (13 500 rows) at M = 2000 while M = 1000 -> 2000 still cut its validation
#: loss by 27 %
MAX_ROW_FRACTION = 2


@dataclasses.dataclass(frozen=True)
class GrowthBudget:
    """What a growing search may spend.

    Attributes
    ----------
    max_components : int
        No stage searches more features than this.
    time_budget : float or None
        Seconds: no stage starts that is predicted to end after this many
        seconds from the start of the search (None: no limit).
    min_improvement : float
        A stage at twice the features is read only while the last doubling
        lowered the validation loss by more than this fraction.
    """

    max_components: int = 8000
    time_budget: float | None = 300.0
    min_improvement: float = 0.01


@dataclasses.dataclass
class Stage:
    """One read of X: the numbers of features it searched, their best validation losses and its cost."""

    n_components: list[int]
    losses: dict[int, float]
    n_bandwidths: int
    seconds_pass: float
    seconds_algebra: float
    seconds: float
    solver: str = "gram"  # "pcg": its configurations solved by conjugate gradient
    ops: float | None = None  # its plan's estimated operations (None: no estimate)

    @property
    def best(self) -> float:
        return min(self.losses.values())

    @property
    def largest(self) -> int:
        return max(self.n_components)


@dataclasses.dataclass
class Growth:
    """The stages a growing search read, the one chosen, and why it stopped."""

    stages: list[Stage]
    chosen: int
    stop_reason: str
    outcome: Any = None  # the chosen stage's search outcome

    def as_dict(self) -> dict:
        """The fitted attribute ``growth_``: a JSON-able summary."""
        return {
            "stages": [
                {"n_components": s.n_components, "validation_loss": [s.losses[m] for m in s.n_components],
                 "bandwidths": s.n_bandwidths, "seconds": s.seconds, "solver": s.solver}
                for s in self.stages
            ],
            "chosen_stage": self.chosen,
            "stop_reason": self.stop_reason,
        }


def first_stage_components(n_rows: int, n_bandwidths: int, budget: GrowthBudget, *,
                           rate: float = ASSUMED_RATE) -> list[int]:
    """The first stage's nested numbers of features: ``M, M/2, M/4, M/8`` (at least 1).

    ``M`` is at most :data:`FIRST_STAGE_MAX`, ``budget.max_components``, a
    half of the rows, and what a third of the time budget allows at
    ``rate`` multiply-adds a second (``n_rows M^2`` per bandwidth).
    """
    m = min(FIRST_STAGE_MAX, int(budget.max_components), max(1, n_rows // MAX_ROW_FRACTION))
    if budget.time_budget is not None:
        affordable = math.sqrt(max(budget.time_budget, 1e-9) / 3 * rate / max(1, n_rows * n_bandwidths))
        m = min(m, max(16, int(affordable)))
    out = sorted({max(1, m >> k) for k in range(4)})
    return out


def stage_losses(results: dict) -> dict[int, float]:
    """The best validation loss (``1 - mean_test_score``) per number of features of a ``cv_results_``."""
    ms = np.asarray([p["n_components"] for p in results["params"]])
    loss = 1.0 - np.nan_to_num(np.asarray(results["mean_test_score"], dtype=float), nan=-np.inf)
    return {int(m): float(loss[ms == m].min()) for m in np.unique(ms)}


def _improves(better: float, worse: float, fraction: float) -> bool:
    """``better`` lowers ``worse`` by more than ``fraction`` of it."""
    return better < worse - fraction * abs(worse)


def _predict(stage: Stage, m_next: int, bandwidths_next: int, plan: tuple[str, float | None] = ("gram", None)) -> float:
    """Seconds of a stage at ``m_next`` features and ``bandwidths_next`` bandwidths, scaled from ``stage``.

    ``plan`` is the next stage's ``(solver, estimated operations)``. Between
    two Gram stages the pass scales by ``M^2`` and the algebra by ``M^3``;
    where either stage is solved by conjugate gradient, the seconds scale by
    the two plans' estimated operations (the same units).
    """
    solver, ops = plan
    if (stage.solver != "gram" or solver != "gram") and ops and stage.ops:
        return stage.seconds * ops / stage.ops
    r = m_next / stage.largest
    other = max(0.0, stage.seconds - stage.seconds_pass - stage.seconds_algebra)
    return (stage.seconds_pass * r**2 * bandwidths_next / stage.n_bandwidths
            + stage.seconds_algebra * r**3 * bandwidths_next / stage.n_bandwidths + other)


def grow(
    run_stage: Callable[[Sequence[int], bool], tuple[Any, Stage]],
    first: Sequence[int],
    n_rows: int,
    budget: GrowthBudget,
    fits: Callable[[int], tuple[str, float | None] | None] = lambda m: ("gram", None),
    clock: Callable[[], float] | None = None,
) -> Growth:
    """Run stages while the largest M pays off and the next stage fits the budget.

    Parameters
    ----------
    run_stage : callable
        ``run_stage(n_components, first)`` runs one search (one read of X for
        its statistics) over those numbers of features, all bandwidths when
        ``first`` is True, else the bandwidth chosen so far; returns its
        outcome and :class:`Stage`.
    first : list of int
        The first stage's numbers of features (:func:`first_stage_components`).
    n_rows : int
        Rows of X: no stage asks for more than ``1 / MAX_ROW_FRACTION`` of them as features.
    budget : GrowthBudget
    fits : callable
        ``fits(m)``: the plan of a stage of ``m`` features, ``(solver,
        estimated operations or None)``, or None when none fits the workers' memory.
    clock : callable, optional
        Seconds since the search began (default: measured from this call).

    Returns
    -------
    Growth
    """
    import time

    start = time.perf_counter()
    clock = clock or (lambda: time.perf_counter() - start)
    outcome, stage = run_stage(list(first), True)
    stages, best = [stage], outcome  # only the best stage's outcome is kept (its statistics are M x M)
    chosen = 0
    while True:
        last = stages[-1]
        ms = sorted(last.losses)
        if len(stages) == 1:
            # the first stage's own doubling: did its largest M beat its half?
            if len(ms) < 2 or not _improves(last.losses[ms[-1]], last.losses[ms[-2]], budget.min_improvement):
                reason = f"M={ms[-1]} validated within {budget.min_improvement:.0%} of M={ms[-2]}" if len(ms) > 1 \
                    else f"one number of features (M={ms[-1]}) fits the rows"
                break
        m_next = 2 * last.largest
        if m_next > budget.max_components:
            reason = f"max_components={budget.max_components} reached"
            break
        if m_next > n_rows // MAX_ROW_FRACTION:
            reason = f"M={m_next} would exceed half of the {n_rows} rows"
            break
        plan = fits(m_next)
        if plan is None:
            reason = f"M={m_next} would not fit the workers' memory"
            break
        predicted = _predict(last, m_next, 1, plan)
        if budget.time_budget is not None and clock() + predicted > budget.time_budget:
            reason = (f"M={m_next} was predicted to take {predicted:.0f} s, past time_budget={budget.time_budget:g} s "
                      f"({clock():.0f} s spent)")
            break
        outcome, stage = run_stage([m_next], False)
        stages.append(stage)
        if _improves(stage.best, stages[chosen].best, budget.min_improvement):
            chosen, best = len(stages) - 1, outcome
            continue
        if stage.best < stages[chosen].best:
            chosen, best = len(stages) - 1, outcome
        reason = f"M={m_next} validated within {budget.min_improvement:.0%} of M={last.largest}"
        break
    return Growth(stages, chosen, reason, best)
