"""The search estimators' entry point: one search, or a search that grows M in stages.

With ``n_components="auto"`` (:attr:`SearchSettings.growth` set), the
search runs in stages (:mod:`dxrf.search.growth`): the first searches the
bandwidths and nested prefixes of up to :data:`~dxrf.search.growth.FIRST_STAGE_MAX`
features in one read of X; each next stage reads X once at twice the features,
at the bandwidth chosen so far and the penalties near the last stage's
choice (:func:`alpha_window`), while that pays and fits the budget. The model
is the best stage's, refitted from that stage's statistics.
"""

from __future__ import annotations

import dataclasses
import time
import warnings

import numpy as np

from dxrf.search.driver import SearchOutcome, run_search, stage_plan
from dxrf.search.grid import parse_bandwidth
from dxrf.search.growth import Stage, first_stage_components, grow, stage_losses
from dxrf.search.settings import SearchSettings

__all__ = ["search"]


def search(X: object, T: object, s: SearchSettings, classes: np.ndarray | None = None,
           sample_weight: object = None) -> SearchOutcome:
    """Run the search ``s`` describes on checked ``X``, targets ``T`` and ``sample_weight``.

    See :func:`dxrf.search.driver.run_search`; with ``s.growth`` the search
    grows M in stages, and the outcome's attributes add ``growth_`` (the
    stages, their validation losses and seconds, and why the growth stopped).
    """
    if s.growth is None:
        return run_search(X, T, s, classes, sample_weight)
    return _grown(X, T, s, classes, sample_weight)


#: a later stage validates the penalties within this factor of the last stage's choice (at least
#: three): each costs an ``M^3 / 3`` factorisation there (at M = 8000, 3.7 s of a stage's algebra
#: per penalty), and the best penalty moves little between one M and twice it
ALPHA_WINDOW = 100.0


def alpha_window(alphas: np.ndarray, chosen: float) -> np.ndarray:
    """The penalties of ``alphas`` within :data:`ALPHA_WINDOW` of ``chosen``, or the three nearest it (in log)."""
    alphas = np.asarray(alphas, dtype=np.float64)
    if chosen <= 0 or np.any(alphas <= 0):
        return alphas
    distance = np.abs(np.log(alphas) - np.log(chosen))
    near = distance <= np.log(ALPHA_WINDOW) * (1 + 1e-9)
    if near.sum() < 3:
        near = np.zeros(alphas.size, dtype=bool)
        near[np.argsort(distance, kind="stable")[:3]] = True
    return alphas[near]


def _stage_settings(s: SearchSettings, ms: list[int], bandwidth: object = None, alpha: float | None = None) -> SearchSettings:
    grid = dataclasses.replace(s.grid, n_components=np.asarray(sorted(ms), dtype=np.int64), n_candidates=int(max(ms)))
    if bandwidth is not None:  # the value chosen so far: a number or lengthscales
        spec = parse_bandwidth(np.asarray(bandwidth, dtype=np.float64) if np.ndim(bandwidth) else float(bandwidth))
        grid = dataclasses.replace(grid, bandwidths=(spec,))
    if alpha is not None:
        grid = dataclasses.replace(grid, alphas=alpha_window(grid.alphas, alpha))
    return dataclasses.replace(s, grid=grid)


def _grown(X: object, T: object, s: SearchSettings, classes: np.ndarray | None, w: object) -> SearchOutcome:
    n_rows = int(X.shape[0])
    budget = s.growth
    chosen: dict = {}
    caught: list[list] = []  # each stage's warnings
    passes: list[int] = []
    times: list[dict] = []

    def run_stage(ms: list[int], first: bool) -> tuple[SearchOutcome, Stage]:
        t0 = time.perf_counter()
        stage_s = _stage_settings(s, ms, None if first else chosen["bandwidth"], None if first else chosen["alpha"])
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            outcome = run_search(X, T, stage_s, classes, w)
        caught.append(said)
        attrs = outcome.attributes
        passes.append(attrs["n_passes_"])
        times.append(attrs["search_times_"])
        if first:
            chosen["bandwidth"] = attrs["bandwidth_"]
            chosen["text"] = attrs["best_params_"]["bandwidth"]
        chosen["alpha"] = attrs["alpha_"]  # the next stage's penalties surround the last one's choice
        spent, solver, estimate = attrs["search_times_"], attrs["search_solver_"], attrs.get("search_plan_estimate_")
        stage = Stage(sorted(int(m) for m in ms), stage_losses(attrs["cv_results_"]), len(stage_s.grid.bandwidths),
                      spent["pass"], spent["algebra"], time.perf_counter() - t0, solver,
                      None if estimate is None else estimate[f"{solver}_ops"])
        return outcome, stage

    def fits(m: int) -> tuple[str, float | None] | None:
        # the next stage's plan as run_search will make it (the Gram's statistics, or the conjugate gradient)
        return stage_plan(_stage_settings(s, [m], chosen["bandwidth"], chosen["alpha"]), X, T, classes)

    first = first_stage_components(n_rows, len(s.grid.bandwidths), budget)
    growth = grow(run_stage, first, n_rows, budget, fits)
    outcome = growth.outcome
    # the chosen stage's notes, less the advice to extend n_components (the growth did) and, after
    # the first stage, to extend alphas when the choice is at its window's edge, not the grid's
    attrs = dict(outcome.attributes)
    inner = growth.chosen > 0 and s.grid.alphas.min() < attrs["alpha_"] < s.grid.alphas.max()
    for w_ in caught[growth.chosen]:
        text = str(w_.message)
        if "n_components" not in text and not (inner and "of alphas" in text):
            warnings.warn_explicit(w_.message, w_.category, w_.filename, w_.lineno)
    stages = growth.stages
    attrs["n_passes_"] = sum(passes)
    attrs["search_times_"] = {k: float(sum(t[k] for t in times)) for k in attrs["search_times_"]}
    if growth.chosen > 0:
        # later stages search one bandwidth: report it as the first stage's choice was given
        attrs["best_params_"] = {**attrs["best_params_"], "bandwidth": chosen["text"]}
    attrs["growth_"] = growth.as_dict()
    attrs["n_components_searched_"] = np.array(sorted({m for st in stages for m in st.n_components}), dtype=np.int64)
    return dataclasses.replace(outcome, attributes=attrs)
