"""What a search is asked to do: its settings, checked once, and the grid they span."""

from __future__ import annotations

import dataclasses

import numpy as np

from dxrf.core.validation import ParameterTypeError, is_integer
from dxrf.kernels.landmarks import LANDMARK_KERNELS
from dxrf.core.validation import check_choice
from dxrf.search.grid import SearchGrid, check_grid

__all__ = [
    "DEFAULT_BANDWIDTHS", "DEFAULT_N_COMPONENTS", "DEFAULT_ALPHAS", "SCORINGS", "LEVERAGE_ROWS", "BANDWIDTH_CHOICES",
    "FEATURES", "SearchSettings", "search_grid", "resolve_seed",
]

DEFAULT_BANDWIDTHS = ("median*0.25", "median*0.5", "median", "median*2", "median*4")
DEFAULT_N_COMPONENTS = (100, 300, 1000)
DEFAULT_ALPHAS = tuple(10.0**p for p in range(-10, 1))
SCORINGS = ("r2", "accuracy")
LEVERAGE_ROWS = ("train", "all")
BANDWIDTH_CHOICES = ("joint", "plain", "plain-first")
FEATURES = ("fourier", "nystroem")


@dataclasses.dataclass(frozen=True)
class SearchSettings:
    """A search estimator's parameters, as the search driver reads them (checked by the estimator)."""

    grid: SearchGrid
    task: str
    features: str
    kernel: str
    sampling: str
    dtype: str
    cv: object
    cv_seed: int
    fit_intercept: bool
    leverage_rows: str
    bandwidth_choice: str
    return_train_score: bool
    keep_models: bool
    scoring: str
    random_state: object

    @property
    def nystroem(self) -> bool:
        return self.features == "nystroem"


def search_grid(params: dict) -> SearchGrid:
    """The grid of a search's parameters (each one already checked), with the checks that span several.

    ``params`` holds the estimator's parameters by name.
    """
    grid = check_grid(
        params["bandwidths"], params["n_components"], params["selections"], params["lams"], params["rhos"],
        params["alphas"], params["n_candidates"], params["candidate_ratio"],
    )
    choice = params["bandwidth_choice"]
    if choice != "joint" and all(v.criterion is not None for v in grid.variants):
        raise ValueError(f"bandwidth_choice={choice!r} chooses the bandwidth by the plain features: add 'none' to selections")
    if check_choice(params["features"], "features", FEATURES) == "nystroem":
        check_choice(params["kernel"], "kernel", LANDMARK_KERNELS)
        if any(v.criterion is not None for v in grid.variants):
            raise ValueError(
                f"selections={params['selections']!r}: with features='nystroem' only selections=['none'] is "
                "searched (the selections choose among random Fourier candidates)"
            )
        for name in ("n_candidates", "candidate_ratio"):
            if params[name] is not None:
                raise ValueError(
                    f"{name}={params[name]!r} is for random Fourier candidates; with features='nystroem' "
                    f"give {name}=None (the landmarks are the first max(n_components) rows of one uniform sample)"
                )
    return grid


def resolve_seed(random_state: object) -> int:
    """One integer seeding every draw of a search, so the refit repeats the search's selection."""
    if is_integer(random_state):
        return int(random_state)
    if random_state is None:
        return int(np.random.default_rng().integers(2**31))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(2**31))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(2**31))
    raise ParameterTypeError(f"random_state must be an int, RandomState, Generator or None, got {random_state!r}")
