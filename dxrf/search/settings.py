"""What a search is asked to do: its settings, checked once, and the grid they span."""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from dxrf.core.validation import ParameterTypeError, is_integer
from dxrf.kernels.landmarks import LANDMARK_KERNELS
from dxrf.core.validation import check_choice
from dxrf.search.grid import SearchGrid, check_grid
from dxrf.search.growth import GrowthBudget

__all__ = [
    "DEFAULT_BANDWIDTHS", "ARD_BANDWIDTHS", "ARD_MAX_COLUMNS", "EVIDENCE_BANDWIDTHS", "ARD_MIN_ROWS", "DEFAULT_N_COMPONENTS", "DEFAULT_ALPHAS", "SCORINGS", "LEVERAGE_ROWS", "BANDWIDTH_CHOICES",
    "FEATURES", "SearchSettings", "search_grid", "resolve_seed", "resolve_auto", "AUTO_HOLDOUT_ROWS",
    "learns_lengthscales",
]

DEFAULT_BANDWIDTHS = ("median*0.25", "median*0.5", "median", "median*2", "median*4")
#: the growing default's bandwidths (gaussian kernel): the learned lengthscales and two rescalings
#: the learned lengthscales and two shrinkings: lengthscales of maximum evidence on a sample
#: of 2000 rows are those a GP of 2000 rows can resolve, and more rows resolve shorter ones.
#: Measured (stage 1, split 0 of six UCI sets, twice): "ard*1.4" never validated best; "ard*0.7"
#: did on elevators and bike, at the grid's edge (bike: validation MSE 0.0012 against 0.0020 at "ard")
ARD_BANDWIDTHS = ("ard*0.5", "ard*0.7", "ard")
#: above this many columns the growing default learns one lengthscale ("evidence") instead of one
#: per column: ARD fits d + 2 hyperparameters to the 2000-row sample, which held at d = 105 (Adult,
#: one-hot) and over-fitted at d = 784 (MNIST: the noise at its bound, pixel lengthscales of 0.004,
#: 6.3 % test error at M = 2000 against 2.9 % with one lengthscale), in 100 s against 15 s
ARD_MAX_COLUMNS = 128
#: the growing default's bandwidths above ARD_MAX_COLUMNS: one lengthscale of maximum evidence and
#: its rescalings (MNIST, M = 2000: hold-out error 3.1 %, 2.9 % at factors 0.7 and 1)
EVIDENCE_BANDWIDTHS = ("evidence*0.7", "evidence", "evidence*1.4")
#: fewer rows than this learn no lengthscales (the GP evidence of a tiny sample is unreliable)
ARD_MIN_ROWS = 200
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
    growth: GrowthBudget | None = None  # n_components="auto": grow M in stages within this budget
    solver: str = "auto"  # Nystrom configurations: "gram" statistics, "pcg" conjugate gradient, or the cheaper

    @property
    def nystroem(self) -> bool:
        return self.features == "nystroem"


#: from this many rows a growing search validates on a 20% hold-out instead of 5 folds
AUTO_HOLDOUT_ROWS = 10_000


def resolve_auto(params: dict, n_rows: int | None = None, n_columns: int | None = None) -> dict:
    """A search's parameters with their ``"auto"`` values resolved (for ``n_rows`` x ``n_columns`` data when known).

    * ``features="auto"``: Nyström features for a growing search
      (``n_components="auto"``) when the kernel has landmarks and only the
      plain features are searched (no selection, no candidate counts), else
      random Fourier features (as before for given grids).
    * ``dtype="auto"``: float64 for Nyström features (whose kernel values are
      whitened by ``K_MM^{-1/2}``: float32 values cost accuracy at small
      penalties), float32 for Fourier features.
    * ``bandwidths="auto"``: for a growing search with the gaussian kernel on
      :data:`ARD_MIN_ROWS` rows or more, the lengthscales learned by GP
      evidence and two rescalings: one per column (:data:`ARD_BANDWIDTHS`)
      up to :data:`ARD_MAX_COLUMNS` columns, one for all of them above
      (:data:`EVIDENCE_BANDWIDTHS`); else multiples of the median heuristic
      (:data:`DEFAULT_BANDWIDTHS`).
    * ``n_components="auto"``: grown in stages (:mod:`dxrf.search.staged`);
      a placeholder here, where only the grid's other axes are checked.
    * ``cv="auto"``: 5 folds, or a 20% hold-out for a growing search on
      :data:`AUTO_HOLDOUT_ROWS` rows or more (each fold costs an ``M x M``
      statistic and an eigendecomposition per ``M``).
    """
    p = dict(params)
    growing = _is_auto(p.get("n_components"))
    plain = list(p.get("selections", ("none",))) == ["none"]
    if _is_auto(p.get("features")):
        simple = growing and plain and p.get("n_candidates") is None and p.get("candidate_ratio") is None
        p["features"] = "nystroem" if simple and p.get("kernel") in LANDMARK_KERNELS else "fourier"
    if _is_auto(p.get("dtype")):
        p["dtype"] = "float64" if p["features"] == "nystroem" else "float32"
    if _is_auto(p.get("bandwidths")):
        ard = growing and p.get("kernel") == "gaussian" and (n_rows is None or n_rows >= ARD_MIN_ROWS)
        wide = n_columns is not None and n_columns > ARD_MAX_COLUMNS
        p["bandwidths"] = list((EVIDENCE_BANDWIDTHS if wide else ARD_BANDWIDTHS) if ard else DEFAULT_BANDWIDTHS)
    if growing:
        p["n_components"] = [1]
    if _is_auto(p.get("cv")):
        p["cv"] = 0.2 if growing and n_rows is not None and n_rows >= AUTO_HOLDOUT_ROWS else 5
    return p


def learns_lengthscales(params: dict, n_rows: int | None = None, n_columns: int | None = None) -> bool:
    """Whether a search of ``params`` on ``n_rows`` x ``n_columns`` data learns its bandwidths by GP evidence.

    True when a bandwidth (given, or ``"auto"`` resolved) is an ``"ard"`` or
    ``"evidence"`` multiple: the search then sets the columns' scales itself.
    """
    specs = resolve_auto(params, n_rows, n_columns)["bandwidths"]
    specs = [specs] if isinstance(specs, str) else specs
    return any(isinstance(b, str) and re.search(r"\b(ard|evidence)\b", b) is not None for b in specs)


def _is_auto(value: object) -> bool:
    return isinstance(value, str) and value == "auto"


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
    if (grid.needs_ard or grid.needs_evidence) and params["kernel"] != "gaussian":
        raise ValueError(f"'ard' and 'evidence' bandwidths learn the lengthscales of a gaussian kernel; "
                         f"kernel={params['kernel']!r}: give numbers or 'median' multiples")
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
