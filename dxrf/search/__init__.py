"""The model search: its grid, the pass and validation of every configuration, its results, the refit.

:func:`~dxrf.search.driver.run_search` runs a whole search; the estimators
that delegate to it are :class:`dxrf.RandomFeatureRidgeCV` and
:class:`dxrf.RandomFeatureClassifierCV` (:mod:`dxrf.learners.search_cv`).
"""

from dxrf.search.evaluate import GridErrors, fold_pairs, prefix, r2_scores, select_largest, validate_grid
from dxrf.search.landmarks import landmark_subset, validate_landmarks
from dxrf.search.grid import SELECTIONS, BandwidthSpec, SearchGrid, Variant, check_grid, parse_bandwidth
from dxrf.search.results import best_index, format_table, results_table, warn_at_edges
from dxrf.search.scoring import stacked_models, validation_accuracy
from dxrf.search.settings import SearchSettings
from dxrf.search.driver import SearchOutcome, run_search

__all__ = [
    "SELECTIONS",
    "BandwidthSpec",
    "SearchGrid",
    "Variant",
    "check_grid",
    "parse_bandwidth",
    "GridErrors",
    "fold_pairs",
    "prefix",
    "r2_scores",
    "select_largest",
    "validate_grid",
    "landmark_subset",
    "validate_landmarks",
    "best_index",
    "format_table",
    "results_table",
    "warn_at_edges",
    "stacked_models",
    "validation_accuracy",
    "SearchSettings",
    "SearchOutcome",
    "run_search",
]
